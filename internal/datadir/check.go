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

	"github.com/doubletake/doubletake/internal/recovered"
)

// kind is what a storage file holds, known from its name (file_storage
// names a client's file kind_type_name[_signal]; Migrate adds
// MigratingSuffix while it imports the file).
type kind struct {
	queue  bool   // an exporter's persistent queue
	signal string // its signal
	dedup  bool   // the dedup processor's journals
}

func kindOf(path string) kind {
	base := strings.TrimSuffix(filepath.Base(path), MigratingSuffix)
	if strings.HasPrefix(base, "exporter_") {
		for _, s := range []string{"traces", "logs", "metrics"} {
			if strings.HasSuffix(base, "_"+s) {
				return kind{queue: true, signal: s}
			}
		}
	}
	if strings.HasPrefix(base, "processor_dedup_") {
		return kind{dedup: true}
	}
	return kind{}
}

// CheckFile opens path with bbolt, read-only, checks that the file holds
// every page its meta page counts, whole, checks its pages
// (bbolt's own consistency check), reads every key and value of its
// bucket and checks what doubletake knows of them: every queue entry the
// metadata names is there and decodes; every journal segment is there
// and its checksum matches (journal, the dedup processor's salvage, reads
// them). It returns nil when the file can be trusted.
// On a damaged file it may fault: it runs in a child process (Check).
func CheckFile(path string, journal recovered.JournalSalvager) error {
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: 2 * time.Second})
	if err != nil {
		return err
	}
	defer db.Close()
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	kv := map[string][]byte{}
	err = db.View(func(tx *bolt.Tx) error {
		// A file that ends before the pages its meta page counts was cut:
		// bbolt reads the rest of a cut page as zeros (its mapping of the
		// file's last page), the salvage as missing; neither is the data
		// written.
		if st.Size() < tx.Size() {
			return fmt.Errorf("truncated: %d bytes, its pages reach %d", st.Size(), tx.Size())
		}
		var errs []error
		for e := range tx.Check() {
			if len(errs) < 5 {
				errs = append(errs, e)
			}
		}
		if len(errs) > 0 {
			return errors.Join(errs...)
		}
		b := tx.Bucket([]byte("default"))
		if b == nil {
			return nil // never used
		}
		return b.ForEach(func(k, v []byte) error {
			kv[string(k)] = slices.Clone(v)
			return nil
		})
	})
	if err != nil {
		return err
	}
	return checkContents(kindOf(path), kv, journal)
}

func checkContents(k kind, kv map[string][]byte, journal recovered.JournalSalvager) error {
	copies := func(key string) [][]byte {
		if v, ok := kv[key]; ok {
			return [][]byte{v}
		}
		return nil
	}
	switch {
	case k.queue:
		v, ok := kv[queueMetaKey]
		if !ok {
			for key := range kv {
				if _, isItem := itemIndex(key); isItem {
					return errors.New("queue entries without the queue's metadata")
				}
			}
			return nil
		}
		m, err := decodeQueueMeta(v)
		if err != nil {
			return fmt.Errorf("queue metadata: %w", err)
		}
		for _, i := range m.entries(1 << 30) {
			e, ok := kv[fmt.Sprint(i)]
			if !ok {
				return fmt.Errorf("queue entry %d is missing", i)
			}
			if _, _, err := decodeEntry(k.signal, e); err != nil {
				return fmt.Errorf("queue entry %d does not decode: %w", i, err)
			}
		}
	case k.dedup:
		if len(kv) == 0 {
			return nil
		}
		keys := make([]string, 0, len(kv))
		for key := range kv {
			keys = append(keys, key)
		}
		_, r := journal(copies, keys)
		journalKeys := false
		for _, key := range keys {
			if strings.HasPrefix(key, "traces/") || strings.HasPrefix(key, "logs/") {
				journalKeys = true
			}
		}
		_, snapshot := kv["metrics/snapshot"]
		seedNeeded := snapshot || hasPrefix(keys, "logs/")
		if (r.SeedLost && seedNeeded) || r.SpansLost > 0 || r.LogsLost > 0 || (journalKeys && (r.SpansMetaLost && hasPrefix(keys, "traces/") || r.LogsMetaLost && hasPrefix(keys, "logs/"))) {
			return fmt.Errorf("dedup journal: %d span and %d log segments unreadable (seed lost: %t)", r.SpansLost, r.LogsLost, r.SeedLost)
		}
	}
	return nil
}

func hasPrefix(keys []string, p string) bool {
	for _, k := range keys {
		if strings.HasPrefix(k, p) {
			return true
		}
	}
	return false
}
