// Package buildinfo is the one place a doubletake build's version and
// commit are known. 'doubletake version', the collector's BuildInfo (its
// own telemetry, its user agent) and the status page all read them here.
package buildinfo

import "runtime/debug"

// Version, Commit and Modified are set at link time by scripts/release.sh
// and scripts/image.sh:
//
//	-ldflags "-X github.com/doubletake/doubletake/internal/buildinfo.Version=v1.2.3 -X github.com/doubletake/doubletake/internal/buildinfo.Commit=<sha>"
//
// (and -X ...buildinfo.Modified=true for a checkout with uncommitted
// changes). A plain 'go build' of a git checkout leaves them empty: the
// commit then comes from the build info the Go toolchain records
// (vcs.revision, vcs.modified; not recorded with -buildvcs=false, nor in
// a git worktree, whose .git is a file).
var (
	Version  = "dev"
	Commit   = ""
	Modified = ""
)

// Info is a build's version and the commit it was built from.
type Info struct {
	Version  string // v1.2.3; the module's version for 'go install module@version'; dev
	Commit   string // the full revision; "" when unknown
	Modified bool   // built from a checkout with uncommitted changes
}

// Read returns this binary's Info: what was linked in, else what the Go
// toolchain recorded.
func Read() Info {
	bi, _ := debug.ReadBuildInfo()
	return From(Version, Commit, Modified == "true", bi)
}

// From is the Info of a build whose linked-in values are version, commit
// and modified and whose Go build info is bi (nil when there is none): the
// version is the module's, for 'go install module@version', when none was
// linked in; the commit the linked one, else bi's (vcs.revision, and
// vcs.modified for the local changes).
func From(version, commit string, modified bool, bi *debug.BuildInfo) Info {
	if bi != nil {
		if version == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			version = bi.Main.Version
		}
		if commit == "" {
			for _, s := range bi.Settings {
				switch s.Key {
				case "vcs.revision":
					commit = s.Value
				case "vcs.modified":
					modified = s.Value == "true"
				}
			}
		}
	}
	if commit == "" {
		modified = false // nothing to say it differs from
	}
	return Info{Version: version, Commit: commit, Modified: modified}
}

// About names the commit, "commit 0123456789ab" (its first 12 digits),
// with " with local changes" when Modified; "" without a commit.
func (i Info) About() string {
	if i.Commit == "" {
		return ""
	}
	c := i.Commit
	if len(c) > 12 {
		c = c[:12]
	}
	if i.Modified {
		return "commit " + c + " with local changes"
	}
	return "commit " + c
}

// String is the version and the commit, as the status page shows them:
// "v1.2.3 (commit 0123456789ab)", or the version alone.
func (i Info) String() string {
	if a := i.About(); a != "" {
		return i.Version + " (" + a + ")"
	}
	return i.Version
}
