package datadir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

// MigratedMark is in the name of a file_storage file whose data was
// imported into log_storage: FILE.migrated-TIME. The file is kept, whole:
// a downgrade (renaming it back) or a person can still read it.
const MigratedMark = ".migrated-"

// MigratingSuffix marks a file_storage file being imported: FILE.migrating.
// The file takes this name before its import starts, so that a later start
// finding it knows its import was begun by this code (and, with the client
// directory there, finished): a plain FILE next to a client directory was
// written by file_storage after an earlier migration instead (a downgrade
// ran on the data dir), and both hold data.
const MigratingSuffix = ".migrating"

// Target is the store file_storage's data moves into: log_storage, which
// passes itself at its Start.
type Target interface {
	// ClientDir is the directory of the client that file_storage's file
	// of this name (the same client's) moves into.
	ClientDir(fileName string) string
	// Import writes kv as the whole data of a new client at dir, which
	// must not exist: a crash leaves either no client at dir or all of it.
	Import(dir string, kv map[string][]byte) error
}

// Migrated is one file_storage file moved to log_storage.
type Migrated struct {
	File    string // the file_storage file, as file_storage opened it
	KeptAs  string // where it is kept: File.migrated-TIME
	Client  string // the log_storage client's directory
	Keys    int    // the keys the file held
	Resumed bool   // the import had been done by a start cut short: only the rename was left
}

// Migrate moves the data of every file_storage file in queueDir into
// log_storage (to): each file's keys and values are imported into the
// log_storage client of the same name (a client's directory is named as
// file_storage names its file), then the file is
// renamed FILE.migrated-TIME and kept. A file with no keys has nothing to
// carry and is only renamed: log_storage creates an empty client when it
// is first asked for it, and no directory is made for a component the
// config may no longer have.
//
// Run it after Recover, with the data dir locked: it opens the files with
// bbolt in this process, which trusts their pages, and Recover has just
// checked each of them (and salvaged the damaged ones) in a child process.
// info receives one line per file migrated. An error (a file that cannot
// be read or imported, or data in both stores for one client) means the
// gateway must not start: no file is ever skipped.
func Migrate(queueDir string, to Target, info func(msg string, m Migrated)) error {
	ents, err := os.ReadDir(queueDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading %s: %w", queueDir, err)
	}
	// Imports cut short first: their files hold data no other file has,
	// and a plain file of the same client (file_storage ran between the
	// two starts) must then meet the client directory they made.
	var resumed, plain []string
	for _, e := range ents {
		switch name := e.Name(); {
		case !isStorageFile(e):
		case strings.HasSuffix(name, MigratingSuffix):
			resumed = append(resumed, name)
		default:
			plain = append(plain, name)
		}
	}
	for _, name := range append(resumed, plain...) {
		m, err := migrateFile(queueDir, to, name)
		if err != nil {
			return err
		}
		var msg string
		switch {
		case m.Resumed:
			msg = fmt.Sprintf("file_storage file %s had been imported into log_storage at %s (%d keys) by a start cut short; it is now kept as %s, where a downgrade or a person can still read it", m.File, m.Client, m.Keys, filepath.Base(m.KeptAs))
		case m.Keys == 0:
			msg = fmt.Sprintf("file_storage file %s held 0 keys: nothing to import into log_storage; kept as %s", m.File, filepath.Base(m.KeptAs))
		default:
			msg = fmt.Sprintf("migrated file_storage file %s to log_storage: %d keys imported into %s; the file is kept as %s, where a downgrade or a person can still read it", m.File, m.Keys, m.Client, filepath.Base(m.KeptAs))
		}
		info(msg, m)
	}
	return nil
}

// isStorageFile says whether e is a storage client's file of
// file_storage's directory, as Recover and Migrate take them: a regular
// file, not one kept aside (damaged or migrated) nor a dot file (a salvage
// being written). A FILE.migrating is one: it holds the data until its
// import is done.
func isStorageFile(e os.DirEntry) bool {
	name := e.Name()
	return e.Type().IsRegular() && !strings.HasPrefix(name, ".") &&
		!strings.Contains(name, DamagedMark) && !strings.Contains(name, MigratedMark)
}

// migrateFile migrates queueDir/name (FILE or FILE.migrating).
func migrateFile(queueDir string, to Target, name string) (Migrated, error) {
	base := strings.TrimSuffix(name, MigratingSuffix)
	staged := base != name
	path := filepath.Join(queueDir, name)
	m := Migrated{File: filepath.Join(queueDir, base), Client: to.ClientDir(base)}
	kv, err := readBoltFile(path)
	if err != nil {
		return m, fmt.Errorf("migrating %s to log_storage: reading it: %w", path, err)
	}
	m.Keys = len(kv)
	clientThere, err := exists(m.Client)
	if err != nil {
		return m, fmt.Errorf("migrating %s to log_storage: %w", path, err)
	}
	switch {
	case staged && clientThere:
		// Import renames the client directory into place last: it is
		// there whole, from this very file (a crash cut the start before
		// the rename below).
		m.Resumed = true
	case m.Keys == 0:
		// Nothing to carry, whatever log_storage holds.
	case clientThere:
		return m, fmt.Errorf("migrating %s to log_storage: its %d keys were written by file_storage after this client was migrated to %s (a downgrade ran on this data dir?); both may hold data not yet delivered, and they cannot be merged: move the file out of the data dir to keep what log_storage holds, or the client directory to have the file imported, and start again", path, m.Keys, m.Client)
	default:
		if !staged {
			to := path + MigratingSuffix
			switch ok, err := exists(to); {
			case err != nil:
				return m, fmt.Errorf("migrating %s to log_storage: %w", path, err)
			case ok:
				// Resumed first, it met no client directory: its import failed.
				return m, fmt.Errorf("migrating %s to log_storage: %s, an import of the same client not finished, is in the way", path, to)
			}
			if err := renameSynced(path, to); err != nil {
				return m, fmt.Errorf("migrating %s to log_storage: %w", path, err)
			}
			path = to
		}
		if err := to.Import(m.Client, kv); err != nil {
			return m, fmt.Errorf("migrating %s to log_storage: importing %d keys into %s: %w", path, m.Keys, m.Client, err)
		}
	}
	kept, err := keep(path, m.File)
	if err != nil {
		return m, fmt.Errorf("migrating %s to log_storage: %w", path, err)
	}
	m.KeptAs = kept
	return m, nil
}

// readBoltFile reads every key and value of file_storage's bucket in the
// bbolt file at path, read-only. An empty file is bbolt's new file: no keys.
func readBoltFile(path string) (map[string][]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	kv := map[string][]byte{}
	if st.Size() == 0 {
		return kv, nil
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: 2 * time.Second})
	if err != nil {
		return nil, err
	}
	err = db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("default"))
		if b == nil {
			return nil // never used
		}
		return b.ForEach(func(k, v []byte) error {
			if v == nil {
				return fmt.Errorf("key %q is a nested bucket, which file_storage never writes", k)
			}
			kv[string(k)] = slices.Clone(v)
			return nil
		})
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	return kv, err
}

// keep renames path to file.migrated-TIME (another name when a file of
// that name is there: a kept file is never overwritten) and returns it.
func keep(path, file string) (string, error) {
	stamp := file + MigratedMark + time.Now().UTC().Format("20060102T150405Z")
	to := stamp
	for i := 2; ; i++ {
		ok, err := exists(to)
		if err != nil {
			return "", err
		}
		if !ok {
			break
		}
		to = fmt.Sprintf("%s-%d", stamp, i)
	}
	if err := renameSynced(path, to); err != nil {
		return "", err
	}
	return to, nil
}

// renameSynced renames from to to and syncs their directory, so that a
// crash after it finds the new name.
func renameSynced(from, to string) error {
	if err := os.Rename(from, to); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(to))
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("syncing %s after renaming %s: %w", filepath.Dir(to), filepath.Base(from), err)
	}
	return nil
}

func exists(path string) (bool, error) {
	_, err := os.Lstat(path)
	if err == nil {
		return true, nil
	}
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	return false, err
}
