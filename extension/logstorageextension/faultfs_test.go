package logstorageextension

import (
	"fmt"
	"os"
	"sync"
	"syscall"
)

// faultFS is the operating system's filesystem with faults injected: each
// call the client makes asks plan whether it fails, and how. A write may
// fail short (part of its bytes written, as a full disk or a failing one
// leaves it).
type faultFS struct {
	osFS
	mu    sync.Mutex
	plan  func(op string) fault
	calls map[string]int // calls made, per operation
	fired []string       // the faults injected, in order
}

// fault is one injected failure: err returned; short, for a write, the
// share of its bytes written first (0: none).
type fault struct {
	err   error
	short bool
}

// The operations a fault can hit.
var faultOps = []string{"mkdir", "readdir", "stat", "lstat", "readfile", "open", "rename", "remove", "syncdir", "read", "write", "truncate", "sync", "close", "allocate"}

// faultErrs are the errors a filesystem gives.
var faultErrs = []error{syscall.ENOSPC, syscall.EIO, syscall.EROFS, syscall.EDQUOT}

func (f *faultFS) inject(op string) fault {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.calls == nil {
		f.calls = map[string]int{}
	}
	f.calls[op]++
	if f.plan == nil {
		return fault{}
	}
	ft := f.plan(op)
	if ft.err != nil {
		f.fired = append(f.fired, fmt.Sprintf("%s#%d: %v (short %v)", op, f.calls[op], ft.err, ft.short))
	}
	return ft
}

func (f *faultFS) setPlan(plan func(op string) fault) {
	f.mu.Lock()
	f.plan = plan
	f.mu.Unlock()
}

func pathErr(op, path string, err error) error { return &os.PathError{Op: op, Path: path, Err: err} }

func (f *faultFS) MkdirAll(path string, perm os.FileMode) error {
	if ft := f.inject("mkdir"); ft.err != nil {
		return pathErr("mkdir", path, ft.err)
	}
	return f.osFS.MkdirAll(path, perm)
}

func (f *faultFS) ReadDir(name string) ([]os.DirEntry, error) {
	if ft := f.inject("readdir"); ft.err != nil {
		return nil, pathErr("readdir", name, ft.err)
	}
	return f.osFS.ReadDir(name)
}

func (f *faultFS) Stat(name string) (os.FileInfo, error) {
	if ft := f.inject("stat"); ft.err != nil {
		return nil, pathErr("stat", name, ft.err)
	}
	return f.osFS.Stat(name)
}

func (f *faultFS) Lstat(name string) (os.FileInfo, error) {
	if ft := f.inject("lstat"); ft.err != nil {
		return nil, pathErr("lstat", name, ft.err)
	}
	return f.osFS.Lstat(name)
}

func (f *faultFS) ReadFile(name string) ([]byte, error) {
	if ft := f.inject("readfile"); ft.err != nil {
		return nil, pathErr("read", name, ft.err)
	}
	return f.osFS.ReadFile(name)
}

func (f *faultFS) Rename(from, to string) error {
	if ft := f.inject("rename"); ft.err != nil {
		return &os.LinkError{Op: "rename", Old: from, New: to, Err: ft.err}
	}
	return f.osFS.Rename(from, to)
}

func (f *faultFS) Remove(name string) error {
	if ft := f.inject("remove"); ft.err != nil {
		return pathErr("remove", name, ft.err)
	}
	return f.osFS.Remove(name)
}

func (f *faultFS) SyncDir(dir string) error {
	if ft := f.inject("syncdir"); ft.err != nil {
		return pathErr("sync", dir, ft.err)
	}
	return nil // as Sync
}

func (f *faultFS) OpenFile(name string, flag int, perm os.FileMode) (storeFile, error) {
	if ft := f.inject("open"); ft.err != nil {
		return nil, pathErr("open", name, ft.err)
	}
	sf, err := f.osFS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &faultFile{storeFile: sf, fs: f}, nil
}

type faultFile struct {
	storeFile
	fs *faultFS
}

func (f *faultFile) ReadAt(b []byte, off int64) (int, error) {
	if ft := f.fs.inject("read"); ft.err != nil {
		return 0, pathErr("read", f.Name(), ft.err)
	}
	return f.storeFile.ReadAt(b, off)
}

func (f *faultFile) WriteAt(b []byte, off int64) (int, error) {
	ft := f.fs.inject("write")
	if ft.err == nil {
		return f.storeFile.WriteAt(b, off)
	}
	n := 0
	if ft.short && len(b) > 1 {
		n, _ = f.storeFile.WriteAt(b[:len(b)/2], off)
	}
	return n, pathErr("write", f.Name(), ft.err)
}

func (f *faultFile) Truncate(size int64) error {
	if ft := f.fs.inject("truncate"); ft.err != nil {
		return pathErr("truncate", f.Name(), ft.err)
	}
	return f.storeFile.Truncate(size)
}

// Sync reaches no disk: a crash here is the process's (kill -9), which
// the page cache survives, and the tests run thousands of programs.
func (f *faultFile) Sync() error {
	if ft := f.fs.inject("sync"); ft.err != nil {
		return pathErr("sync", f.Name(), ft.err)
	}
	return nil
}

func (f *faultFile) Close() error {
	err := f.storeFile.Close()
	if ft := f.fs.inject("close"); ft.err != nil && err == nil {
		return pathErr("close", f.Name(), ft.err)
	}
	return err
}

func (f *faultFile) Allocate(off, end int64, keepSize bool) error {
	if ft := f.fs.inject("allocate"); ft.err != nil {
		return pathErr("fallocate", f.Name(), ft.err)
	}
	return f.storeFile.Allocate(off, end, keepSize)
}

// errorsOf lists which fault errors apply to op.
func errorsOf(op string) []error {
	switch op {
	case "write", "allocate", "open", "mkdir", "rename":
		return faultErrs
	case "remove":
		return []error{syscall.EIO, syscall.EROFS}
	}
	return []error{syscall.EIO}
}
