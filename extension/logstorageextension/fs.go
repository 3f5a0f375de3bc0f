package logstorageextension

import (
	"errors"
	"os"
	"syscall"
)

// fileSystem is every filesystem call a client makes, so that the
// conformance tests can fail each of them (faultFS): a client's promises
// (a write that returned success is there to read, after a crash too; one
// that failed left no trace) are tested against every fault a filesystem
// returns, not only those a real disk can be made to give.
type fileSystem interface {
	MkdirAll(path string, perm os.FileMode) error
	ReadDir(name string) ([]os.DirEntry, error)
	Stat(name string) (os.FileInfo, error)
	Lstat(name string) (os.FileInfo, error)
	ReadFile(name string) ([]byte, error)
	OpenFile(name string, flag int, perm os.FileMode) (storeFile, error)
	Rename(from, to string) error
	Remove(name string) error
	// SyncDir makes the directory's entries (a file created, renamed or
	// removed) durable.
	SyncDir(dir string) error
	// Free is the room left for an unprivileged writer on the
	// filesystem that holds path.
	Free(path string) (int64, error)
}

// storeFile is an open file of a client.
type storeFile interface {
	Name() string
	ReadAt(b []byte, off int64) (int, error)
	WriteAt(b []byte, off int64) (int, error)
	Truncate(size int64) error
	Sync() error
	Close() error
	Stat() (os.FileInfo, error)
	// Allocate reserves the blocks from off to end. keepSize: without
	// changing the file's size (a segment's reserve ahead of its
	// writes); else the size grows to end when it was smaller (the
	// drain reserve). errors.ErrUnsupported where the filesystem cannot.
	Allocate(off, end int64, keepSize bool) error
}

// osFS is the operating system's filesystem.
type osFS struct{}

func (osFS) MkdirAll(path string, perm os.FileMode) error { return os.MkdirAll(path, perm) }
func (osFS) ReadDir(name string) ([]os.DirEntry, error)   { return os.ReadDir(name) }
func (osFS) Stat(name string) (os.FileInfo, error)        { return os.Stat(name) }
func (osFS) Lstat(name string) (os.FileInfo, error)       { return os.Lstat(name) }
func (osFS) ReadFile(name string) ([]byte, error)         { return os.ReadFile(name) }
func (osFS) Rename(from, to string) error                 { return os.Rename(from, to) }
func (osFS) Remove(name string) error                     { return os.Remove(name) }

func (osFS) OpenFile(name string, flag int, perm os.FileMode) (storeFile, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

func (osFS) Free(path string) (int64, error) { return freeBytes(path) }

type osFile struct{ *os.File }

func (f osFile) Allocate(off, end int64, keepSize bool) error {
	return preallocate(f.File, off, end, keepSize)
}

// noSpace says whether err is the filesystem's "no room": ENOSPC, or
// EDQUOT (a quota reached is a full disk to this writer).
func noSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}
