package loadgen

import (
	"crypto/rand"
	"encoding/binary"
	"flag"
	"time"
)

// RegisterFlags registers the generator's flags on fs into c. With
// perScenario, the rate is the fixed load of a scenario and the duplicate
// share is not a flag (the A/B driver sets both per scenario).
func RegisterFlags(fs *flag.FlagSet, c *Config, perScenario bool) {
	c.Protocol, c.DupMode = "grpc", DupBatch
	fs.StringVar(&c.Protocol, "protocol", c.Protocol, "OTLP protocol: grpc or http (protobuf)")
	if perScenario {
		fs.Float64Var(&c.Rate, "rate", 0, "spans/s of the fixed load; 0: half the median saturation throughput")
	} else {
		fs.Float64Var(&c.Rate, "rate", 0, "spans/s over all span senders; 0 saturates")
		fs.Float64Var(&c.Dup, "dup", 0, "share of spans sent that are copies of spans already sent, in [0, 1)")
	}
	fs.IntVar(&c.Batch, "batch", 1000, "spans per request")
	fs.Func("dup-mode", "how copies are sent: batch (whole requests re-sent, as a retrying or second identical exporter) or mixed (copies of the previous request's spans mixed into requests of new ones, as a second span processor)", func(s string) error {
		c.DupMode = DupMode(s)
		return nil
	})
	fs.IntVar(&c.Concurrency, "concurrency", 16, "span senders, each with its own connection and one request in flight")
	fs.IntVar(&c.MetricStreams, "metric-streams", 0, "metric streams (cumulative sums); 0 sends no metrics")
	fs.IntVar(&c.Writers, "writers", 1, "writers per metric stream, each with its own start time")
	fs.DurationVar(&c.MetricInterval, "metric-interval", time.Second, "each writer exports all its streams every interval; 0 saturates")
	fs.IntVar(&c.MetricBatch, "metric-batch", 1000, "points per metric request")
}

// NewNonce returns a random run id, never zero (a zero trace id would be
// invalid).
func NewNonce() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return binary.BigEndian.Uint64(b[:]) | 1
}

// DrainQuiet is how long WaitDrain waits with nothing arriving before it
// gives up: past a few of an exporter's retries (the embedded default's
// queue retries after 1 s, ±50%, growing 1.5 times: three retries within
// about 7 s), so that a batch the sink refused once and the gateway sends
// again is not counted as lost. A run that gets all it wants does not
// wait for it.
const DrainQuiet = 10 * time.Second

// WaitDrain waits until sk has received want spans, or nothing more
// arrives for quiet, or limit passes.
func WaitDrain(sk *Sink, want uint64, quiet, limit time.Duration) Counts {
	deadline := time.Now().Add(limit)
	last, quietSince := sk.Counts(), time.Now()
	for time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		k := sk.Counts()
		if k.Spans >= want && want > 0 {
			return k
		}
		if k != last {
			last, quietSince = k, time.Now()
		} else if time.Since(quietSince) > quiet {
			return k
		}
	}
	return sk.Counts()
}
