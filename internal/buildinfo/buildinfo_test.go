package buildinfo

import (
	"runtime/debug"
	"testing"
)

func TestFrom(t *testing.T) {
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
		want                  Info
		about, str            string
	}{
		{"plain go build of a clean checkout", "dev", "", false, vcs(rev, "false"),
			Info{"dev", rev, false}, "commit 0123456789ab", "dev (commit 0123456789ab)"},
		{"plain go build with local changes", "dev", "", false, vcs(rev, "true"),
			Info{"dev", rev, true}, "commit 0123456789ab with local changes", "dev (commit 0123456789ab with local changes)"},
		{"release: both linked in", "v1.2.3", "fedcba9876543210", false, vcs(rev, "true"),
			Info{"v1.2.3", "fedcba9876543210", false}, "commit fedcba987654", "v1.2.3 (commit fedcba987654)"},
		{"release built with local changes", "v1.2.3", "fedcba9876543210", true, nil,
			Info{"v1.2.3", "fedcba9876543210", true}, "commit fedcba987654 with local changes", "v1.2.3 (commit fedcba987654 with local changes)"},
		{"go install module@version", "dev", "", false, &debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}},
			Info{"v1.2.3", "", false}, "", "v1.2.3"},
		{"no build info", "dev", "", false, nil, Info{"dev", "", false}, "", "dev"},
		{"modified linked in without a commit", "dev", "", true, nil, Info{"dev", "", false}, "", "dev"},
	} {
		got := From(tc.version, tc.commit, tc.modified, tc.bi)
		if got != tc.want || got.About() != tc.about || got.String() != tc.str {
			t.Errorf("%s: %+v, %q, %q; want %+v, %q, %q", tc.name, got, got.About(), got.String(), tc.want, tc.about, tc.str)
		}
	}
}
