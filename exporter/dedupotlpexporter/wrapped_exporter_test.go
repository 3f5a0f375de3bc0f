package dedupotlpexporter

import (
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// TestInnerRejectingIsNotLogged: the inner exporter's errors (each about a
// send whose error the wrapper handles and reports, with the advice to turn
// on retries, which run in the wrapper) are logged at debug level only; its
// other entries pass with their fields.
func TestInnerRejectingIsNotLogged(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	l := zap.New(core).WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core { return innerErrorsAtDebug{c} })).With(zap.String("k", "v"))
	l.Error("Exporting failed. Rejecting data. Try enabling retry_on_failure config option to retry on retryable errors.")
	l.Warn("Partial success response")
	if logs.Len() != 1 || logs.All()[0].Message != "Partial success response" || logs.All()[0].ContextMap()["k"] != "v" {
		t.Fatalf("logged %v, want only the partial success warning with its fields", logs.All())
	}
	debugCore, debugLogs := observer.New(zapcore.DebugLevel)
	zap.New(debugCore).WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core { return innerErrorsAtDebug{c} })).Error("export failed")
	if debugLogs.Len() != 1 || debugLogs.All()[0].Level != zapcore.DebugLevel {
		t.Fatalf("logged %v, want the error at debug level", debugLogs.All())
	}
}
