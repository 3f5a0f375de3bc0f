package datadir

import (
	"errors"
	"fmt"
	"os"

	"github.com/doubletake/doubletake/internal/dirlock"
)

// LockName is the lock file under the data dir.
const LockName = dirlock.Name

// Lock takes the data dir for this process, creating it: an exclusive
// flock on dir/LOCK, which holds the PID of its holder (internal/dirlock).
// The lock lasts as long as the returned file stays open. A second
// process gets an error naming the dir and, when the file says, the PID
// holding it.
func Lock(dir string) (*os.File, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("--data-dir %s: %w", dir, err)
	}
	f, err := dirlock.Lock(dir)
	var held *dirlock.HeldError
	switch {
	case errors.As(err, &held):
		return nil, fmt.Errorf("--data-dir %s is in use by another gateway%s; stop it or give this one another --data-dir", dir, held.Holder())
	case err != nil:
		return nil, fmt.Errorf("--data-dir %s: %w", dir, err)
	}
	return f, nil
}
