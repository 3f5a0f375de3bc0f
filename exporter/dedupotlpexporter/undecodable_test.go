package dedupotlpexporter

import (
	"errors"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/doubletake/doubletake/internal/recovered"
)

// TestUndecodableEntryWarnedAndCounted: the persistent queue's debug
// entry for an entry it could not read or decode (and dropped) becomes a
// warning and is counted; other debug entries stay below the level.
func TestUndecodableEntryWarnedAndCounted(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	l := withUndecodable(zap.New(core))
	before := recovered.Undecodable()
	l.Debug("Failed to dispatch item", zap.Error(errors.New("proto: illegal wireType 6")))
	l.Debug("something else")
	if got := recovered.Undecodable() - before; got != 1 {
		t.Errorf("counted %d, want 1", got)
	}
	entries := logs.All()
	if len(entries) != 1 || entries[0].Level != zapcore.WarnLevel || entries[0].ContextMap()["error"] != "proto: illegal wireType 6" {
		t.Fatalf("logged %+v, want one warning with the error", entries)
	}
}
