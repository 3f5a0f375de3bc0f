package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
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
		Pairs    int `json:"pairs"`
		Findings []struct {
			Service    string `json:"service"`
			Kind       string `json:"kind"`
			Name       string `json:"name"`
			OuterScope struct {
				Name string `json:"name"`
			} `json:"outer_scope"`
			InnerScope struct {
				Name string `json:"name"`
			} `json:"inner_scope"`
			MatchedBy   string `json:"matched_by"`
			Occurrences int    `json:"occurrences"`
			Diagnosis   string `json:"diagnosis"`
		} `json:"findings"`
	} `json:"nested_duplicates"`
	Verdict string `json:"verdict"`
}

// TestFastAPIDoubleInstrumentation: with FastAPIInstrumentor on the app,
// FastAPI sees contrib's middleware and records nothing of its own: one
// server span per request, nothing nested, verify clean. With the app
// wrapped from outside in contrib's ASGI middleware, both record a server
// span per request; FastAPI takes its parent from the request headers,
// not from the active span:
//
//   - when the client propagates its trace context (a traceparent header,
//     as every instrumented client sends), both extract it: two SERVER
//     siblings under the client's span, contrib's named "GET /items/N"
//     (method and path, no route), FastAPI's "GET /items/{item_id}" with
//     its route; the nested finder pairs them by the path (ByPath), verify
//     exits 1 naming fastapi inside opentelemetry.instrumentation.asgi;
//   - without one, each starts a trace of its own: the two share no trace,
//     no parent and no attribute of the connection (FastAPI records no
//     client port), only the service, the path and the time, which
//     concurrent requests to one path share too. Nothing pairs them:
//     verify exits 0 (docs/fastapi-0.142.md says so).
func TestFastAPIDoubleInstrumentation(t *testing.T) {
	venv := pyVenv(t, "fastapi-0.143")
	for _, c := range []struct {
		name, app, instrument string
		fastapiSpans          bool // FastAPI's own spans arrive
		propagate             bool // the requests carry a traceparent
		found                 bool // the nested finder reports FastAPI inside contrib
	}{
		{"instrumentor", "seed_app:app", "contrib", false, true, false},
		{"wrapped", "seed_app:asgi_app", "", true, false, false},
		{"wrapped-propagated", "seed_app:asgi_app", "", true, true, true},
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
				header := http.Header{}
				if c.propagate {
					// A client's span: a trace of its own per request.
					header.Set("traceparent", fmt.Sprintf("00-%032x-%016x-01", 0xc11e47000+i, 0x5e4d0+i))
				}
				if code, err := getWith(s, "/items/"+strconv.Itoa(i), header); err != nil || code != 200 {
					t.Fatalf("GET /items/%d: %d %v", i, code, err)
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
			for _, f := range v.Nested.Findings {
				t.Logf("finding: %s inside %s, %s %q, matched by %s, %d pairs: %s", f.InnerScope.Name, f.OuterScope.Name, f.Kind, f.Name, f.MatchedBy, f.Occurrences, f.Diagnosis)
			}
			if !c.found {
				if r.code != 0 || v.Verdict != "clean" || v.Nested.Pairs != 0 || len(v.Nested.Findings) != 0 {
					t.Errorf("want exit 0, clean, no nested pair:\n%s", r)
				}
			} else {
				// A request pairs when FastAPI's span covers at least
				// min_coverage (90%) of contrib's: contrib's own work
				// around the app is a fraction of a millisecond, so a
				// request that takes a few milliseconds may miss it on a
				// loaded machine; at least one pairs.
				if r.code != 1 || len(v.Nested.Findings) != 1 || v.Nested.Pairs < 1 {
					t.Fatalf("want exit 1 and one finding:\n%s", r)
				}
				f := v.Nested.Findings[0]
				if f.Kind != "SERVER" || f.Name != "GET /items/{item_id}" || f.MatchedBy != "path" || f.OuterScope.Name != "opentelemetry.instrumentation.asgi" ||
					f.InnerScope.Name != "fastapi" || !strings.Contains(f.Diagnosis, "two instrumentations are active") {
					t.Errorf("finding %+v: want FastAPI's server span inside contrib's, matched by path, two instrumentations", f)
				}
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

// getWith requests path from s with header and returns the status code.
func getWith(s *pyServer, path string, header http.Header) (int, error) {
	req, err := http.NewRequest(http.MethodGet, "http://"+s.addr+path, nil)
	if err != nil {
		return 0, err
	}
	req.Header = header
	c := http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}
