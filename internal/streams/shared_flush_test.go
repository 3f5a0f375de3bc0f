package streams

import (
	"strings"
	"testing"
)

// flushSharers are two processes sharing the start 100 s, exporting every
// second: A at whole seconds from 110 s counting 10 a second from 100, B
// 400 ms later counting 2 a second from 10, rounds points each; then A
// shuts down: its final flush (value 183) comes 350 ms after its last
// regular export, on B's phase, above B's value; B goes on for 3 more
// exports.
func flushSharers(rounds int) []pt {
	var out []pt
	for k := range rounds {
		out = append(out, pt{start: 100, time: 110 + float64(k), value: 100 + 10*float64(k)})
		if k == rounds-1 {
			out = append(out, pt{start: 100, time: 110.35 + float64(k), value: 100 + 10*float64(k) + 3})
		}
		out = append(out, pt{start: 100, time: 110.4 + float64(k), value: 10 + 2*float64(k)})
	}
	for k := range 3 {
		out = append(out, pt{start: 100, time: 110.4 + float64(rounds+k), value: 10 + 2*float64(rounds+k)})
	}
	return out
}

// TestSharedStartFinalFlush: a writer's final flush at shutdown, off its
// own timer and on another writer's phase, above that writer's value. By
// phase alone it was B's (B's series took A's 183, B's next export fell
// below it and B became a third writer: 395 delivered for a truth of 215,
// A's count twice); its value goes on from A's (a rise of 3 where A rises
// 10 an interval, B 2), so it is A's (flushOf), and counted so.
func TestSharedStartFinalFlush(t *testing.T) {
	tr := autoTracker(t, nil)
	series := map[uint8]pt{}
	for _, p := range flushSharers(9) {
		d := tr.Observe(ID{1}, monoSum, p.point(), 1)
		t.Logf("%5.2f s %4g: %v sharer %d", p.time, p.value, d, d.Sharer)
		if d.Verdict != Drop {
			if q, ok := series[d.Sharer]; !ok || p.time > q.time {
				series[d.Sharer] = p
			}
		}
	}
	delivered := 0.0
	for k, p := range series {
		t.Logf("series %d: newest %g at %g s", k, p.value, p.time)
		delivered += p.value
	}
	e, _ := tr.Shared(ID{1})
	t.Logf("%s", e)
	// The truth: A's flush (183) and B's newest (10 + 2*11 = 32).
	if want := 183.0 + 32; delivered != want {
		t.Errorf("delivered %g, want %g", delivered, want)
	}
	if e.Writers != 2 || e.ByValue != 1 || e.Unsplit != 0 || !strings.Contains(e.String(), "1 points early for their writer (a flush at shutdown) on another's phase, placed by the value they continue") {
		t.Errorf("evidence %+v: %s", e, e)
	}
}
