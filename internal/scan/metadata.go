package scan

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
)

// metadata is what the scan needs from a core metadata file (METADATA in a
// .dist-info directory, PKG-INFO in an .egg-info one).
type metadata struct {
	Name, Version         string
	NameLine, VersionLine int
}

func lineErrorf(line int, format string, args ...any) error {
	return &lineError{Line: line, Msg: fmt.Sprintf(format, args...)}
}

// parseMetadata reads the header block of a core metadata file: RFC 822
// style "Key: value" lines up to the first blank line, with continuation
// lines starting with whitespace. It stops reading at the blank line, so a
// long description is never read. Keys are matched case-insensitively; Name
// and Version must each appear exactly once.
func parseMetadata(r io.Reader) (metadata, error) {
	br := bufio.NewReader(r)
	var md metadata
	inHeader := false // a continuation line may follow
	var last *string  // Name or Version value a continuation line extends
	for n := 1; ; n++ {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A very long header line: gather it whole.
			buf := append([]byte(nil), line...)
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = br.ReadSlice('\n')
				buf = append(buf, line...)
			}
			line = buf
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return metadata{}, err
		}
		if n == 1 {
			line = bytes.TrimPrefix(line, []byte("\xef\xbb\xbf"))
		}
		text := strings.TrimRight(string(line), "\r\n")
		if strings.TrimSpace(text) == "" {
			break // end of headers (or of the file)
		}
		if isSpace(text[0]) {
			if !inHeader {
				return metadata{}, lineErrorf(n, "continuation line before any header")
			}
			if last != nil {
				*last = strings.TrimSpace(*last + " " + strings.TrimSpace(text))
			}
		} else {
			key, value, ok := strings.Cut(text, ":")
			if !ok {
				return metadata{}, lineErrorf(n, "not a header (no colon) in the header block")
			}
			value = strings.TrimSpace(value)
			inHeader, last = true, nil
			switch {
			case strings.EqualFold(key, "Name"):
				if md.NameLine != 0 {
					return metadata{}, lineErrorf(n, "second Name header")
				}
				md.Name, md.NameLine, last = value, n, &md.Name
			case strings.EqualFold(key, "Version"):
				if md.VersionLine != 0 {
					return metadata{}, lineErrorf(n, "second Version header")
				}
				md.Version, md.VersionLine, last = value, n, &md.Version
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
	}
	switch {
	case md.NameLine == 0:
		return metadata{}, errors.New("no Name header")
	case md.VersionLine == 0:
		return metadata{}, errors.New("no Version header")
	case md.Name == "":
		return metadata{}, lineErrorf(md.NameLine, "empty Name header")
	case md.Version == "":
		return metadata{}, lineErrorf(md.VersionLine, "empty Version header")
	case !validName(md.Name):
		return metadata{}, lineErrorf(md.NameLine, "invalid Name %s", excerpt(md.Name))
	case strings.ContainsFunc(md.Version, func(r rune) bool { return r < ' ' || r == 0x7f }):
		return metadata{}, lineErrorf(md.VersionLine, "control character in Version %s", excerpt(md.Version))
	}
	return md, nil
}
