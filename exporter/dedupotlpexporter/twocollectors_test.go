package dedupotlpexporter_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/yamlprovider"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/collector/otelcol"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/service/telemetry/otelconftelemetry"

	"github.com/doubletake/doubletake/exporter/dedupotlphttpexporter"
	"github.com/doubletake/doubletake/processor/dedupprocessor"
)

// TestTwoCollectorsTakeBackTheirOwn: two collectors run in one process,
// each with a dedup processor `dedup` and a dedup_otlp_http exporter under
// the same component IDs, made from the factories a builder manifest uses
// (NewFactory, called once per collector). A's upstream refuses span X
// for good, B's takes it: A's exporter takes X back from A's processor, so
// that a re-send of X to A passes, while B's processor still holds X and
// drops its re-send. Through a process-wide link the take back found two
// processors under `dedup` and failed, and X never passed A again.
func TestTwoCollectorsTakeBackTheirOwn(t *testing.T) {
	upA, upB := newUpstream(t, http.StatusBadRequest), newUpstream(t, http.StatusOK)
	a := startCollector(t, upA.URL)
	b := startCollector(t, upB.URL)

	x := spanNamed("x", 1)
	send(t, a, x)
	send(t, b, x)
	waitFor(t, "A's upstream to refuse X", func() bool { return upA.refused.Load() > 0 })
	waitFor(t, "B's upstream to receive X", func() bool { return upB.count("x") == 1 })

	// A took X back from its own processor: once the take back is done,
	// a re-send passes (until then each is dropped as a duplicate).
	upA.status.Store(http.StatusOK)
	waitFor(t, "a re-send of X to pass A's dedup", func() bool {
		send(t, a, x)
		return upA.count("x") > 0
	})

	// B's processor took nothing back: it drops X, and passes Y sent with it.
	send(t, b, spanNamed("x", 1), spanNamed("y", 2))
	waitFor(t, "B's upstream to receive Y", func() bool { return upB.count("y") == 1 })
	if n := upB.count("x"); n != 1 {
		t.Fatalf("B's upstream received X %d times: B's dedup let its re-send pass, want it dropped (A's take back reached B)", n)
	}
}

// upstream is an OTLP/HTTP traces endpoint answering status (400: a
// permanent refusal) and counting the spans it accepted by name.
type upstream struct {
	*httptest.Server
	status  atomic.Int64
	refused atomic.Int64
	mu      sync.Mutex
	spans   map[string]int
}

func newUpstream(t *testing.T, status int) *upstream {
	u := &upstream{spans: map[string]int{}}
	u.status.Store(int64(status))
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		status := int(u.status.Load())
		if status != http.StatusOK {
			u.refused.Add(1)
			w.WriteHeader(status)
			return
		}
		req := ptraceotlp.NewExportRequest()
		if err := req.UnmarshalProto(body); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		u.mu.Lock()
		for _, rs := range req.Traces().ResourceSpans().All() {
			for _, ss := range rs.ScopeSpans().All() {
				for _, s := range ss.Spans().All() {
					u.spans[s.Name()]++
				}
			}
		}
		u.mu.Unlock()
		resp, _ := ptraceotlp.NewExportResponse().MarshalProto()
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(resp)
	}))
	t.Cleanup(u.Close) // after the collectors', which were started later
	return u
}

func (u *upstream) count(name string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.spans[name]
}

// startCollector runs a collector receiving OTLP/HTTP traces and sending
// them through dedup to upstream; it returns the receiver's traces URL.
func startCollector(t *testing.T, upstream string) string {
	t.Helper()
	addr := freeAddr(t)
	cfg := fmt.Sprintf(`yaml:
receivers:
  otlp:
    protocols:
      http:
        endpoint: %s
processors:
  dedup: {}
exporters:
  dedup_otlp_http:
    endpoint: %s
    compression: none
    retry_on_failure:
      enabled: false
    sending_queue:
      enabled: true
      num_consumers: 1
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    traces:
      receivers: [otlp]
      processors: [dedup]
      exporters: [dedup_otlp_http]
`, addr, upstream)
	col, err := otelcol.NewCollector(otelcol.CollectorSettings{
		BuildInfo: component.NewDefaultBuildInfo(),
		Factories: builderFactories,
		ConfigProviderSettings: otelcol.ConfigProviderSettings{ResolverSettings: confmap.ResolverSettings{
			URIs:              []string{cfg},
			ProviderFactories: []confmap.ProviderFactory{yamlprovider.NewFactory()},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- col.Run(context.Background()) }()
	t.Cleanup(func() {
		col.Shutdown()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	waitFor(t, "the collector to run", func() bool {
		select {
		case err := <-done:
			t.Fatalf("the collector stopped: %v", err)
		default:
		}
		return col.GetState() == otelcol.StateRunning
	})
	return "http://" + addr + "/v1/traces"
}

// builderFactories is what a builder manifest's components() returns:
// each component's factory made on its own, anew for each collector.
func builderFactories() (otelcol.Factories, error) {
	var err error
	f := otelcol.Factories{Telemetry: otelconftelemetry.NewFactory()}
	if f.Receivers, err = otelcol.MakeFactoryMap[receiver.Factory](otlpreceiver.NewFactory()); err != nil {
		return f, err
	}
	if f.Processors, err = otelcol.MakeFactoryMap[processor.Factory](dedupprocessor.NewFactory()); err != nil {
		return f, err
	}
	if f.Exporters, err = otelcol.MakeFactoryMap[exporter.Factory](dedupotlphttpexporter.NewFactory()); err != nil {
		return f, err
	}
	f.Connectors, _ = otelcol.MakeFactoryMap[connector.Factory]()
	f.Extensions, _ = otelcol.MakeFactoryMap[extension.Factory]()
	return f, nil
}

// client sends to the collectors; its connections close with the test.
var client = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

func spanNamed(name string, id byte) ptrace.Span {
	s := ptrace.NewSpan()
	s.SetName(name)
	s.SetTraceID([16]byte{id})
	s.SetSpanID([8]byte{id})
	return s
}

// send posts spans to a collector's receiver and requires it to accept.
func send(t *testing.T, url string, spans ...ptrace.Span) {
	t.Helper()
	td := ptrace.NewTraces()
	ss := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty()
	for _, s := range spans {
		s.CopyTo(ss.Spans().AppendEmpty())
	}
	body, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Post(url, "application/x-protobuf", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the collector answered %s", resp.Status)
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// waitFor polls cond until it holds, for at most a minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
