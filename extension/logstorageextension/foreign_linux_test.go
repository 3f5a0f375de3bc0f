package logstorageextension

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.uber.org/zap/zapcore"
)

// Entries named as segments that are not regular files, a FIFO where the
// client would roll to next, a symlink to a copy of a segment and a
// directory holding a file, are moved aside unread and reported; the
// client opens (it does not block on the FIFO or fail to roll), holds what
// it held, and writes on into new segments.
func TestForeignSegmentNamesMovedAside(t *testing.T) {
	const seg = 4096
	dir := t.TempDir()
	c := mustOpen(t, dir, options{segmentBytes: seg})
	want := map[string][]byte{}
	for i := range 30 {
		set(t, c, want, fmt.Sprintf("k%02d", i), val(i, 200))
	}
	path, _ := newestSegment(c)
	closeClient(t, c)
	var newest uint64
	if _, err := fmt.Sscanf(filepath.Base(path), "%016x.log", &newest); err != nil {
		t.Fatal(err)
	}

	fifo := filepath.Join(dir, segName(newest+1))
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	elsewhere := filepath.Join(t.TempDir(), "copy.log")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(elsewhere, b, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, segName(newest+2))
	if err := os.Symlink(elsewhere, link); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, segName(newest+3))
	if err := os.Mkdir(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(sub, "x"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}

	var r recorder
	c = mustOpen(t, dir, r.opts(seg))
	if len(r.ds) != 3 {
		t.Fatalf("%d reports, want 3 (one per foreign entry): %+v", len(r.ds), r.ds)
	}
	for i, p := range []string{fifo, link, sub} {
		d := r.ds[i]
		if d.Segment != p || !d.Foreign || d.Bytes != 0 || !strings.HasPrefix(d.KeptAs, p+".foreign-") || d.Cause == "" {
			t.Fatalf("report %d: %+v, want %s moved aside", i, d, p)
		}
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Fatalf("%s is still there: %v", p, err)
		}
		if _, err := os.Lstat(d.KeptAs); err != nil {
			t.Fatalf("%s was not kept: %v", d.KeptAs, err)
		}
	}
	if b2, err := os.ReadFile(elsewhere); err != nil || string(b2) != string(b) {
		t.Fatalf("the symlink's target was touched: %v", err)
	}
	checkState(t, c, want)
	// It rolls into the names the foreign entries had.
	for i := range 120 {
		set(t, c, want, fmt.Sprintf("n%02d", i), val(100+i, 200))
	}
	if p, _ := newestSegment(c); p < sub {
		t.Fatalf("the client writes %s, want %s or a later segment", p, sub)
	}
	closeClient(t, c)
	r = recorder{}
	c = mustOpen(t, dir, r.opts(seg))
	if len(r.ds) != 0 {
		t.Fatalf("reopened: %+v", r.ds)
	}
	checkState(t, c, want)
	closeClient(t, c)
}

// Through the extension, a foreign entry is logged as an error naming
// where it was kept; the client opens.
func TestForeignSegmentNameLogged(t *testing.T) {
	tt := componenttest.NewTelemetry()
	defer func() { _ = tt.Shutdown(context.Background()) }()
	base := t.TempDir()
	cn := ClientName(component.KindExporter, exporterID, "traces")
	dir := ClientDir(base, cn)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, segName(1))
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	e, logs := startExtension(t, base, tt)
	sc := getClient(t, e, component.KindExporter, exporterID, "traces")
	if err := sc.Set(context.Background(), "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if err := sc.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	errs := logs.FilterLevelExact(zapcore.ErrorLevel).All()
	if len(errs) != 1 {
		t.Fatalf("%d errors logged: %v", len(errs), errs)
	}
	f := errs[0].ContextMap()
	if kept, _ := f["kept_as"].(string); f["segment"] != fifo || !strings.HasPrefix(kept, fifo+".foreign-") {
		t.Fatalf("the error logged: %v", f)
	}
}

// Something other than a regular file where the drain reserve belongs (a
// FIFO: opening it would block; a symlink: its blocks, or a file it
// points to, are not the client's) is removed, the target left as it
// was, and a reserve of the client's own made; the client holds what it
// held.
func TestForeignReserveReplaced(t *testing.T) {
	for _, kind := range []string{"fifo", "symlink", "directory"} {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			c := mustOpen(t, dir, options{segmentBytes: 4096})
			want := map[string][]byte{}
			for i := range 10 {
				set(t, c, want, fmt.Sprintf("k%02d", i), val(i, 200))
			}
			closeClient(t, c)
			res := filepath.Join(dir, reserveFile)
			if err := os.Remove(res); err != nil {
				t.Fatal(err)
			}
			target := filepath.Join(t.TempDir(), "elsewhere")
			if err := os.WriteFile(target, []byte("not the client's"), 0o600); err != nil {
				t.Fatal(err)
			}
			var err error
			switch kind {
			case "fifo":
				err = syscall.Mkfifo(res, 0o600)
			case "symlink":
				err = os.Symlink(target, res)
			case "directory":
				err = os.Mkdir(res, 0o700)
			}
			if err != nil {
				t.Fatal(err)
			}
			c = mustOpen(t, dir, options{segmentBytes: 4096})
			defer closeClient(t, c)
			checkState(t, c, want)
			if st, err := os.Lstat(res); err != nil || !st.Mode().IsRegular() {
				t.Fatalf("the reserve after opening: %v, %v", st, err)
			}
			if b, err := os.ReadFile(target); err != nil || string(b) != "not the client's" {
				t.Fatalf("the symlink's target: %q, %v", b, err)
			}
			set(t, c, want, "after", val(99, 300))
			checkState(t, c, want)
		})
	}
}
