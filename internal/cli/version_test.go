package cli

import (
	"testing"

	"github.com/doubletake/doubletake/internal/buildinfo"
)

func TestVersionLine(t *testing.T) {
	for _, tc := range []struct {
		b    buildinfo.Info
		want string
	}{
		{buildinfo.Info{Version: "dev", Commit: "0123456789abcdef0123"}, "doubletake dev (commit 0123456789ab, collector v0.161.0)"},
		{buildinfo.Info{Version: "v1.2.3", Commit: "fedcba9876543210", Modified: true}, "doubletake v1.2.3 (commit fedcba987654 with local changes, collector v0.161.0)"},
		{buildinfo.Info{Version: "v1.2.3"}, "doubletake v1.2.3 (collector v0.161.0)"},
	} {
		if got := versionLine(tc.b); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.b, got, tc.want)
		}
	}
}
