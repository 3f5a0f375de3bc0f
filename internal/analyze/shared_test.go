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
}
