//go:build !unix

package dirlock

import "os"

// Lock is a no-op where flock is not available: it returns a nil file.
func Lock(string) (*os.File, error) { return nil, nil }
