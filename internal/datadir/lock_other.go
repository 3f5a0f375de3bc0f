//go:build !unix

package datadir

import "os"

// Lock is a no-op where flock is not available.
func Lock(dir string) (*os.File, error) { return nil, os.MkdirAll(dir, 0o750) }
