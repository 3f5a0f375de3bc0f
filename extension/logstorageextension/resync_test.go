package logstorageextension

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// fill opens a client in dir, sets n keys of 100-byte values and closes it.
func fill(t *testing.T, dir string, n int) {
	t.Helper()
	c, err := openClient(dir, options{segmentBytes: DefaultSegmentBytes})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := c.Set(context.Background(), fmt.Sprintf("k%03d", i), []byte(strings.Repeat(fmt.Sprint(i%10), 100))); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func reopen(t *testing.T, dir string) (*client, []Discarded) {
	t.Helper()
	var got []Discarded
	c, err := openClient(dir, options{segmentBytes: DefaultSegmentBytes, discarded: func(d Discarded) { got = append(got, d) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c, got
}

// TestResyncKeepsTheRecordsAfterDamage: a garbled record in the middle of
// a segment costs that record only; the ones after it are read, the
// damaged bytes are kept aside and reported, and the segment is rewritten
// without them (a second open finds nothing wrong).
func TestResyncKeepsTheRecordsAfterDamage(t *testing.T) {
	dir := t.TempDir()
	fill(t, dir, 50)
	seg := filepath.Join(dir, segName(1))
	b, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	// Each record: 8 header + 1 op + 1 key length + 4 key + 1 value length + 100 value = 115.
	const rec = 115
	at := len(segMagic) + 20*rec + 30 // inside record 20's value
	copy(b[at:], "GARBAGE")
	if err := os.WriteFile(seg, b, 0o600); err != nil {
		t.Fatal(err)
	}
	c, got := reopen(t, dir)
	if len(got) != 1 || got[0].Torn || got[0].Truncated || got[0].KeptAs == "" || got[0].Offset != int64(len(segMagic)+20*rec) || got[0].Bytes != rec {
		t.Fatalf("reports %+v, want record 20 (%d bytes at %d) kept aside", got, rec, len(segMagic)+20*rec)
	}
	kept, err := os.ReadFile(got[0].KeptAs)
	if err != nil || string(kept) != string(b[len(segMagic)+20*rec:len(segMagic)+21*rec]) {
		t.Fatalf("kept %q (%v), want the damaged record", kept, err)
	}
	for i := range 50 {
		v, err := c.Get(context.Background(), fmt.Sprintf("k%03d", i))
		if err != nil {
			t.Fatal(err)
		}
		if want := strings.Repeat(fmt.Sprint(i%10), 100); (i == 20) != (v == nil) || (v != nil && string(v) != want) {
			t.Fatalf("k%03d = %q after the damage", i, v)
		}
	}
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	_, again := reopen(t, dir)
	if len(again) != 0 {
		t.Fatalf("the rewritten segment reports %+v", again)
	}
}

// TestTruncationIsNotTakenForATornWrite: a segment cut shorter than the
// client had written (its mark) is reported as truncated, even when the
// cut falls inside a record and looks like a write cut short; a torn
// record past the mark is only torn.
func TestTruncationIsNotTakenForATornWrite(t *testing.T) {
	dir := t.TempDir()
	fill(t, dir, 50)
	seg := filepath.Join(dir, segName(1))
	st, err := os.Stat(seg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(seg, st.Size()/2); err != nil {
		t.Fatal(err)
	}
	_, got := reopen(t, dir)
	// From the last whole record on (records of 115 bytes).
	whole := int64(len(segMagic)) + (st.Size()/2-int64(len(segMagic)))/115*115
	if len(got) != 1 || !got[0].Truncated || got[0].Offset != whole || got[0].Bytes != st.Size()-whole || got[0].KeptAs != "" {
		t.Fatalf("reports %+v, want one truncation of %d bytes at %d", got, st.Size()-whole, whole)
	}

	// Past the mark: a record cut short after the last mark is torn.
	dir = t.TempDir()
	fill(t, dir, 10)
	f, err := os.OpenFile(filepath.Join(dir, segName(1)), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte{200, 0, 0, 0, 1, 2, 3, 4, opSet, 3}); err != nil {
		t.Fatal(err)
	}
	f.Close()
	_, got = reopen(t, dir)
	if len(got) != 1 || !got[0].Torn || got[0].KeptAs != "" {
		t.Fatalf("reports %+v, want one torn write", got)
	}
}

// TestMarkNotARegularFile: a FIFO or a symlink where the mark should be
// neither blocks the open nor is written through; it is replaced by a
// mark of the client's own.
func TestMarkNotARegularFile(t *testing.T) {
	for _, kind := range []string{"fifo", "symlink"} {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			fill(t, dir, 5)
			path := filepath.Join(dir, markFile)
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			target := filepath.Join(t.TempDir(), "elsewhere")
			if kind == "fifo" {
				if err := syscall.Mkfifo(path, 0o600); err != nil {
					t.Fatal(err)
				}
			} else if err := os.Symlink(target, path); err != nil {
				t.Fatal(err)
			}
			c, got := reopen(t, dir)
			if len(got) != 0 {
				t.Fatalf("reports %+v", got)
			}
			if err := c.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			st, err := os.Lstat(path)
			if err != nil || !st.Mode().IsRegular() {
				t.Fatalf("the mark after close: %v, %v", st, err)
			}
			if _, err := os.Stat(target); !os.IsNotExist(err) {
				t.Fatalf("written through the symlink: %v", err)
			}
		})
	}
}
