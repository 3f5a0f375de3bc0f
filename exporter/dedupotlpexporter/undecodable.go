package dedupotlpexporter

import (
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/doubletake/doubletake/internal/recovered"
)

// The persistent queue (exporterhelper v0.161) drops an entry it cannot
// read or decode when it takes it to send, and says so only at debug
// level ("Failed to dispatch item"): a loss nobody sees. withUndecodable
// makes that entry a warning naming the exporter and counts it
// (otelcol_processor_dedup_storage_recovered_items{outcome="undecodable"}
// and dedup's status page).
func withUndecodable(l *zap.Logger) *zap.Logger {
	return l.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core { return undecodableCore{c} }))
}

const undecodableMsg = "Failed to dispatch item"

type undecodableCore struct{ zapcore.Core }

// Enabled lets the queue's debug entry through to Check.
func (c undecodableCore) Enabled(l zapcore.Level) bool {
	return l == zapcore.DebugLevel || c.Core.Enabled(l)
}

func (c undecodableCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if e.Level == zapcore.DebugLevel && e.Message == undecodableMsg {
		return ce.AddCore(e, c)
	}
	return c.Core.Check(e, ce)
}

func (c undecodableCore) With(fields []zapcore.Field) zapcore.Core {
	return undecodableCore{c.Core.With(fields)}
}

// Write is reached only for the queue's dropped entry.
func (c undecodableCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	recovered.AddUndecodable(1)
	e.Level = zapcore.WarnLevel
	e.Message = "A queue entry could not be read or decoded and was dropped: what it held is lost (counted in otelcol_processor_dedup_storage_recovered_items{outcome=\"undecodable\"})"
	if !c.Core.Enabled(zapcore.WarnLevel) {
		return nil
	}
	return c.Core.Write(e, fields)
}
