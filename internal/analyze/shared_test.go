package analyze

import (
	"strings"
	"testing"
	"time"
)

// TestMetricsSharedStart: verify names writers that share one start as
// the gateway does: two processes with one start time, exporting every
// second 400 ms apart, are split by export phase once their interval is
// found, the later points of one kept as its own series; the finding
// gives the split's evidence.
func TestMetricsSharedStart(t *testing.T) {
	a := New(Options{})
	s := time.Second
	seq := uint64(0)
	add := func(p pt) {
		seq++
		a.AddMetrics(at(seq, p.at, "p"), counter("", p))
	}
	for k := range 20 {
		tm := 10*s + time.Duration(k)*s
		add(pt{0, tm, 10 + 2*int64(k)})
		add(pt{0, tm + 400*time.Millisecond, 40 + 4*int64(k)})
	}
	r := a.Report()
	m := r.Metrics
	if m.PeerPoints != 16 || m.ExtraPoints != 3 {
		t.Errorf("peer points %d, extra %d; want A's 16 points after the split kept, its 3 falls before it dropped", m.PeerPoints, m.ExtraPoints)
	}
	var named bool
	for _, f := range r.Findings {
		t.Log(f.Diagnosis, f.Line)
		if f.Diagnosis == DiagIdentityCollision && strings.Contains(f.Line, "writers sharing one start: split by export phase (every 1s) into 2 writers, each its own series (a value fell without a new start; 32 points placed by phase)") {
			named = true
		}
	}
	if !named {
		t.Errorf("no finding names the split: %+v", r.Findings)
	}
	// The report's summary and the stream's row name it too, with the
	// counts of the status page's writer_rules.
	if w := m.WriterRules; w == nil || *w != (WriterRules{SharedSplit: 1, SharedWriters: 2}) {
		t.Errorf("writer rules %+v, want one stream split into 2 writers", w)
	}
	if len(m.List) != 1 || !strings.HasPrefix(m.List[0].Shared, "writers sharing one start: split by export phase") {
		t.Errorf("stream list %+v: want the stream with its shared start's evidence", m.List)
	}
	var b strings.Builder
	if err := WriteText(&b, r); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"writer rules: writers sharing one start: 1 stream split by connection or export phase (2 writers), 0 not split, 0 points not placed\n",
		"    writers sharing one start: split by export phase (every 1s) into 2 writers",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("text report lacks %q:\n%s", want, b.String())
		}
	}
}

// TestMetricsSharedStartNotSplit: a shared start whose writers' exports
// come within TimeSlack of each other cannot be split: the summary and
// the stream's row say so, with the falls dropped.
func TestMetricsSharedStartNotSplit(t *testing.T) {
	a := New(Options{})
	s := time.Second
	seq := uint64(0)
	add := func(p pt) {
		seq++
		a.AddMetrics(at(seq, p.at, "p"), counter("", p))
	}
	for k := range 40 {
		tm := 10*s + time.Duration(k)*s
		add(pt{0, tm, 1000 + 10*int64(k)})
		add(pt{0, tm + 2*time.Millisecond, int64(k)})
	}
	r := a.Report()
	w := r.Metrics.WriterRules
	if w == nil || w.SharedSplit != 0 || w.SharedUnsplit != 40 {
		t.Fatalf("writer rules %+v, want 40 points not split", w)
	}
	var b strings.Builder
	if err := WriteText(&b, r); err != nil {
		t.Fatal(err)
	}
	if want := "writer rules: writers sharing one start: 0 streams split by connection or export phase (0 writers), 0 not split, 40 points not placed\n"; !strings.Contains(b.String(), want) {
		t.Errorf("text report lacks %q:\n%s", want, b.String())
	}
}

// TestWriterRulesLine: the report's writer-rules line names the delta
// points that continued their chain and those that went on across
// intervals their writer sent nothing for (known empty or not), as the
// status page does; nothing when no rule decided anything.
func TestWriterRulesLine(t *testing.T) {
	var none *WriterRules
	if got := none.String(); got != "" {
		t.Errorf("no rules: %q", got)
	}
	w := &WriterRules{DeltaPeers: 2, DeltaContinued: 1, DeltaAcrossGap: 5, DeltaEmpty: 3}
	want := "writer rules: delta chains: 0 copies dropped, 2 peers kept as their own series, 0 undecided (held); " +
		"1 delta point continued their writer's chain (an interval overtaken, or filling a gap); " +
		"5 delta points went on across intervals their writer sent nothing for, 3 of them across intervals known empty"
	if got := w.String(); got != want {
		t.Errorf("line:\n got %q\nwant %q", got, want)
	}
}
