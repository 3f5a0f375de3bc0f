// Package datadir makes the gateway's data dir safe to open: one process
// at a time (Lock), and every storage file checked before the collector
// opens it (Recover): a damaged one is kept aside, what can still be read
// of it is salvaged into a fresh file, and what was lost is said.
package datadir

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/doubletake/doubletake/internal/recovered"
)

// DamagedMark is in the name of a file kept aside: FILE.damaged-TIME.
const DamagedMark = ".damaged-"

// CheckTimeout bounds one file's check: a check that hangs is damage too.
const CheckTimeout = 60 * time.Second

// Checker checks one file and returns nil when it can be trusted.
type Checker func(ctx context.Context, path string) error

// ChildChecker runs `exe args... PATH` and takes a non-zero exit, a
// signal (bbolt faulting on the file) or a timeout as damage, with what
// the child printed as the reason.
func ChildChecker(exe string, args ...string) Checker {
	return func(ctx context.Context, path string) error {
		ctx, cancel := context.WithTimeout(ctx, CheckTimeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, exe, append(slices.Clone(args), path)...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("the check did not end within %s", CheckTimeout)
		}
		msg := strings.TrimPrefix(strings.TrimSpace(out.String()), "doubletake: ")
		// A fault's report is a Go stack: its first line says what.
		if i := strings.IndexByte(msg, '\n'); i >= 0 {
			msg = msg[:i]
		}
		if len(msg) > 300 {
			msg = msg[:300]
		}
		var ee *exec.ExitError
		if errors.As(err, &ee) && msg != "" {
			return errors.New(msg)
		}
		return err
	}
}

// Recover checks every storage file in dir (file_storage's directory)
// and salvages the damaged ones (a dedup processor's records with journal,
// its own salvage); logf receives one warn line per damaged
// file. It returns an error only when it could not move a damaged file
// aside or write its salvage: then the gateway must not start on it.
func Recover(ctx context.Context, dir string, check Checker, journal recovered.JournalSalvager, warn func(msg string, f recovered.File)) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading %s: %w", dir, err)
	}
	for _, e := range ents {
		name := e.Name()
		if !isStorageFile(e) {
			if strings.HasPrefix(name, ".salvage-") { // a salvage cut short
				_ = os.Remove(filepath.Join(dir, name))
			}
			continue
		}
		path := filepath.Join(dir, name)
		if st, err := os.Stat(path); err != nil || st.Size() == 0 {
			continue // bbolt makes an empty file a new one
		}
		cerr := check(ctx, path)
		if cerr == nil {
			continue
		}
		f, err := salvageFile(path, cerr, journal)
		if err != nil {
			return err
		}
		recovered.Add(f)
		warn(f.Line, f)
	}
	return nil
}

// salvageFile moves path aside, writes what can be read of it into a
// fresh file at path and says what was lost.
func salvageFile(path string, reason error, journal recovered.JournalSalvager) (recovered.File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return recovered.File{}, fmt.Errorf("reading damaged %s: %w", path, err)
	}
	out, f := Salvage(filepath.Base(path), data, journal)
	f.Path = path
	f.MovedTo = path + DamagedMark + time.Now().UTC().Format("20060102T150405Z")
	tmp := filepath.Join(filepath.Dir(path), ".salvage-"+filepath.Base(path))
	_ = os.Remove(tmp)
	if err := writeBolt(tmp, out); err != nil {
		_ = os.Remove(tmp)
		return f, fmt.Errorf("writing the salvage of %s: %w", path, err)
	}
	if err := os.Rename(path, f.MovedTo); err != nil {
		return f, fmt.Errorf("moving damaged %s aside: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return f, fmt.Errorf("putting the salvage of %s in place: %w", path, err)
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	f.Line = fmt.Sprintf("damaged storage file %s (%s): moved aside to %s; %s", path, oneLine(reason.Error()), filepath.Base(f.MovedTo), f.Line)
	return f, nil
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", "; ")
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

// Salvage reads data, a damaged bbolt file named name, by hand (a dedup
// processor's records with journal, the processor's own salvage) and
// returns the records to store in a fresh file and what it found (Line
// says it in words).
func Salvage(name string, data []byte, journal recovered.JournalSalvager) (map[string][]byte, recovered.File) {
	bf := parseBolt(data, os.Getpagesize())
	copies := func(key string) [][]byte {
		var vs [][]byte
		if v, ok := bf.tree[key]; ok {
			vs = append(vs, v)
		}
		for _, v := range bf.scanned[key] {
			if len(vs) == 0 || !bytes.Equal(v, vs[0]) {
				vs = append(vs, v)
			}
		}
		return vs
	}
	keySet := map[string]bool{}
	for k := range bf.tree {
		keySet[k] = true
	}
	for k := range bf.scanned {
		keySet[k] = true
	}
	keys := make([]string, 0, len(keySet))
	for k := range keySet {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	k := kindOf(name)
	switch {
	case k.queue:
		return salvageQueue(k.signal, copies, keys, bf.tree[queueMetaKey])
	case k.dedup:
		out, r := journal(copies, keys)
		f := recovered.File{Store: "journal", Salvaged: int64(r.Entries)}
		lost := r.SpansLost + r.LogsLost
		f.LostUncounted = lost > 0 || r.SeedLost || r.SpansMetaLost || r.LogsMetaLost
		var b strings.Builder
		fmt.Fprintf(&b, "dedup journal: salvaged %d span and %d log segments (%d window entries)", r.SpanSegments, r.LogSegments, f.Salvaged)
		if lost > 0 {
			fmt.Fprintf(&b, ", %d segments unreadable (their entries cannot be counted)", lost)
		}
		if r.SeedLost {
			b.WriteString(", the seed was lost (the log window starts empty)")
		}
		if r.SpansMetaLost || r.LogsMetaLost {
			b.WriteString(", the journal's meta record was lost (its range was taken from the segments found)")
		}
		if f.LostUncounted {
			b.WriteString("; copies of what the lost part held may pass as new for one window")
		} else {
			b.WriteString("; nothing of the window was lost")
		}
		f.Line = b.String()
		return out, f
	default:
		out := map[string][]byte{}
		for k, v := range bf.tree {
			out[k] = v
		}
		f := recovered.File{Store: "storage", LostUncounted: bf.treeBroken,
			Line: fmt.Sprintf("kept the %d records still reachable; what this component stored is not known here, so what was lost cannot be counted", len(out))}
		return out, f
	}
}

// maxQueueEntries bounds the entries a salvaged queue's metadata may name.
const maxQueueEntries = 1 << 24

func salvageQueue(signal string, copies func(string) [][]byte, keys []string, treeMeta []byte) (map[string][]byte, recovered.File) {
	f := recovered.File{Store: "queue"}
	var meta queueMeta
	found := false
	for _, v := range copies(queueMetaKey) {
		if m, err := decodeQueueMeta(v); err == nil && (!found || m.newer(meta)) {
			meta, found = m, true
		}
	}
	// Only the metadata reachable from the newest meta page is known to
	// be the last written; a copy found elsewhere may be older, and the
	// entries written after it (and lost with it) leave no trace.
	older := false
	if found {
		tm, err := decodeQueueMeta(treeMeta)
		older = treeMeta == nil || err != nil || meta.newer(tm) || tm.newer(meta)
	}
	var indexes []uint64
	stale := false
	if found {
		// Entries are written in one transaction with the metadata: one
		// found past its write index means the metadata found is an older
		// copy (the newest was lost); those entries were queued too.
		hi := meta.write
		for _, k := range keys {
			if i, ok := itemIndex(k); ok && i >= hi && i-meta.read < maxQueueEntries {
				hi = i + 1
			}
		}
		if hi > meta.write {
			meta.write, stale = hi, true
		}
		indexes = meta.entries(maxQueueEntries)
	} else {
		for _, k := range keys {
			if i, ok := itemIndex(k); ok {
				indexes = append(indexes, i)
			}
		}
		slices.Sort(indexes)
	}
	out := map[string][]byte{}
	var next queueMeta
	lostEntries := 0
	for _, i := range indexes {
		ok := false
		for _, v := range copies(fmt.Sprint(i)) {
			items, size, err := decodeEntry(signal, v)
			if err != nil {
				continue
			}
			out[fmt.Sprint(next.write)] = v
			next.write++
			next.items += int64(items)
			next.bytes += int64(size)
			ok = true
			break
		}
		if !ok {
			lostEntries++
		}
	}
	if found && meta.write-meta.read > maxQueueEntries {
		lostEntries += int(meta.write - meta.read - maxQueueEntries)
	}
	out[queueMetaKey] = encodeQueueMeta(next)
	f.Salvaged = next.items
	f.LostEntries = int64(lostEntries)
	what := map[string]string{"traces": "spans", "logs": "log records", "metrics": "points"}[signal]
	var b strings.Builder
	fmt.Fprintf(&b, "%s queue: salvaged %d entries (%d %s), in their order, to be delivered", signal, next.write, next.items, what)
	switch {
	case !found:
		f.LostUncounted = true
		fmt.Fprintf(&b, "; the queue's metadata was lost: every entry found was kept (some may have been delivered already and arrive twice), and what was lost cannot be counted")
	case older && lostEntries == 0:
		f.LostUncounted = true
		b.WriteString("; the queue's newest metadata was lost with the part of the file that held it (an older copy was used): entries written after that copy and lost with it cannot be counted")
	case stale || older:
		f.LostUncounted = true
		fmt.Fprintf(&b, "; the newest queue metadata was lost (an older copy was used): lost %d entries, how many items they held cannot be counted; entries delivered after that copy was written may arrive twice", lostEntries)
	case lostEntries == 0 && meta.items <= next.items:
		b.WriteString("; nothing was lost")
	default:
		f.Lost = max(meta.items-next.items, 0)
		fmt.Fprintf(&b, "; lost %d entries (%d %s)", lostEntries, f.Lost, what)
		if f.Lost == 0 {
			f.LostUncounted = true
			b.WriteString(", how many items they held cannot be counted")
		}
	}
	f.Line = b.String()
	return out, f
}

// writeBolt writes kv into bucket "default" of a new bbolt file at path,
// as file_storage would, and syncs it.
func writeBolt(path string, kv map[string][]byte) error {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second, NoFreelistSync: true, FreelistType: bolt.FreelistMapType})
	if err != nil {
		return err
	}
	keys := make([]string, 0, len(kv))
	for k := range kv {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	// In transactions of bounded size, so that a large queue does not
	// take its whole size in memory twice.
	for len(keys) > 0 {
		n := 0
		size := 0
		err := db.Update(func(tx *bolt.Tx) error {
			b, err := tx.CreateBucketIfNotExists([]byte("default"))
			if err != nil {
				return err
			}
			for n < len(keys) && (n == 0 || size < 64<<20) {
				if err := b.Put([]byte(keys[n]), kv[keys[n]]); err != nil {
					return err
				}
				size += len(kv[keys[n]])
				n++
			}
			return nil
		})
		if err != nil {
			_ = db.Close()
			return err
		}
		keys = keys[n:]
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists([]byte("default"))
		return err
	}); err != nil {
		_ = db.Close()
		return err
	}
	if err := db.Sync(); err != nil {
		_ = db.Close()
		return err
	}
	return db.Close()
}
