package otlpjsonencodingextension

import (
	"bytes"
	"context"
	"unicode/utf8"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// replacement is what a run of invalid UTF-8 bytes becomes: an escape, so
// that it is valid inside the JSON string it sits in (pdata writes raw
// bytes only inside strings, and escapes a backslash there as \\).
var replacement = []byte(`\ufffd`)

// Encoding marshals traces, logs and metrics to OTLP JSON that is valid
// UTF-8.
type Encoding struct{}

var (
	_ ptrace.Marshaler  = Encoding{}
	_ plog.Marshaler    = Encoding{}
	_ pmetric.Marshaler = Encoding{}
)

// Start does nothing.
func (Encoding) Start(context.Context, component.Host) error { return nil }

// Shutdown does nothing.
func (Encoding) Shutdown(context.Context) error { return nil }

// MarshalTraces writes td as OTLP JSON.
func (Encoding) MarshalTraces(td ptrace.Traces) ([]byte, error) {
	b, err := (&ptrace.JSONMarshaler{}).MarshalTraces(td)
	return valid(b), err
}

// MarshalLogs writes ld as OTLP JSON.
func (Encoding) MarshalLogs(ld plog.Logs) ([]byte, error) {
	b, err := (&plog.JSONMarshaler{}).MarshalLogs(ld)
	return valid(b), err
}

// MarshalMetrics writes md as OTLP JSON.
func (Encoding) MarshalMetrics(md pmetric.Metrics) ([]byte, error) {
	b, err := (&pmetric.JSONMarshaler{}).MarshalMetrics(md)
	return valid(b), err
}

// valid returns b, or a copy with invalid UTF-8 replaced.
func valid(b []byte) []byte {
	if utf8.Valid(b) {
		return b
	}
	return bytes.ToValidUTF8(b, replacement)
}
