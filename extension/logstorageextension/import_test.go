package logstorageextension

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
)

// importData: small, empty, inlined and larger values, some over half a
// segment and some over a segment, so that they take several records
// and segments.
func importData() map[string][]byte {
	kv := map[string][]byte{"empty": {}, "nil": nil, "ri": []byte("12345678")}
	for i := range 40 {
		kv[fmt.Sprintf("%d", i)] = val(i, []int{10, 64, 65, 1500, 2100, 5000}[i%6])
	}
	return kv
}

func wantOf(kv map[string][]byte) map[string][]byte {
	want := map[string][]byte{}
	for k, v := range kv {
		if v == nil {
			v = []byte{} // stored, empty
		}
		want[k] = v
	}
	return want
}

func noImporting(t *testing.T, dir string) {
	t.Helper()
	if _, err := os.Stat(dir + ".importing"); !os.IsNotExist(err) {
		t.Fatalf("%s.importing: %v", dir, err)
	}
}

// Import writes the map as the data of the client at dir, which the
// extension then opens, and leaves no .importing directory.
func TestImport(t *testing.T) {
	ctx := context.Background()
	base := t.TempDir()
	dir := ClientDir(base, ClientName(component.KindExporter, exporterID, "logs"))
	kv := importData()
	if err := Import(dir, kv, 4096); err != nil {
		t.Fatal(err)
	}
	noImporting(t, dir)
	nums, _, err := listSegments(osFS{}, dir)
	if err != nil || len(nums) < 3 {
		t.Fatalf("segments %v, %v; want several", nums, err)
	}
	e, _ := startExtension(t, base, componenttest.NewTelemetry())
	sc := getClient(t, e, component.KindExporter, exporterID, "logs")
	c := sc.(*closer).client
	checkState(t, c, wantOf(kv), "missing")
	if err := sc.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// Import refuses a directory that exists and leaves its data alone.
func TestImportRefusesExisting(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "client")
	if err := Import(dir, map[string][]byte{"a": []byte("first")}, 0); err != nil {
		t.Fatal(err)
	}
	err := Import(dir, map[string][]byte{"a": []byte("second"), "b": nil}, 0)
	if err == nil || !strings.Contains(err.Error(), "exists") {
		t.Fatalf("importing over a client: %v", err)
	}
	noImporting(t, dir)
	c := mustOpen(t, dir, options{segmentBytes: DefaultSegmentBytes})
	defer closeClient(t, c)
	checkState(t, c, map[string][]byte{"a": []byte("first")}, "b")
}

// What a crash during an Import left in dir.importing is replaced, not
// mixed with what is imported.
func TestImportReplacesLeftover(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "client")
	left := mustOpen(t, dir+".importing", options{segmentBytes: 4096})
	for i := range 10 {
		if err := left.Set(context.Background(), fmt.Sprintf("stale%d", i), val(i, 1000)); err != nil {
			t.Fatal(err)
		}
	}
	closeClient(t, left)
	if err := os.WriteFile(filepath.Join(dir+".importing", "junk"), []byte("junk"), 0o600); err != nil {
		t.Fatal(err)
	}
	kv := importData()
	if err := Import(dir, kv, 4096); err != nil {
		t.Fatal(err)
	}
	noImporting(t, dir)
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".log") && e.Name() != markFile && e.Name() != reserveFile {
			t.Fatalf("%s in the client's directory", e.Name())
		}
	}
	c := mustOpen(t, dir, options{segmentBytes: 4096})
	defer closeClient(t, c)
	checkState(t, c, wantOf(kv), "stale0", "stale9")
}

// Nothing to import is an empty client; segment_bytes 0 is the default.
func TestImportEmpty(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "client")
	if err := Import(dir, nil, 0); err != nil {
		t.Fatal(err)
	}
	noImporting(t, dir)
	c := mustOpen(t, dir, options{segmentBytes: DefaultSegmentBytes})
	defer closeClient(t, c)
	checkState(t, c, map[string][]byte{})
	dir = filepath.Join(t.TempDir(), "client")
	if err := Import(dir, importData(), 0); err != nil {
		t.Fatal(err)
	}
	if nums, _, err := listSegments(osFS{}, dir); err != nil || len(nums) != 1 {
		t.Fatalf("segments %v, %v; want one of the default size", nums, err)
	}
}
