package guard_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	collogs "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	colmetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/doubletake/doubletake/internal/guard"
	"github.com/doubletake/doubletake/internal/guard/guardtest"
)

// FuzzCheckProto holds the guard to two references. pdata's decoder says
// what is valid OTLP; protobuf-go's decoder, given the guard's limit as its
// RecursionLimit, says how deep it nests as a decoder recurses (counting
// every message it descends into, overwritten oneofs included). Whenever
// both decode the input, the guard passes it; whenever pdata decodes it and
// protobuf-go stops at its recursion limit, the guard refuses it. The guard
// never panics, and gives the same answer however the input is split.
func FuzzCheckProto(f *testing.F) {
	for _, b := range [][]byte{
		guardtest.DeepTraces(0), guardtest.DeepTraces(2), guardtest.DeepTraces(20),
		realTraces(f), mustProto(pmetricotlp.NewExportRequestFromMetrics(metricsWithExemplar()).MarshalProto()),
		mustProto(plogotlp.NewExportRequestFromLogs(logsWithMapBody()).MarshalProto()),
	} {
		for sig := range uint8(3) {
			f.Add(b, sig, uint8(12), uint16(len(b)/2))
		}
	}
	f.Fuzz(func(t *testing.T, b []byte, sig, limit uint8, split uint16) {
		maxDepth := 8 + int(limit%32)
		root, decode, pg := signal(sig)
		err := guard.CheckProto(b, root, maxDepth)
		if err != nil && !errors.Is(err, guard.ErrTooDeep) {
			t.Fatalf("a refusal that is not ErrTooDeep: %v", err)
		}
		if got := streamed(b, int(split), int64(len(b)), "application/x-protobuf", maxDepth, sigPath(sig)); got != (err != nil) {
			t.Fatalf("split at %d, length known: refused %v, whole: %v", split, got, err)
		}
		_ = guard.CheckProto(b, guard.Unknown, maxDepth)
		_ = guard.ProtoDepth(b, root)

		pdataErr := decode(b)
		// Of unknown length (decompressed), the stream is walked at least
		// as strictly, and more only when pdata refuses it anyway.
		if got := streamed(b, int(split), -1, "application/x-protobuf", maxDepth, sigPath(sig)); got != (err != nil) && (!got || pdataErr == nil) {
			t.Fatalf("split at %d, length unknown: refused %v, whole: %v (pdata: %v)", split, got, err, pdataErr)
		}
		if pdataErr != nil {
			return
		}
		pgErr := proto.UnmarshalOptions{RecursionLimit: maxDepth}.Unmarshal(b, pg)
		switch {
		case pgErr == nil && err != nil:
			t.Fatalf("pdata and protobuf-go decode it within %d levels, the guard refuses: %v", maxDepth, err)
		case pgErr != nil && strings.Contains(pgErr.Error(), "recursion depth") && err == nil:
			t.Fatalf("it nests deeper than %d (protobuf-go: %v), the guard passes it", maxDepth, pgErr)
		}
	})
}

// FuzzCheckJSON holds the JSON walk to encoding/json: for valid JSON, the
// guard refuses exactly when objects and arrays nest deeper than the limit.
func FuzzCheckJSON(f *testing.F) {
	for _, s := range []string{
		string(guardtest.DeepTracesJSON(3)), `{"a":"[[\"{","b":[{}]}`, `[[[]]]`, `"\\"`, `{"a":"\\\""}`,
	} {
		f.Add([]byte(s), uint8(4), uint16(len(s)/2))
	}
	f.Fuzz(func(t *testing.T, b []byte, limit uint8, split uint16) {
		maxContainers := 1 + int(limit%32)
		err := guard.CheckJSON(b, maxContainers)
		if got := streamed(b, int(split), -1, "application/json", (maxContainers+1)/2, "/v1/traces"); maxContainers%2 == 0 && got != (err != nil) {
			t.Fatalf("split at %d: refused %v, whole: %v", split, got, err)
		}
		if !json.Valid(b) {
			return
		}
		if deep := jsonDepth(b) > maxContainers; deep != (err != nil) {
			t.Fatalf("depth %d, limit %d: guard says %v", jsonDepth(b), maxContainers, err)
		}
	})
}

// streamed sends b through HTTPHandler in two reads split at split and
// reports whether it was refused.
func streamed(b []byte, split int, length int64, ct string, maxDepth int, path string) bool {
	split = min(split, len(b))
	refused := false
	h := guard.HTTPHandler(noopHandler{}, guard.HTTPConfig{MaxDepth: maxDepth, OnRefuse: func(error) { refused = true }})
	r := newRequest(path, ct, io.NopCloser(io.MultiReader(bytes.NewReader(b[:split]), bytes.NewReader(b[split:]))))
	r.ContentLength = length
	h.ServeHTTP(discard{}, r)
	return refused
}

func jsonDepth(b []byte) int {
	d := json.NewDecoder(bytes.NewReader(b))
	depth, deepest := 0, 0
	for {
		tok, err := d.Token()
		if err != nil {
			return deepest
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
			deepest = max(deepest, depth)
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
	}
}

func signal(sig uint8) (guard.Message, func([]byte) error, proto.Message) {
	switch sig % 3 {
	case 0:
		return guard.TracesRequest, func(b []byte) error { return ptraceotlp.NewExportRequest().UnmarshalProto(b) }, &coltrace.ExportTraceServiceRequest{}
	case 1:
		return guard.MetricsRequest, func(b []byte) error { return pmetricotlp.NewExportRequest().UnmarshalProto(b) }, &colmetrics.ExportMetricsServiceRequest{}
	default:
		return guard.LogsRequest, func(b []byte) error { return plogotlp.NewExportRequest().UnmarshalProto(b) }, &collogs.ExportLogsServiceRequest{}
	}
}

func sigPath(sig uint8) string {
	return [...]string{"/v1/traces", "/v1/metrics", "/v1/logs"}[sig%3]
}

func mustProto(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}
