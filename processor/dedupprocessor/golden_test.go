package dedupprocessor

import (
	"os"
	"path/filepath"
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"
)

// TestGoldenTraces runs a hand-written request through the processor and
// compares the output with a hand-written expectation: in-batch copies of a
// whole resource dropped, zero-id spans kept, a conflicting re-send (new end
// time and status) dropped under keep_first, empty scopes and resources
// removed.
func TestGoldenTraces(t *testing.T) {
	read := func(name string) ptrace.Traces {
		b, err := os.ReadFile(filepath.Join("testdata", "golden", name))
		if err != nil {
			t.Fatal(err)
		}
		td, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(b)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return td
	}
	h := newHarness(t, nil)
	if err := h.sendTraces(read("traces_in.json")); err != nil {
		t.Fatal(err)
	}
	got := h.tsink.AllTraces()
	if len(got) != 1 {
		t.Fatalf("%d requests delivered, want 1", len(got))
	}
	m := &ptrace.JSONMarshaler{}
	gotJSON, _ := m.MarshalTraces(got[0])
	wantJSON, _ := m.MarshalTraces(read("traces_out.json"))
	if string(gotJSON) != string(wantJSON) {
		t.Fatalf("output differs from testdata/golden/traces_out.json\n got: %s\nwant: %s", gotJSON, wantJSON)
	}
}
