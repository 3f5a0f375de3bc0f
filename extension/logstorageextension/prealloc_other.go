//go:build !linux

package logstorageextension

import (
	"errors"
	"os"
)

// preallocate is not supported here: only Linux's fallocate keeps the size.
func preallocate(*os.File, int64, int64, bool) error { return errors.ErrUnsupported }

// freeBytes is not known here.
func freeBytes(string) (int64, error) { return 0, errors.ErrUnsupported }
