package cli

import (
	"runtime/debug"
	"testing"
)

func TestFormatVersion(t *testing.T) {
	vcs := func(rev, modified string) *debug.BuildInfo {
		return &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified},
		}}
	}
	const rev = "0123456789abcdef0123456789abcdef01234567"
	for _, tc := range []struct {
		name, version, commit string
		modified              bool
		bi                    *debug.BuildInfo
		want                  string
	}{
		{"plain go build of a clean checkout", "dev", "", false, vcs(rev, "false"), "doubletake dev (commit 0123456789ab, collector v0.161.0)"},
		{"plain go build with local changes", "dev", "", false, vcs(rev, "true"), "doubletake dev (commit 0123456789ab with local changes, collector v0.161.0)"},
		{"release: both linked in", "v1.2.3", "fedcba9876543210", false, vcs(rev, "true"), "doubletake v1.2.3 (commit fedcba987654, collector v0.161.0)"},
		{"release built with local changes", "v1.2.3", "fedcba9876543210", true, nil, "doubletake v1.2.3 (commit fedcba987654 with local changes, collector v0.161.0)"},
		{"go install module@version", "dev", "", false, &debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}}, "doubletake v1.2.3 (collector v0.161.0)"},
		{"no build info", "dev", "", false, nil, "doubletake dev (collector v0.161.0)"},
	} {
		if got := formatVersion(tc.version, tc.commit, tc.modified, tc.bi); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
