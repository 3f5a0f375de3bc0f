package streams

import (
	"math"
	"testing"
	"time"
)

const sec = uint64(time.Second)

// pt is a point in seconds, with the decision it should get.
type pt struct {
	start, time float64
	value       float64
	sum         float64 // when hasSum
	hasSum      bool
	noValue     bool
	want        string // Decision.String()
	writer      float64
	conn        uint64 // Point.Conn
}

func secs(f float64) uint64 { return uint64(math.Round(f * float64(sec))) }

func (p pt) point() Point {
	fp := fingerprint(fp0)
	fp.float(p.value)
	if p.hasSum {
		fp.float(p.sum)
	}
	return Point{Start: secs(p.start), Time: secs(p.time), Value: p.value, Sum: p.sum, HasSum: p.hasSum, NoValue: p.noValue, Fingerprint: uint64(fp), Conn: p.conn}
}

var (
	monoSum   = NewShape(KindSum, true, true)
	upDown    = NewShape(KindSum, true, false)
	deltaSum  = NewShape(KindSum, false, true)
	gauge     = NewShape(KindGauge, false, false)
	histogram = NewShape(KindHistogram, true, true)
)

func run(t *testing.T, tr *Tracker, shape Shape, steps []pt) {
	t.Helper()
	id := ID{1}
	for i, s := range steps {
		d := tr.Observe(id, shape, s.point(), 1)
		if got := d.String(); got != s.want {
			t.Errorf("step %d (start %g time %g value %g): got %q, want %q", i, s.start, s.time, s.value, got, s.want)
		}
		if s.writer != 0 && d.Writer != secs(s.writer) {
			t.Errorf("step %d: writer %d, want %d", i, d.Writer, secs(s.writer))
		}
	}
}

func newTracker(t testing.TB, mutate func(*Policy)) *Tracker {
	t.Helper()
	p := DefaultPolicy()
	if mutate != nil {
		mutate(&p)
	}
	tr, err := NewTracker(p)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func TestCumulative(t *testing.T) {
	cases := []struct {
		name   string
		shape  Shape
		policy func(*Policy)
		steps  []pt
	}{
		{"later-start replica starting before the elected writer's newest point", monoSum, nil, []pt{
			{start: 1, time: 10, value: 10, want: "pass"},
			{start: 1, time: 20, value: 20, want: "pass"},
			{start: 15, time: 25, value: 1, want: "drop overlap"},
			{start: 1, time: 30, value: 30, want: "pass"},
			{start: 15, time: 35, value: 2, want: "drop overlap"},
			{start: 15, time: 35, value: 2, want: "drop duplicate"},
			{start: 15, time: 34, value: 2, want: "drop out_of_order"},
			{start: 1, time: 40, value: 40, want: "pass"},
		}},
		{"later-start replica starting after the elected writer's newest point: a restart until that writer sends again", monoSum, nil, []pt{
			{start: 1, time: 10, value: 10, want: "pass"},
			{start: 1, time: 20, value: 20, want: "pass"},
			{start: 22, time: 27, value: 1, want: "pass elect:restart"}, // nothing yet tells it from a restart
			{start: 1, time: 30, value: 30, want: "pass elect:earlier_start"},
			{start: 22, time: 37, value: 2, want: "drop overlap"},
			{start: 1, time: 40, value: 40, want: "pass"},
		}},
		{"restart", monoSum, nil, []pt{
			{start: 1, time: 10, value: 10, want: "pass"},
			{start: 1, time: 20, value: 20, want: "pass"},
			{start: 1, time: 30, value: 30, want: "pass"},
			{start: 35, time: 45, value: 1, want: "pass elect:restart"},
			{start: 35, time: 55, value: 2, want: "pass"},
			{start: 1, time: 29, value: 29, want: "drop out_of_order"}, // late point of the old life
			{start: 35, time: 65, value: 3, want: "pass"},
		}},
		{"restart with a final flush shortly before", monoSum, nil, []pt{
			{start: 1, time: 10, value: 10, want: "pass"},
			{start: 1, time: 20, value: 20, want: "pass"},
			{start: 1, time: 23, value: 23, want: "pass"}, // shutdown flush: interval 10-(10-3)/8
			{start: 23.5, time: 33.5, value: 1, want: "pass elect:restart"},
		}},
		{"restart after a single point", monoSum, nil, []pt{
			{start: 1, time: 10, value: 10, want: "pass"},
			{start: 12, time: 22, value: 1, want: "pass elect:restart"}, // no interval needed
			{start: 12, time: 32, value: 2, want: "pass"},
		}},
		{"a misjudged restart is taken back by the earlier start", monoSum, nil, []pt{
			{start: 1, time: 10, value: 10, want: "pass"},
			{start: 1, time: 20, value: 20, want: "pass"},
			{start: 21, time: 31, value: 1, want: "pass elect:restart"}, // the elected writer looks quiet
			{start: 1, time: 32, value: 32, want: "pass elect:earlier_start"},
			{start: 21, time: 41, value: 2, want: "drop overlap"},
		}},
		{"earlier start seen second takes over once live", monoSum, nil, []pt{
			{start: 5, time: 15, value: 10, want: "pass"},
			{start: 5, time: 25, value: 20, want: "pass"},
			{start: 1, time: 20, value: 30, want: "drop overlap"}, // older than the newest output
			{start: 1, time: 30, value: 40, want: "pass elect:earlier_start", writer: 1},
			{start: 5, time: 35, value: 30, want: "drop overlap", writer: 5},
			{start: 1, time: 40, value: 50, want: "pass"},
		}},
		{"failover", monoSum, nil, []pt{
			{start: 1, time: 10, value: 10, want: "pass"},
			{start: 5, time: 12, value: 1, want: "drop overlap"},
			{start: 1, time: 20, value: 20, want: "pass"},
			{start: 5, time: 22, value: 2, want: "drop overlap"},
			{start: 1, time: 30, value: 30, want: "pass"},
			{start: 5, time: 32, value: 3, want: "drop overlap"},
			{start: 5, time: 42, value: 4, want: "drop overlap"},
			{start: 5, time: 52, value: 5, want: "drop overlap"},
			{start: 5, time: 62, value: 6, want: "pass elect:failover"}, // 32s >= 3 x 10s
			{start: 5, time: 72, value: 7, want: "pass"},
			{start: 1, time: 25, value: 25, want: "drop out_of_order"}, // the old writer, now the runner-up
		}},
		{"failover after a configured time", monoSum, func(p *Policy) { p.FailoverAfter = 15 * time.Second }, []pt{
			{start: 1, time: 10, value: 10, want: "pass"},
			{start: 1, time: 20, value: 20, want: "pass"},
			{start: 5, time: 32, value: 3, want: "drop overlap"},
			{start: 5, time: 35, value: 4, want: "pass elect:failover"},
		}},
		{"failover floor", monoSum, func(p *Policy) { p.FailoverFloor = 10 * time.Second }, []pt{
			{start: 1, time: 1, value: 1, want: "pass"},
			{start: 1, time: 2, value: 2, want: "pass"},
			{start: 1.5, time: 5.5, value: 3, want: "drop overlap"}, // 3 x 1s < 10s floor
			{start: 1.5, time: 12.5, value: 4, want: "pass elect:failover"},
		}},
		{"exact repeat and out of order", monoSum, nil, []pt{
			{start: 1, time: 10, value: 10, want: "pass"},
			{start: 1, time: 20, value: 20, want: "pass"},
			{start: 1, time: 20, value: 20, want: "drop duplicate"},
			{start: 1, time: 20, value: 21, want: "drop out_of_order"},
			{start: 1, time: 10, value: 10, want: "drop out_of_order"},
			{start: 1, time: 30, value: 30, want: "pass"},
		}},
		{"same start, diverging values: never a decrease", monoSum, nil, []pt{
			{start: 1, time: 10, value: 10, want: "pass"},
			{start: 1, time: 11, value: 9, want: "drop decrease"},
			{start: 1, time: 20, value: 20, want: "pass"},
			{start: 1, time: 21, value: 21, want: "pass"},
			{start: 1, time: 30, value: 20.5, want: "drop decrease"},
		}},
		{"non-monotonic sum may decrease", upDown, nil, []pt{
			{start: 1, time: 10, value: 10, want: "pass"},
			{start: 1, time: 20, value: -5, want: "pass"},
		}},
		{"unknown start: a decrease is a reset", monoSum, nil, []pt{
			{start: 0, time: 10, value: 10, want: "pass"},
			{start: 0, time: 20, value: 2, want: "pass"},
		}},
		{"histogram sum must not decrease either", histogram, nil, []pt{
			{start: 1, time: 10, value: 3, sum: 30, hasSum: true, want: "pass"},
			{start: 1, time: 20, value: 4, sum: 29, hasSum: true, want: "drop decrease"},
			{start: 1, time: 30, value: 4, sum: 31, hasSum: true, want: "pass"},
			{start: 1, time: 40, value: 5, want: "pass"}, // no sum: nothing to compare
			{start: 1, time: 50, value: 5, sum: 1, hasSum: true, want: "pass"},
		}},
		{"NaN is no decrease", monoSum, nil, []pt{
			{start: 1, time: 10, value: 10, want: "pass"},
			{start: 1, time: 20, value: math.NaN(), want: "pass"},
			{start: 1, time: 30, value: 5, want: "pass"},
		}},
		{"no recorded value keeps the last value", monoSum, nil, []pt{
			{start: 1, time: 10, value: 10, want: "pass"},
			{start: 1, time: 20, noValue: true, want: "pass"},
			{start: 1, time: 30, value: 9, want: "drop decrease"},
			{start: 1, time: 40, value: 11, want: "pass"},
		}},
		{"split labels the other writers", monoSum, func(p *Policy) { p.Split = true }, []pt{
			{start: 1, time: 10, value: 10, want: "pass", writer: 0},
			{start: 5, time: 12, value: 3, want: "label overlap", writer: 5},
			{start: 5, time: 12, value: 3, want: "drop duplicate"},
			{start: 5, time: 11, value: 3, want: "drop out_of_order"},
			{start: 5, time: 22, value: 2, want: "drop decrease"},
			{start: 1, time: 20, value: 20, want: "pass"},
			{start: 5, time: 32, value: 4, want: "label overlap"},
			{start: 5, time: 72, value: 5, want: "label overlap"}, // no failover in split
			{start: 1, time: 71, value: 71, want: "pass"},
		}},
		{"split: an earlier start does not take over", monoSum, func(p *Policy) { p.Split = true }, []pt{
			{start: 5, time: 10, value: 10, want: "pass"},
			{start: 1, time: 12, value: 30, want: "label overlap", writer: 1},
		}},
		{"split: a restart takes over the unlabelled series", monoSum, func(p *Policy) { p.Split = true }, []pt{
			{start: 1, time: 10, value: 10, want: "pass"},
			{start: 1, time: 20, value: 20, want: "pass"},
			{start: 25, time: 35, value: 1, want: "pass elect:restart"},
		}},
		{"split: a later start before the elected writer is quiet is labelled, not lost", monoSum, func(p *Policy) { p.Split = true }, []pt{
			{start: 1, time: 10, value: 10, want: "pass"},
			{start: 1, time: 20, value: 20, want: "pass"},
			{start: 22, time: 27, value: 1, want: "label overlap"}, // gap 7 < interval 10
			{start: 1, time: 30, value: 30, want: "pass"},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			run(t, newTracker(t, c.policy), c.shape, c.steps)
		})
	}
}

// TestRestartInterleavings: a restart (a writer that starts at or after the
// elected writer's newest point, the elected writer sending nothing more)
// loses no point, whatever the gaps between exports and the arrival order.
// Times mirror the JS client of TestRestartKeepsItsReset: exports every
// 0.4 s, timestamps in milliseconds, the restart 1.5 s in. Every case
// failed before the restart stopped waiting for the elected writer to look
// quiet for its interval.
func TestRestartInterleavings(t *testing.T) {
	cases := []struct {
		name  string
		steps []pt
	}{
		{"a late tick inflates the observed interval past the new life's first gap (the failed CI run)", []pt{
			{start: 0.02, time: 0.4, value: 4, want: "pass"},
			{start: 0.02, time: 0.8, value: 8, want: "pass"},
			{start: 0.02, time: 1.3, value: 13, want: "pass"},  // a tick 0.1 s late: interval 0.5
			{start: 0.02, time: 1.52, value: 16, want: "pass"}, // the flush at shutdown: interval 0.465
			// The new provider's first export, 0.4 s after it was made:
			// 0.415 s after the old writer's last point.
			{start: 1.55, time: 1.935, value: 4, want: "pass elect:restart"},
			{start: 1.55, time: 2.335, value: 8, want: "pass"},
		}},
		{"the new life starts in the millisecond of the old life's last point", []pt{
			{start: 0.02, time: 0.4, value: 4, want: "pass"},
			{start: 0.02, time: 0.8, value: 8, want: "pass"},
			{start: 0.02, time: 1.2, value: 12, want: "pass"},
			{start: 0.02, time: 1.5, value: 15, want: "pass"},
			{start: 1.5, time: 1.88, value: 4, want: "pass elect:restart"},
		}},
		{"the old life's last point arrives after the new life's first", []pt{
			{start: 0.02, time: 0.4, value: 4, want: "pass"},
			{start: 0.02, time: 0.8, value: 8, want: "pass"},
			{start: 0.02, time: 1.2, value: 12, want: "pass"},
			{start: 1.55, time: 1.935, value: 4, want: "pass elect:restart"},
			{start: 0.02, time: 1.52, value: 16, want: "drop out_of_order"}, // too late for the series, no second writer
			{start: 1.55, time: 2.335, value: 8, want: "pass"},
		}},
		{"a restart that exports at once", []pt{
			{start: 1, time: 10, value: 10, want: "pass"},
			{start: 1, time: 20, value: 20, want: "pass"},
			{start: 20.001, time: 20.002, value: 1, want: "pass elect:restart"},
			{start: 20.001, time: 30, value: 9, want: "pass"},
		}},
		{"a short-lived process run again and again: one point per life", []pt{
			{start: 1, time: 1.1, value: 1, want: "pass"},
			{start: 2, time: 2.1, value: 1, want: "pass elect:restart"},
			{start: 3, time: 3.1, value: 2, want: "pass elect:restart"},
			{start: 4, time: 4.1, value: 1, want: "pass elect:restart"},
		}},
		{"the new life's batches arrive out of order: the older one cannot follow the newer", []pt{
			{start: 0.02, time: 0.4, value: 4, want: "pass"},
			{start: 0.02, time: 0.8, value: 8, want: "pass"},
			{start: 0.02, time: 1.2, value: 12, want: "pass"},
			{start: 1.55, time: 2.335, value: 8, want: "pass elect:restart"},
			{start: 1.55, time: 1.935, value: 4, want: "drop out_of_order"},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			run(t, newTracker(t, nil), monoSum, c.steps)
			run(t, newTracker(t, nil), histogram, c.steps)
		})
	}
}

func TestDelta(t *testing.T) {
	run(t, newTracker(t, nil), deltaSum, []pt{
		{start: 0, time: 10, value: 1, want: "pass"},
		{start: 10, time: 20, value: 2, want: "pass"},
		{start: 10, time: 20, value: 2, want: "drop duplicate"},
		{start: 15, time: 25, value: 7, want: "drop overlap", writer: 15},
		{start: 20, time: 30, value: 3, want: "pass", writer: 0},
		{start: 25, time: 35, value: 7, want: "drop overlap", writer: 15},   // the second run goes on
		{start: 25, time: 35, value: 7, want: "drop duplicate", writer: 15}, // and is repeated
		{start: 0, time: 10, value: 1, want: "drop out_of_order"},
		{start: 40, time: 50, value: 4, want: "pass elect:restart", writer: 40}, // a gap
		{start: 50, time: 60, value: 5, want: "pass", writer: 40},
		{start: 30, time: 40, value: 3, want: "drop overlap", writer: 0}, // late, continues the old run
	})
}

func TestDeltaFailover(t *testing.T) {
	run(t, newTracker(t, nil), deltaSum, []pt{
		{start: 0, time: 10, value: 1, want: "pass"},
		{start: 5, time: 15, value: 9, want: "drop overlap", writer: 5},
		{start: 10, time: 20, value: 2, want: "pass"},
		{start: 15, time: 25, value: 9, want: "drop overlap", writer: 5},
		// The elected run stops; the other run goes on past its end.
		{start: 25, time: 35, value: 9, want: "pass elect:failover", writer: 5},
		{start: 35, time: 45, value: 9, want: "pass", writer: 5},
	})
}

func TestDeltaSplit(t *testing.T) {
	run(t, newTracker(t, func(p *Policy) { p.Split = true }), deltaSum, []pt{
		{start: 0, time: 10, value: 1, want: "pass"},
		{start: 5, time: 15, value: 9, want: "label overlap", writer: 5},
		{start: 10, time: 20, value: 2, want: "pass", writer: 0},
		{start: 15, time: 25, value: 9, want: "label overlap", writer: 5},
	})
}

func TestGauge(t *testing.T) {
	run(t, newTracker(t, nil), gauge, []pt{
		{time: 10, value: 1, want: "pass"},
		{time: 20, value: 2, want: "pass"},
		{time: 20, value: 2, want: "drop duplicate"},
		{time: 20, value: 3, want: "drop overlap"},
		{time: 15, value: 3, want: "drop out_of_order"},
		{time: 22, value: 5, want: "pass"}, // 2s after, interval 10s: one short gap
		{time: 30, value: 5, want: "pass"},
		{time: 32, value: 6, want: "pass suspected_writer"}, // the second
		{time: 40, value: 5, want: "pass"},
	})
}

// TestGaugeShortGaps: one short gap is a writer's final flush at shutdown
// (the Java agent's BatchSpanProcessor queueSize at the JVM's exit); a
// second writer makes them again and again, a slower second reader once
// per its interval; a restart (a writer that started after the newest
// point) forgets the one before.
func TestGaugeShortGaps(t *testing.T) {
	t.Run("final flush", func(t *testing.T) {
		run(t, newTracker(t, nil), gauge, []pt{
			{start: 1, time: 10, value: 1, want: "pass"},
			{start: 1, time: 20, value: 1, want: "pass"},
			{start: 1, time: 30, value: 1, want: "pass"},
			{start: 1, time: 31, value: 0, want: "pass"}, // at shutdown
		})
	})
	t.Run("two readers", func(t *testing.T) {
		run(t, newTracker(t, nil), gauge, []pt{
			{start: 1, time: 10, value: 1, want: "pass"},
			{start: 1, time: 12, value: 1, want: "pass"},
			{start: 1, time: 20, value: 1, want: "pass"},
			{start: 1, time: 22, value: 1, want: "pass"}, // interval 8s, 2s: the first short gap
			{start: 1, time: 30, value: 1, want: "pass"},
			{start: 1, time: 32, value: 1, want: "pass suspected_writer"},
		})
	})
	t.Run("a slower second reader", func(t *testing.T) {
		run(t, newTracker(t, nil), gauge, []pt{
			{start: 1, time: 10, value: 1, want: "pass"},
			{start: 1, time: 20, value: 1, want: "pass"},
			{start: 1, time: 23, value: 1, want: "pass"}, // every 60s
			{start: 1, time: 30, value: 1, want: "pass"},
			{start: 1, time: 40, value: 1, want: "pass"},
			{start: 1, time: 50, value: 1, want: "pass"},
			{start: 1, time: 60, value: 1, want: "pass"},
			{start: 1, time: 70, value: 1, want: "pass"},
			{start: 1, time: 80, value: 1, want: "pass"},
			{start: 1, time: 83, value: 1, want: "pass suspected_writer"},
		})
	})
	t.Run("restarts", func(t *testing.T) {
		run(t, newTracker(t, nil), gauge, []pt{
			{start: 1, time: 10, value: 1, want: "pass"},
			{start: 1, time: 20, value: 1, want: "pass"},
			{start: 1, time: 21, value: 0, want: "pass"}, // final flush
			{start: 25, time: 31, value: 1, want: "pass"},
			{start: 25, time: 41, value: 1, want: "pass"},
			{start: 25, time: 42, value: 0, want: "pass"}, // the next one's
		})
	})
}

func TestLimitAndSweep(t *testing.T) {
	tr := newTracker(t, func(p *Policy) { p.MaxStreams = 2; p.MaxStale = time.Minute })
	p := pt{start: 1, time: 10, value: 1}.point()
	now := int64(time.Hour)
	for i, want := range []string{"pass", "pass", "pass unjudged", "pass unjudged"} {
		if got := tr.Observe(ID{byte(i)}, monoSum, p, now).String(); got != want {
			t.Errorf("stream %d: got %q, want %q", i, got, want)
		}
	}
	if tr.Len() != 2 || tr.Stats().Unjudged != 2 || tr.Stats().Created != 2 {
		t.Fatalf("len %d stats %+v", tr.Len(), tr.Stats())
	}
	// Stream 0 is seen again later; stream 1 goes quiet.
	p2 := pt{start: 1, time: 20, value: 2}.point()
	tr.Observe(ID{0}, monoSum, p2, now+int64(30*time.Second))
	if n := tr.Expire(now + int64(time.Minute)); n != 0 {
		t.Fatalf("expired %d at exactly max_stale", n)
	}
	if n := tr.Expire(now + int64(time.Minute) + 1); n != 1 || tr.Len() != 1 {
		t.Fatalf("expired %d, len %d; want 1, 1", n, tr.Len())
	}
	// Room again: a new stream is judged, and reuses the slot.
	if got := tr.Observe(ID{9}, monoSum, p, now).String(); got != "pass" {
		t.Fatalf("new stream after sweep: %q", got)
	}
	if tr.used != 2 {
		t.Fatalf("slots used %d, want 2 (reused)", tr.used)
	}
	if got := tr.Observe(ID{9}, monoSum, p, now).String(); got != "drop duplicate" {
		t.Fatalf("reused slot lost its state: %q", got)
	}
}

func TestSweepBudget(t *testing.T) {
	tr := newTracker(t, func(p *Policy) { p.MaxStale = time.Second })
	p := pt{start: 1, time: 10, value: 1}.point()
	for i := 0; i < 100; i++ {
		tr.Observe(ID{byte(i), 1}, monoSum, p, 0)
	}
	later := int64(2 * time.Second)
	total := 0
	for i := 0; i < 10; i++ {
		n := tr.Sweep(later, 10)
		if n > 10 {
			t.Fatalf("sweep removed %d with a budget of 10", n)
		}
		total += n
	}
	if total != 100 || tr.Len() != 0 || tr.Stats().Expired != 100 {
		t.Fatalf("removed %d, len %d, stats %+v", total, tr.Len(), tr.Stats())
	}
}

func TestUndo(t *testing.T) {
	tr := newTracker(t, nil)
	var j Journal
	a, b := ID{1}, ID{2}
	tr.Observe(a, monoSum, pt{start: 0, time: 10, value: 10}.point(), 0)
	tr.Observe(a, monoSum, pt{start: 0, time: 20, value: 20}.point(), 0)

	// A request that fails downstream.
	tr.Record(&j)
	req := []struct {
		id ID
		p  pt
	}{
		{a, pt{start: 0, time: 30, value: 30}},
		{a, pt{start: 5, time: 35, value: 1}},
		{b, pt{start: 0, time: 30, value: 1}},
	}
	for _, r := range req {
		tr.Observe(r.id, monoSum, r.p.point(), 0)
	}
	tr.Record(nil)
	if j.Len() != 3 {
		t.Fatalf("journal has %d entries, want 3", j.Len())
	}
	if n := tr.Undo(&j); n != 3 {
		t.Fatalf("undid %d, want 3", n)
	}
	if tr.Len() != 1 || j.Len() != 0 {
		t.Fatalf("after undo: len %d, journal %d", tr.Len(), j.Len())
	}
	// The retry is judged afresh, not as a repeat.
	for i, want := range []string{"pass", "drop overlap", "pass"} {
		if got := tr.Observe(req[i].id, monoSum, req[i].p.point(), 0).String(); got != want {
			t.Errorf("retry %d: %q, want %q", i, got, want)
		}
	}
}

func TestUndoKeepsOthersChanges(t *testing.T) {
	tr := newTracker(t, nil)
	var j Journal
	a := ID{1}
	tr.Observe(a, monoSum, pt{start: 0, time: 10, value: 10}.point(), 0)
	tr.Record(&j)
	tr.Observe(a, monoSum, pt{start: 0, time: 20, value: 20}.point(), 0)
	tr.Record(nil)
	// Another request moves the stream on while the first is downstream.
	tr.Observe(a, monoSum, pt{start: 0, time: 30, value: 30}.point(), 0)
	if n := tr.Undo(&j); n != 0 {
		t.Fatalf("undid %d changes over another request's", n)
	}
	if got := tr.Observe(a, monoSum, pt{start: 0, time: 30, value: 30}.point(), 0).String(); got != "drop duplicate" {
		t.Fatalf("the other request's change was lost: %q", got)
	}
}

func TestPolicyValidate(t *testing.T) {
	bad := []func(*Policy){
		func(p *Policy) { p.MaxStreams = 0 },
		func(p *Policy) { p.MaxStreams = MaxStreamsLimit + 1 },
		func(p *Policy) { p.MaxStale = 0 },
		func(p *Policy) { p.FailoverAfter = -1 },
		func(p *Policy) { p.FailoverFloor = -1 },
	}
	for i, m := range bad {
		p := DefaultPolicy()
		m(&p)
		if _, err := NewTracker(p); err == nil {
			t.Errorf("case %d: no error", i)
		}
	}
	if err := DefaultPolicy().Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestWriterName(t *testing.T) {
	for start, want := range map[uint64]string{
		0:                   "0000000000000000",
		0xabc:               "0000000000000abc",
		1700000000123456789: "17979cfe3d85cd15",
		math.MaxUint64:      "ffffffffffffffff",
	} {
		if got := WriterName(start); got != want {
			t.Errorf("WriterName(%d) = %q, want %q", start, got, want)
		}
	}
}

func TestObserveAllocs(t *testing.T) {
	tr := newTracker(t, nil)
	var j Journal
	j.entries = make([]journalEntry, 0, 8)
	ids := []ID{{1}, {2}}
	tm := 1.0
	allocs := testing.AllocsPerRun(1000, func() {
		tm++
		j.Reset()
		tr.Record(&j)
		for _, id := range ids {
			tr.Observe(id, monoSum, pt{start: 1, time: tm, value: tm}.point(), 0)
			tr.Observe(id, monoSum, pt{start: 0.5, time: tm, value: tm}.point(), 0)
		}
		tr.Record(nil)
	})
	if allocs != 0 {
		t.Fatalf("Observe allocates %.1f times per run", allocs)
	}
}

// TestChangeOverInterpolation: a failover to a writer that started before
// the previous writer's newest point shifts that writer's points of a
// monotonic cumulative Sum: start at the previous writer's newest time,
// less the count interpolated over the overlap. Nothing else is shifted.
func TestChangeOverInterpolation(t *testing.T) {
	// A (start 100) every 10 s to 130; B (start 120) dropped while A is
	// live; A quiet from 130, so B's point at 160 (3 intervals) fails over.
	steps := func(shape Shape, tr *Tracker) []Decision {
		var out []Decision
		for _, p := range []pt{
			{start: 100, time: 110, value: 10},
			{start: 100, time: 120, value: 20},
			{start: 100, time: 130, value: 30},
			{start: 120, time: 125, value: 2},
			{start: 120, time: 160, value: 40},
			{start: 120, time: 170, value: 50},
		} {
			out = append(out, tr.Observe(ID{1}, shape, p.point(), 1))
		}
		return out
	}
	d := steps(monoSum, newTracker(t, nil))
	if d[4].Election != ElectionFailover || !d[4].Shifted || !d[5].Shifted {
		t.Fatalf("failover %v, shifted %v then %v; want a shifted failover", d[4], d[4].Shifted, d[5].Shifted)
	}
	// Overlap (120, 130] of B's (120, 160]: a quarter of 40.
	want := Shift{Start: secs(130), Offset: 10}
	if d[4].Shift != want || d[5].Shift != want {
		t.Fatalf("shifts %+v, %+v; want %+v for both", d[4].Shift, d[5].Shift, want)
	}
	for i := range 4 {
		if d[i].Shifted {
			t.Errorf("point %d of the elected writer shifted: %+v", i, d[i].Shift)
		}
	}
	for name, c := range map[string]struct {
		shape Shape
		tr    *Tracker
	}{
		"up-down counter": {upDown, newTracker(t, nil)},
		"histogram":       {histogram, newTracker(t, nil)},
		"interpolate off": {monoSum, newTracker(t, func(p *Policy) { p.Interpolate = false })},
	} {
		d := steps(c.shape, c.tr)
		if d[4].Election != ElectionFailover {
			t.Fatalf("%s: %v, want a failover", name, d[4])
		}
		if d[4].Shifted || d[5].Shifted {
			t.Errorf("%s: shifted %+v", name, d[4].Shift)
		}
	}

	// A restart (started at or after the newest point) does not overlap:
	// nothing to interpolate.
	tr := newTracker(t, nil)
	run(t, tr, monoSum, []pt{
		{start: 100, time: 110, value: 10, want: "pass"},
		{start: 100, time: 120, value: 20, want: "pass"},
		{start: 125, time: 135, value: 3, want: "pass elect:restart"},
	})
	if d := tr.Observe(ID{1}, monoSum, pt{start: 125, time: 145, value: 5}.point(), 1); d.Shifted {
		t.Errorf("restart shifted: %+v", d.Shift)
	}

	// A later election ends the shift: A, started earlier, turns out to
	// be alive and takes back over.
	tr = newTracker(t, nil)
	steps(monoSum, tr)
	if d := tr.Observe(ID{1}, monoSum, pt{start: 100, time: 175, value: 31}.point(), 1); d.Election != ElectionEarlierStart || d.Shifted {
		t.Errorf("A back: %v, shifted %v; want elect:earlier_start, not shifted", d, d.Shifted)
	}
	if d := tr.Observe(ID{1}, monoSum, pt{start: 100, time: 185, value: 32}.point(), 1); d.Shifted {
		t.Errorf("A's next point shifted: %+v", d.Shift)
	}
}
