package scan

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// Every file the scan reads comes from a tree nobody has reviewed: a
// committed symbolic link may point at /proc/self/environ or /dev/zero, a
// FIFO may be named requirements.txt. Files are therefore opened through an
// os.Root, which refuses every path (and every symbolic link) that leaves
// the scanned root, only after a stat says the file is a regular file, and
// with O_NONBLOCK so that a FIFO swapped in after the stat cannot block the
// open; the opened descriptor is checked again with fstat. Reads are capped
// at Options.MaxFileBytes.

// afterStat, when set (by tests), runs between the stat and the open of a
// file, where a hostile tree could swap the file.
var afterStat func(rel string)

// errSkipped means the file was deliberately not read; the scanner has
// already recorded why as a not-judged entry.
var errSkipped = errors.New("skipped")

// openRegular opens rel inside root for reading if it is a regular file.
// display is the path shown in reports. A file that is not read for a
// reason that is not an error (a symbolic link out of the root, a FIFO, a
// device) is recorded as not judged and errSkipped is returned.
func (s *scanner) openRegular(root *os.Root, rel, display string) (*os.File, fs.FileInfo, error) {
	info, err := root.Stat(rel)
	if err != nil {
		if escapes(err) {
			s.notJudged(display, 0, SkipOutsideRoot, "a symbolic link out of the scanned root (or to an absolute path); not followed")
			return nil, nil, errSkipped
		}
		return nil, nil, err
	}
	if !info.Mode().IsRegular() {
		s.notJudged(display, 0, SkipSpecialFile, fmt.Sprintf("not a regular file (%s); not opened", fileType(info.Mode())))
		return nil, nil, errSkipped
	}
	if afterStat != nil {
		afterStat(rel)
	}
	f, err := root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		if escapes(err) {
			s.notJudged(display, 0, SkipOutsideRoot, "a symbolic link out of the scanned root (or to an absolute path); not followed")
			return nil, nil, errSkipped
		}
		return nil, nil, err
	}
	// The file may have been replaced between the stat and the open.
	opened, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !opened.Mode().IsRegular() || !os.SameFile(info, opened) {
		f.Close()
		s.notJudged(display, 0, SkipSpecialFile, "changed while being opened; not read")
		return nil, nil, errSkipped
	}
	return f, opened, nil
}

// escapes reports whether err is os.Root refusing a path that leaves it.
func escapes(err error) bool {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return err != nil && err.Error() == "path escapes from parent"
}

func fileType(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "named pipe"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeCharDevice != 0:
		return "character device"
	case m&fs.ModeDevice != 0:
		return "device"
	case m.IsDir():
		return "directory"
	}
	return "special file"
}

// readCapped reads all of f up to limit bytes. It returns an error naming
// the cap when the file is larger: a TOML file cut short cannot be parsed.
func readCapped(f *os.File, info fs.FileInfo, limit int64) ([]byte, error) {
	if info.Size() > limit {
		return nil, fmt.Errorf("file is %d bytes, over the %d-byte cap (--max-file-bytes); not read", info.Size(), limit)
	}
	var buf bytes.Buffer
	buf.Grow(int(info.Size()) + bytes.MinRead) // one allocation when the size holds
	if _, err := buf.ReadFrom(io.LimitReader(f, limit+1)); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("file is over the %d-byte cap (--max-file-bytes); not read", limit)
	}
	return data, nil
}

// rootFor opens the directory that holds a file named on the command line,
// so that a symbolic link given as PATH is not followed out of it either.
func rootFor(path string) (*os.Root, string, error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	r, err := os.OpenRoot(dir)
	return r, base, err
}
