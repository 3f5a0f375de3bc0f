package logstorageextension

import (
	"testing"

	"github.com/doubletake/doubletake/internal/readmetable"
)

// TestReadmeConfigTable: README.md's config table has a row for every key
// Config decodes and no row without one, so that neither drifts.
func TestReadmeConfigTable(t *testing.T) {
	missing, extra, err := readmetable.Diff("README.md", createDefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if len(missing) > 0 || len(extra) > 0 {
		t.Fatalf("README.md's config table lacks %q and has rows for no key %q", missing, extra)
	}
}
