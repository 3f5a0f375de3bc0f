// Package storagestate is what a storage extension tells the status page
// of its data dir: whether it refuses new data for lack of room. The dedup
// processor finds the extensions that report it through the host
// (Reporter), so that neither imports the other.
package storagestate

import "errors"

// State is a storage extension's data dir as the status page shows it.
type State struct {
	Directory string
	// FreeBytes is the room left on the directory's filesystem, -1
	// when not known.
	FreeBytes int64
	// FullClients are the clients refusing new data for lack of room
	// (their queues drain; what they took is kept).
	FullClients []string
	// RefusedWrites counts writes of new data refused for lack of
	// room since the process started.
	RefusedWrites int64
}

// Full says whether any client refuses new data.
func (s State) Full() bool { return len(s.FullClients) > 0 }

// Reporter is a storage extension that reports its data dir's state.
type Reporter interface {
	StorageState() State
}

// FullError is implemented by a storage error that refuses new data for
// lack of room on the data dir (retryable: the queue drains and room
// comes back).
type FullError interface {
	error
	DataDirFull() bool
}

// IsFull says whether err refuses new data for lack of room.
func IsFull(err error) bool {
	var f FullError
	return errors.As(err, &f) && f.DataDirFull()
}
