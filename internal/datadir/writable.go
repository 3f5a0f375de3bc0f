package datadir

import (
	"fmt"
	"os"
	"path/filepath"
)

// CheckWritable opens path for appending, creating it and its directory
// as the file exporter does, and closes it: a path that cannot be
// written stops the start with its name instead of a gateway that starts
// healthy and refuses every request.
func CheckWritable(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return fmt.Errorf("%s cannot be created: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
	if err != nil {
		return fmt.Errorf("%s cannot be opened for writing: %w", path, err)
	}
	if _, err := f.Write(nil); err != nil {
		_ = f.Close()
		return fmt.Errorf("%s cannot be written: %w", path, err)
	}
	return f.Close()
}
