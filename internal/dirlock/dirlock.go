// Package dirlock holds a directory for one process: an exclusive flock
// on DIR/LOCK, which holds the PID of its holder. The gateway's data dir
// (internal/datadir) and log_storage's directory are held this way.
package dirlock

import "fmt"

// Name is the lock file under the directory.
const Name = "LOCK"

// HeldError says that another process (or another open of the file in
// this one) holds the directory.
type HeldError struct {
	Dir string
	// PID is the holder's, as its lock file says; 0 when it does not.
	PID int
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("%s is in use%s", e.Dir, e.Holder())
}

// Holder is " (pid N)" when the holder's PID is known, "" otherwise.
func (e *HeldError) Holder() string {
	if e.PID <= 0 {
		return ""
	}
	return fmt.Sprintf(" (pid %d)", e.PID)
}
