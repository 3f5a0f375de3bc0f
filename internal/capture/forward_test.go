package capture

import (
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

func TestParseTarget(t *testing.T) {
	for _, tc := range []struct {
		raw, proto string
		want       Target
		err        string
	}{
		{"http://127.0.0.1:4317", "grpc", Target{Protocol: "grpc", Host: "127.0.0.1:4317"}, ""},
		{"https://otlp.example:443", "grpc", Target{Protocol: "grpc", Secure: true, Host: "otlp.example:443"}, ""},
		{"http://h:4318/", "http", Target{Protocol: "http", Host: "h:4318"}, ""},
		{"https://h:443/otlp/", "http", Target{Protocol: "http", Secure: true, Host: "h:443", Path: "/otlp"}, ""},
		{"http://[::1]:4317", "grpc", Target{Protocol: "grpc", Host: "[::1]:4317"}, ""},
		{"h:4317", "grpc", Target{}, "want an http:// or https:// URL"},
		{"http://h", "grpc", Target{}, "want a host and a port"},
		{"http://:4317", "grpc", Target{}, "want a host and a port"},
		{"http://h:1/v1", "grpc", Target{}, "a gRPC endpoint takes no path"},
		{"http://u:p@h:1", "http", Target{}, "credentials in the URL are refused"},
		{"http://h:1?x=1", "http", Target{}, "without user, query or fragment"},
		{"http://h:1", "udp", Target{}, `protocol "udp"`},
		{"http://h\x7f:1", "http", Target{}, "is not a URL"},
	} {
		got, err := ParseTarget(tc.raw, tc.proto)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseTarget(%q, %q) error %v, want %q", tc.raw, tc.proto, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseTarget(%q, %q) = %+v, %v; want %+v", tc.raw, tc.proto, got, err, tc.want)
		}
	}
}

func FuzzParseTarget(f *testing.F) {
	for _, s := range []string{"http://127.0.0.1:4317", "https://h:443/otlp/", "http://[::1]:1", "h:1", "http://u@h:1", "://", ""} {
		f.Add(s, true)
		f.Add(s, false)
	}
	f.Fuzz(func(t *testing.T, raw string, grpc bool) {
		proto := "http"
		if grpc {
			proto = "grpc"
		}
		tg, err := ParseTarget(raw, proto)
		if err != nil {
			return
		}
		// What parses is usable: a host with a port, a clean path.
		if tg.Host == "" || strings.HasSuffix(tg.Path, "/") || (grpc && tg.Path != "") || tg.Protocol != proto {
			t.Fatalf("ParseTarget(%q, %q) = %+v", raw, proto, tg)
		}
	})
}

// TestForwarderDelivers forwards one request of each signal over both
// protocols to a second receiver.
func TestForwarderDelivers(t *testing.T) {
	for _, proto := range []string{"grpc", "http"} {
		t.Run(proto, func(t *testing.T) {
			rec := &recorder{}
			down := start(t, rec.handle)
			tg, err := ParseTarget(down.Endpoint(), proto)
			if err != nil {
				t.Fatal(err)
			}
			f, err := NewForwarder(tg)
			if err != nil {
				t.Fatal(err)
			}
			td := ptrace.NewTraces()
			td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty().SetName("s")
			md := pmetric.NewMetrics()
			md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty().SetEmptyGauge().DataPoints().AppendEmpty().SetIntValue(1)
			ld := plog.NewLogs()
			ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords().AppendEmpty().Body().SetStr("l")
			f.Enqueue(&Request{Signal: Traces, Traces: td})
			f.Enqueue(&Request{Signal: Metrics, Metrics: md})
			f.Enqueue(&Request{Signal: Logs, Logs: ld})
			st := f.Close(5 * time.Second)
			if st != (ForwardStats{Received: 3, Sent: 3}) {
				t.Fatalf("stats = %+v", st)
			}
			f.Enqueue(&Request{Signal: Traces, Traces: td}) // after Close: dropped, no panic
			rec.mu.Lock()
			defer rec.mu.Unlock()
			if len(rec.reqs) != 3 || rec.reqs[0].Signal != Traces || rec.reqs[1].Signal != Metrics || rec.reqs[2].Signal != Logs {
				t.Fatalf("downstream got %d requests", len(rec.reqs))
			}
		})
	}
}

func TestForwarderCountsFailures(t *testing.T) {
	ln := start(t, nil)
	addr := ln.Endpoint()
	_ = ln.Close() // nothing listens there any more
	tg, _ := ParseTarget(addr, "http")
	f, err := NewForwarder(tg)
	if err != nil {
		t.Fatal(err)
	}
	f.Enqueue(&Request{Signal: Traces, Traces: ptrace.NewTraces()})
	st := f.Close(5 * time.Second)
	if st.Received != 1 || st.Failed != 1 || st.Sent != 0 || st.LastError == "" {
		t.Fatalf("stats = %+v", st)
	}
}
