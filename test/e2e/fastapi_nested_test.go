package e2e

import (
	"encoding/json"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Issue 36, case 6: FastAPI's own instrumentation beside contrib's
// (opentelemetry-instrumentation-fastapi / -asgi), FastAPI 0.143.5 by
// default (one exporter), under verify.

// nestedReport is the part of verify's JSON report this test reads.
type nestedReport struct {
	Spans struct {
		Received int `json:"received"`
		Unique   int `json:"unique"`
		Groups   []struct {
			Name string `json:"name"`
		} `json:"groups"`
	} `json:"spans"`
	Nested struct {
		Pairs    int               `json:"pairs"`
		Findings []json.RawMessage `json:"findings"`
	} `json:"nested_duplicates"`
	Verdict string `json:"verdict"`
}

// TestFastAPIDoubleInstrumentation: with FastAPIInstrumentor on the app,
// FastAPI sees contrib's middleware and records nothing of its own: one
// server span per request, nothing nested, verify clean. With the app
// wrapped from outside in contrib's ASGI middleware, both record; FastAPI
// takes its parent from the request headers, not the active span, so its
// server span starts a trace of its own: the two are not nested and the
// nested finder, which pairs a span with its parent, has nothing to
// report. Both are asserted as they are today.
func TestFastAPIDoubleInstrumentation(t *testing.T) {
	venv := pyVenv(t, "fastapi-0.143")
	for _, c := range []struct {
		name, app, instrument string
		fastapiSpans          bool // FastAPI's own spans arrive
	}{
		{"instrumentor", "seed_app:app", "contrib", false},
		{"wrapped", "seed_app:asgi_app", "", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			addr := freePort(t)
			_, port, _ := net.SplitHostPort(addr)
			const requests = 3
			done := make(chan verifyRun, 1)
			go func() {
				done <- runVerify(t, t.TempDir(), pyEnv(venv, "SEED_SERVICE=nested-"+c.name, "SEED_INSTRUMENT="+c.instrument),
					"--format", "json", "--grace", "1s", "--",
					"uvicorn", c.app, "--app-dir", pyDir(), "--host", "127.0.0.1", "--port", port,
					"--no-access-log", "--limit-max-requests", strconv.Itoa(requests+1))
			}()
			s := &pyServer{name: "uvicorn", addr: addr}
			var r verifyRun
			waitFor(t, 90*time.Second, "uvicorn under verify to serve", func() bool {
				select {
				case r = <-done:
					t.Fatalf("verify ended before uvicorn served:\n%s", r)
				default:
				}
				code, _, err := s.get("/openapi.json")
				return err == nil && code == 200
			})
			for i := 1; i <= requests; i++ {
				if code, body, err := s.get("/items/" + strconv.Itoa(i)); err != nil || code != 200 {
					t.Fatalf("GET /items/%d: %d %s %v", i, code, body, err)
				}
			}
			r = <-done
			var v nestedReport
			if err := json.Unmarshal([]byte(r.report), &v); err != nil {
				t.Fatalf("JSON report: %v\n%s", err, r)
			}
			names := map[string]bool{}
			for _, g := range v.Spans.Groups {
				names[g.Name] = true
			}
			t.Logf("exit %d, %s: %d spans (%d distinct), nested pairs %d; span names %v", r.code, v.Verdict, v.Spans.Received, v.Spans.Unique, v.Nested.Pairs, names)
			if r.code != 0 || v.Verdict != "clean" || v.Nested.Pairs != 0 || len(v.Nested.Findings) != 0 {
				t.Errorf("want exit 0, clean, no nested pair:\n%s", r)
			}
			// FastAPI's own request spans have children named fastapi.*;
			// contrib's server spans have "http send" children.
			contrib := false
			for n := range names {
				contrib = contrib || strings.HasSuffix(n, " http send")
			}
			if names["fastapi.endpoint"] != c.fastapiSpans || !contrib {
				t.Errorf("span names %v: want FastAPI's own spans %v, and contrib's", names, c.fastapiSpans)
			}
		})
	}
}
