package dedupprocessor

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"
)

// holdingConsumer holds the requests it is given while hold is set, until
// the benchmark sends on release; it accepts the others at once.
type holdingConsumer struct {
	hold    bool
	entered chan struct{}
	release chan struct{}
}

func (h *holdingConsumer) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }

func (h *holdingConsumer) ConsumeTraces(context.Context, ptrace.Traces) error {
	if h.hold {
		h.entered <- struct{}{}
		<-h.release
	}
	return nil
}

// BenchmarkCopyAnswer is the answer time of a copy of a 1000-span request
// (every span a copy), per copy, as p50 and p99 over the iterations:
//   - settled: the original was accepted before the copy came; the copy
//     is dropped and answered at once (its whole answer time);
//   - in_flight: the original is in the next consumer when the copy
//     comes, and the copy waits for it (copies.go); timed from the moment
//     the next consumer answers the original to the copy's answer: what
//     waiting adds beyond the original's own delivery (waking the copy,
//     judging it again, dropping it).
func BenchmarkCopyAnswer(b *testing.B) {
	for _, inFlight := range []bool{false, true} {
		name := "settled"
		if inFlight {
			name = "in_flight"
		}
		b.Run(name, func(b *testing.B) {
			next := &holdingConsumer{entered: make(chan struct{}, 1), release: make(chan struct{})}
			p, err := NewFactory().CreateTraces(context.Background(), processortest.NewNopSettings(Type), createDefaultConfig(), next)
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = p.Shutdown(context.Background()) }()
			fl := &p.(*tracesProcessor).st.traces.flights
			r := rand.New(rand.NewPCG(1, 2))
			tmpl := benchTraces()
			orig, cp := ptrace.NewTraces(), ptrace.NewTraces()
			took := make([]time.Duration, 0, b.N)
			ctx := context.Background()
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				tmpl.CopyTo(orig)
				setIDs(orig, r, nil, 0)
				orig.CopyTo(cp)
				if !inFlight {
					next.hold = false
					if err := p.ConsumeTraces(ctx, orig); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
					t0 := time.Now()
					if err := p.ConsumeTraces(ctx, cp); err != nil {
						b.Fatal(err)
					}
					took = append(took, time.Since(t0))
					continue
				}
				next.hold = true
				origDone := make(chan error, 1)
				go func() { origDone <- p.ConsumeTraces(ctx, orig) }()
				<-next.entered
				next.hold = false // the copy's request, if any of it goes on, is not held
				cpDone := make(chan error, 1)
				go func() { cpDone <- p.ConsumeTraces(ctx, cp) }()
				waitParked(b, fl)
				b.StartTimer()
				t0 := time.Now()
				next.release <- struct{}{}
				if err := <-cpDone; err != nil {
					b.Fatal(err)
				}
				took = append(took, time.Since(t0))
				if err := <-origDone; err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(took[len(took)*99/100].Microseconds()), "p99-µs")
		})
	}
}

// waitParked waits until a request waits for an unsettled one.
func waitParked(b *testing.B, fl *flights) {
	deadline := time.Now().Add(bound)
	for {
		fl.mu.Lock()
		n := 0
		for _, f := range fl.list {
			n += f.waiters
		}
		fl.mu.Unlock()
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			b.Fatal("the copy did not wait for its original")
		}
		time.Sleep(10 * time.Microsecond)
	}
}
