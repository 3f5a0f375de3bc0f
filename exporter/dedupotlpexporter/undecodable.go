package dedupotlpexporter

import (
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/doubletake/doubletake/internal/recovered"
)

// TestPinnedPersistentQueueLayout fails, naming the change, when a
// collector bump changes these lines.
//
// The persistent queue (exporterhelper v0.161) drops an entry it cannot
// decode (or read: a storage error), and says so in a line nobody counts:
// when it takes the entry to send, at debug level only ("Failed to
// dispatch item"); when, at start, it puts back the entries that were
// being sent as the process stopped, at warn level ("Failed unmarshalling
// item"). withUndecodable makes each of them one warning naming the
// exporter and counts it
// (otelcol_processor_dedup_storage_recovered_items{outcome="undecodable"}
// and dedup's status page). An entry missing from the storage is counted
// by the queue's storage client (missing.go).
func withUndecodable(l *zap.Logger) *zap.Logger {
	return l.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core { return undecodableCore{c} }))
}

// droppedEntry are the queue's lines for an entry it dropped, with their
// levels.
var droppedEntry = map[string]zapcore.Level{
	"Failed to dispatch item":   zapcore.DebugLevel, // getNextItem
	"Failed unmarshalling item": zapcore.WarnLevel,  // enqueueNotDispatchedReqs
}

const undecodableLine = "A queue entry could not be read or decoded and was dropped: what it held is lost (counted in otelcol_processor_dedup_storage_recovered_items{outcome=\"undecodable\"})"

type undecodableCore struct{ zapcore.Core }

// Enabled lets the queue's debug entry through to Check.
func (c undecodableCore) Enabled(l zapcore.Level) bool {
	return l == zapcore.DebugLevel || c.Core.Enabled(l)
}

func (c undecodableCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if l, ok := droppedEntry[e.Message]; ok && l == e.Level {
		return ce.AddCore(e, c)
	}
	return c.Core.Check(e, ce)
}

func (c undecodableCore) With(fields []zapcore.Field) zapcore.Core {
	return undecodableCore{c.Core.With(fields)}
}

// Write is reached only for the queue's dropped entries.
func (c undecodableCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	recovered.AddUndecodable(1)
	e.Level = zapcore.WarnLevel
	e.Message = undecodableLine
	if !c.Core.Enabled(zapcore.WarnLevel) {
		return nil
	}
	return c.Core.Write(e, fields)
}
