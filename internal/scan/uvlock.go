package scan

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/pelletier/go-toml/v2"
)

// uvLockVersion is the uv.lock format version this scanner knows. uv changes
// the top-level version when the format changes incompatibly (revision
// counts compatible changes and is not checked).
const uvLockVersion = 1

// lockedPackage is one [[package]] of a uv.lock.
type lockedPackage struct {
	Name    string
	Version string
	Line    int
}

type uvLock struct {
	Version any `toml:"version"`
	Package []struct {
		Name    string `toml:"name"`
		Version string `toml:"version"`
	} `toml:"package"`
}

// parseUVLock reads the packages of a uv.lock. warning is set, and the
// packages are still returned, when the lockfile's version is missing or
// unknown: the [[package]] name and version fields have been stable, so they
// are read on a best-effort basis.
func parseUVLock(data []byte) (pkgs []lockedPackage, warning string, err error) {
	var lock uvLock
	if err := toml.Unmarshal(data, &lock); err != nil {
		return nil, "", tomlError(err)
	}
	switch v := lock.Version.(type) {
	case nil:
		warning = "no top-level version field: not a uv lockfile, or an unknown format; packages read on a best-effort basis"
	case int64:
		if v != uvLockVersion {
			warning = fmt.Sprintf("unknown uv.lock version %d (doubletake reads version %d); packages read on a best-effort basis", v, uvLockVersion)
		}
	default:
		warning = fmt.Sprintf("unknown uv.lock version %v (doubletake reads version %d); packages read on a best-effort basis", v, uvLockVersion)
	}

	headers := packageHeaders(data)
	lines := newLineIndex(data)
	for i, p := range lock.Package {
		if p.Name == "" || p.Version == "" {
			continue // virtual or dynamic packages carry no version
		}
		lp := lockedPackage{Name: p.Name, Version: p.Version}
		if len(headers) == len(lock.Package) {
			// Point at the version line inside this package's table.
			from, to := headers[i], len(data)
			if i+1 < len(headers) {
				to = headers[i+1]
			}
			if j := bytes.Index(data[from:to], []byte(`"`+p.Version+`"`)); j >= 0 {
				lp.Line = lines.line(from + j)
			} else {
				lp.Line = lines.line(from)
			}
		}
		pkgs = append(pkgs, lp)
	}
	return pkgs, warning, nil
}

// lineError is a problem with one line of a file (Line 0: the whole file).
type lineError struct {
	Line int
	Msg  string
}

func (e *lineError) Error() string { return e.Msg }

// tomlError turns a go-toml error into a lineError that carries the line.
func tomlError(err error) error {
	var de *toml.DecodeError
	if errors.As(err, &de) {
		row, _ := de.Position()
		return &lineError{Line: row, Msg: "invalid TOML: " + de.Error()}
	}
	return &lineError{Msg: "invalid TOML: " + err.Error()}
}

// packageHeaders returns the offsets of the [[package]] lines of a lockfile.
func packageHeaders(data []byte) []int {
	var offs []int
	for off := 0; off < len(data); {
		end := bytes.IndexByte(data[off:], '\n')
		if end < 0 {
			end = len(data) - off
		}
		if bytes.Equal(bytes.TrimSpace(data[off:off+end]), []byte("[[package]]")) {
			offs = append(offs, off)
		}
		off += end + 1
	}
	return offs
}
