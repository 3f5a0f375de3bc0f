package e2e

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// changeoverConfig runs two dedup pipelines into one Prometheus, with and
// without the data model's overlap interpolation, told apart by a label.
func changeoverConfig(health, grpcAddr, writeURL string) string {
	return fmt.Sprintf(`
extensions:
  health_check:
    endpoint: %s
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: %s
processors:
  dedup/interpolate: {}
  dedup/as_written:
    metrics:
      interpolate_changeover: false
exporters:
  prometheusremotewrite/interpolate:
    endpoint: %[3]s
    external_labels: {pipeline: interpolate}
    tls: {insecure: true}
    remote_write_queue: {num_consumers: 1}
  prometheusremotewrite/as_written:
    endpoint: %[3]s
    external_labels: {pipeline: as_written}
    tls: {insecure: true}
    remote_write_queue: {num_consumers: 1}
service:
  extensions: [health_check]
  telemetry:
    metrics:
      level: none
  pipelines:
    metrics/interpolate:
      receivers: [otlp]
      processors: [dedup/interpolate]
      exporters: [prometheusremotewrite/interpolate]
    metrics/as_written:
      receivers: [otlp]
      processors: [dedup/as_written]
      exporters: [prometheusremotewrite/as_written]
`, health, grpcAddr, writeURL)
}

// TestChangeOverCountsOnce: one process (A) hands over to its replacement
// (B) on one stream identity, B having started before A stopped, both
// counting the same steady 10 events a second; Prometheus stores what the
// gateway forwards. A counts for 20 s and stops; B started at 5 s and counts
// to 40 s. 400 events happened. Passing B as written after the failover
// counts B's first 15 s (which A counted too) twice: 550. With the
// change-over interpolated, Prometheus counts 400, with one reset (A to B).
func TestChangeOverCountsOnce(t *testing.T) {
	prom := startPrometheus(t)
	grpcAddr, health := freePort(t), freePort(t)
	g := startGatewayConfig(t, health, changeoverConfig(health, grpcAddr, prom.writeURL()))
	ctx := ctxTimeout(t, 2*time.Minute)
	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := pmetricotlp.NewGRPCClient(conn)

	const sec = int64(time.Second)
	base := (time.Now().UnixNano()/sec - 60) * sec // a minute ago: within Prometheus' head
	at := func(s int64) pcommon.Timestamp { return pcommon.Timestamp(base + s*sec) }
	send := func(start, now int64, v int64) {
		md := counterPoint("handover", "events", at(start), at(now), v)
		if _, err := client.Export(ctx, pmetricotlp.NewExportRequestFromMetrics(md)); err != nil {
			t.Fatal(err)
		}
	}
	const rate, aStops, bStarts, end = 10, 20, 5, 40
	for s := int64(1); s <= end; s++ {
		if s <= aStops {
			send(0, s, rate*s) // A, started at 0
		}
		if s > bStarts {
			send(bStarts, s, rate*(s-bStarts)) // B, started at 5
		}
	}
	const truth = rate * end
	// A's 20 points, then B's from its failover (3 s after A's last point).
	const samples = aStops + end - (aStops + 3) + 1
	series := func(pipeline string) []float64 {
		var vals []float64
		q := fmt.Sprintf(`events_total{pipeline=%q}[1h]`, pipeline)
		v, _, _, err := prom.api.Query(ctx, q, time.Now())
		if err != nil {
			t.Fatalf("query %s: %v", q, err)
		}
		if mat, ok := v.(model.Matrix); ok && len(mat) == 1 {
			for _, p := range mat[0].Values {
				vals = append(vals, float64(p.Value))
			}
		}
		return vals
	}
	waitFor(t, 60*time.Second, "every forwarded sample in Prometheus", func() bool {
		return len(series("interpolate")) >= samples && len(series("as_written")) >= samples
	})
	g.stop(t)
	// What increase() counts, without its extrapolation: every rise, and
	// after a fall (a reset) the new value.
	counted := func(vals []float64) (total float64, resets int) {
		prev := 0.0
		for _, v := range vals {
			if v < prev {
				resets++
				total += v
			} else {
				total += v - prev
			}
			prev = v
		}
		return total, resets
	}
	interp, interpResets := counted(series("interpolate"))
	written, writtenResets := counted(series("as_written"))
	t.Logf("events counted: %v interpolated (%d resets), %v as written (%d resets); %d happened", interp, interpResets, written, writtenResets, truth)
	if math.Abs(interp-truth) > 0.5 || interpResets != 1 {
		t.Errorf("interpolated change-over: %v events counted with %d resets, want %d with 1", interp, interpResets, truth)
	}
	if want := float64(truth + rate*(aStops-bStarts)); written != want {
		t.Errorf("as written: %v events counted, want %v (the overlap twice): the test shows nothing", written, want)
	}
}
