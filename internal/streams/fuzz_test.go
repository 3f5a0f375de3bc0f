package streams

import (
	"maps"
	"math"
	"slices"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// FuzzTracker feeds the Tracker arbitrary point sequences over a few streams
// and checks what must hold whatever the input:
//   - the points it passes unlabelled for a stream have strictly increasing
//     times (the backend never sees a step back in time);
//   - within one (non-zero) start, a monotonic stream's passed values never
//     decrease, so a decrease in the output always comes with a start change;
//   - Label only with Split, and never for the elected writer;
//   - Undo of a recorded stretch restores the streams exactly;
//   - with Auto, the held points' bookkeeping adds up and stays within
//     MaxHeldBytes, and only a peer's held points are released;
//   - a held restart's points, sent as the stream's own, keep those
//     orders with the points passed (they go out before the request's).
//
// The first byte picks the policy; every op is 4 bytes: stream, shape and
// connection, start, time step, value.
func FuzzTracker(f *testing.F) {
	f.Add([]byte{0, 0, 1, 10, 10, 0, 1, 10, 20, 0, 2, 3, 5, 0, 1, 10, 30})
	f.Add([]byte{1, 0, 1, 10, 10, 0, 2, 2, 40, 0, 2, 10, 50, 0, 1, 9, 20})
	f.Add([]byte{2, 1, 0, 10, 1, 1, 0, 10, 1, 1, 0, 0, 1, 2, 0, 5, 7, 2, 0, 5, 7})
	f.Add([]byte{4, 0, 1, 10, 10, 0, 2, 1, 50, 0, 1, 10, 20, 0, 2, 1, 60, 0, 2, 40, 70, 0, 1, 1, 30})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 1 {
			return
		}
		p := DefaultPolicy()
		p.Split = data[0]&1 != 0
		p.Auto = !p.Split && data[0]&4 != 0
		if data[0]&2 != 0 {
			p.FailoverAfter = 20 * 1e9
		}
		p.MaxStreams = 3 // 4 stream ids: one is left unjudged at times
		if p.Auto {
			p.MaxHeldBytes = 100 // room for two or three held points
		}
		tr, err := NewTracker(p)
		if err != nil {
			t.Fatal(err)
		}
		shapes := []Shape{monoSum, upDown, deltaSum, gauge, histogram}
		starts := []uint64{0, 100 * sec, 105 * sec, 130 * sec}
		type out struct {
			time, start uint64
			value       float64
		}
		last := map[ID]out{}
		// A writer's series: its start, and its chain when several
		// writers share the start (shared.go: chain 0 passes unlabelled,
		// the others are labelled).
		type writerOf struct {
			id     ID
			start  uint64
			sharer uint8
		}
		labelled := map[writerOf]bool{}
		clock := uint64(100 * sec)
		ops := data[1:]
		cut := len(ops) / 8 * 2 // where the recorded stretch begins, in ops
		var j Journal
		var before map[ID]stream
		for i := 0; i+4 <= len(ops); i += 4 {
			if i/4 == cut {
				before = tr.snapshot()
				tr.Record(&j)
			}
			id := ID{ops[i] & 3}
			shape := shapes[int(ops[i]>>2)%len(shapes)]
			start := starts[ops[i+1]&3]
			clock += uint64(ops[i+2]) * sec / 4
			// The top two bits of the first byte: the connection it came on
			// (0: none known).
			pt := Point{Start: start, Time: clock - uint64(ops[i+1]>>2)*sec, Value: float64(ops[i+3]), Fingerprint: uint64(ops[i+3]), Conn: uint64(ops[i] >> 6)}
			if pt.Time < pt.Start {
				pt.Start = 0
			}
			if s, _, ok := tr.index.find(&id, tr); ok {
				shape = tr.at(s).shape // a stream keeps the shape it was made with
			}
			if data[0]&8 != 0 {
				tr.NewScope(7) // one identity: its streams' points at one time are one export (exports.go)
			}
			d := tr.ObserveFrom(id, 9, shape, pt, int64(clock))
			if d.Hold {
				if d.Verdict != Drop || !p.Auto {
					t.Fatalf("op %d: %v asks to be held", i/4, d)
				}
				tr.Hold(id, d.Writer, pmetric.NewMetrics(), 10+int(ops[i+3]%50))
			}
			if d.Restart {
				if !d.Hold || !shape.Cumulative() {
					t.Fatalf("op %d: %v a held restart, not held or not cumulative", i/4, d)
				}
				md := pmetric.NewMetrics()
				a := md.ResourceMetrics().AppendEmpty().Resource().Attributes()
				a.PutInt("id", int64(id[0]))
				a.PutInt("time", int64(pt.Time))
				a.PutInt("start", int64(pt.Start))
				a.PutDouble("value", pt.Value)
				a.PutBool("monotonic", shape.Monotonic())
				tr.HoldRestart(id, d.Writer, md, 10+int(ops[i+3]%50))
			}
			// A held restart's points go out before the request's own, as
			// the stream's: in the same order as passed points. Elections by
			// the caller's clock are not recorded (Undo keeps them), so the
			// recorded stretch hands out only those elected by a point.
			now := int64(clock)
			if before != nil {
				now = 0
			}
			tr.TakeRestarts(now, false, func(md pmetric.Metrics, _ int, _ bool) {
				a := md.ResourceMetrics().At(0).Resource().Attributes()
				v, _ := a.Get("id")
				rid := ID{byte(v.Int())}
				v, _ = a.Get("time")
				tm := uint64(v.Int())
				v, _ = a.Get("start")
				st := uint64(v.Int())
				m, _ := a.Get("monotonic")
				v, _ = a.Get("value")
				prev, seen := last[rid]
				if seen && tm <= prev.time {
					t.Fatalf("op %d: sent a held restart's time %d after %d", i/4, tm, prev.time)
				}
				if seen && m.Bool() && st != 0 && st == prev.start && v.Double() < prev.value {
					t.Fatalf("op %d: sent a held restart's %g after %g with the same start", i/4, v.Double(), prev.value)
				}
				last[rid] = out{tm, st, v.Double()}
			})
			tr.TakeReleased(func(rid ID, w uint64, _ pmetric.Metrics, _ int) {
				k, ok := tr.judge.byKey[pairKey{rid, w}]
				if !ok || tr.judge.classOf(k) != ClassPeer {
					t.Fatalf("op %d: released a held point of writer %d of stream %d, not a peer", i/4, w, rid[0])
				}
			})
			if err := tr.judge.checkHeld(); err != nil {
				t.Fatalf("op %d: %v", i/4, err)
			}
			if d.Verdict == Label && !p.Split && !p.Auto {
				t.Fatalf("op %d: Label without Split or Auto", i/4)
			}
			if p.Auto && d.Verdict == Label {
				labelled[writerOf{id, d.Writer, d.Sharer}] = true
			}
			if p.Auto && d.Verdict == Pass && labelled[writerOf{id, d.Writer, d.Sharer}] && d.Reason != ReasonUnjudged {
				t.Fatalf("op %d: writer %d of stream %d labelled, then passed unlabelled", i/4, d.Writer, id[0])
			}
			if d.Verdict != Pass || d.Reason == ReasonUnjudged {
				continue
			}
			if _, _, tracked := tr.index.find(&id, tr); !tracked {
				continue
			}
			prev, seen := last[id]
			if seen && pt.Time <= prev.time {
				t.Fatalf("op %d: passed time %d after %d", i/4, pt.Time, prev.time)
			}
			if seen && shape.Cumulative() && shape.Monotonic() && pt.Start != 0 && pt.Start == prev.start && pt.Value < prev.value {
				t.Fatalf("op %d: passed %g after %g with the same start", i/4, pt.Value, prev.value)
			}
			last[id] = out{pt.Time, pt.Start, pt.Value}
		}
		tr.Record(nil)
		if p.Auto {
			again, _ := NewTracker(p)
			if _, err := again.Restore(tr.AppendSnapshot(nil)); err != nil {
				t.Fatalf("restore: %v", err)
			}
		}
		if before != nil {
			tr.Undo(&j)
			if after := tr.snapshot(); !maps.EqualFunc(before, after, sameStream) {
				t.Fatalf("undo left %d streams, want %d: %v != %v", len(after), len(before), slices.Collect(maps.Keys(after)), slices.Collect(maps.Keys(before)))
			}
		}
	})
}

// sameStream compares two streams bit for bit (NaN sums included).
func sameStream(a, b stream) bool {
	w := func(x, y writer) bool {
		return x.start == y.start && x.time == y.time && x.fp == y.fp && x.interval == y.interval &&
			math.Float64bits(x.value) == math.Float64bits(y.value) && math.Float64bits(x.sum) == math.Float64bits(y.sum)
	}
	return a.id == b.id && a.seen == b.seen && a.shape == b.shape && a.flags == b.flags && w(a.cur, b.cur) && w(a.alt, b.alt)
}

// snapshot copies every live stream, without the version that guards Undo.
func (t *Tracker) snapshot() map[ID]stream {
	m := map[ID]stream{}
	for i := uint32(0); i < t.used; i++ {
		s := *t.at(i)
		if s.flags&flagLive == 0 {
			continue
		}
		if j, _, ok := t.index.find(&s.id, t); !ok || j != i {
			panic("a live stream is not indexed")
		}
		s.version = 0
		m[s.id] = s
	}
	if len(m) != t.index.n {
		panic("the index counts streams that are not live")
	}
	return m
}

// FuzzHasher builds point attributes from the input and checks that the ID
// does not depend on their order and does depend on their content.
func FuzzHasher(f *testing.F) {
	f.Add([]byte("method\x00GET\x00code\x00200"))
	f.Add([]byte("a\x00\x00b\x00x\x00c\x00y\x00d"))
	f.Add([]byte("\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var keys, vals []string
		seen := map[string]bool{}
		parts := splitZero(data)
		for i := 0; i+1 < len(parts); i += 2 {
			if seen[parts[i]] {
				continue
			}
			seen[parts[i]] = true
			keys, vals = append(keys, parts[i]), append(vals, parts[i+1])
		}
		build := func(reverse bool, extra string) ID {
			m := pcommon.NewMap()
			for k := range keys {
				i := k
				if reverse {
					i = len(keys) - 1 - k
				}
				m.PutStr(keys[i], vals[i])
			}
			if extra != "" {
				m.PutStr(extra, "")
			}
			h := NewHasher(1)
			h.Resource(pcommon.NewResource())
			h.Scope(pcommon.NewInstrumentationScope())
			return h.Point(m)
		}
		if build(false, "") != build(true, "") {
			t.Fatalf("order of %q changed the ID", keys)
		}
		extra := "\xffextra"
		if !seen[extra] && build(false, extra) == build(false, "") {
			t.Fatalf("an added attribute did not change the ID of %q", keys)
		}
	})
}

func splitZero(b []byte) []string {
	var out []string
	start := 0
	for i, c := range b {
		if c == 0 {
			out = append(out, string(b[start:i]))
			start = i + 1
		}
	}
	return append(out, string(b[start:]))
}
