// Package recovered holds what this process found damaged in its data dir
// at start and what it salvaged, and the queue entries that could not be
// decoded when they were sent: the dedup processor reports them in its
// metrics and on its status page until the process exits.
package recovered

import (
	"sync"
	"sync/atomic"
)

// File is one damaged storage file, moved aside and salvaged.
type File struct {
	Path    string // the file, as the collector opens it
	MovedTo string // where the damaged file was kept
	// Store is "queue" (an exporter's persistent queue) or "journal"
	// (dedup's journals), or "storage" for another component's file.
	Store string
	// Salvaged and Lost count items (queue: spans, log records or points;
	// journal: window entries); LostUncounted says that some loss could
	// not be counted (entries whose size was unreadable).
	Salvaged, Lost int64
	LostUncounted  bool
	LostEntries    int64  // queue entries lost (each held one or more items)
	Line           string // the warn line that was logged
}

var (
	mu          sync.Mutex
	files       []File
	undecodable atomic.Int64
)

// Add records one recovered file.
func Add(f File) {
	mu.Lock()
	defer mu.Unlock()
	files = append(files, f)
}

// Files returns the files recovered at start.
func Files() []File {
	mu.Lock()
	defer mu.Unlock()
	return append([]File(nil), files...)
}

// AddUndecodable counts queue entries dropped at send because they could
// not be decoded.
func AddUndecodable(n int64) { undecodable.Add(n) }

// Undecodable is the number of queue entries that could not be decoded
// when they were sent.
func Undecodable() int64 { return undecodable.Load() }
