package cli

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/doubletake/doubletake/internal/distro"
)

// Version, Commit and Modified are set at link time by scripts/release.sh
// and scripts/image.sh:
//
//	-ldflags "-X github.com/doubletake/doubletake/internal/cli.Version=v1.2.3 -X github.com/doubletake/doubletake/internal/cli.Commit=<sha>"
//
// (and -X ...cli.Modified=true for a checkout with uncommitted changes).
// A plain 'go build' of a git checkout leaves them empty: the commit then
// comes from the build info the Go toolchain records (vcs.revision,
// vcs.modified; not recorded with -buildvcs=false, nor in a git worktree,
// whose .git is a file).
var (
	Version  = "dev"
	Commit   = ""
	Modified = ""
)

func newVersionCommand(s Streams) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print doubletake's version, its commit and the collector release it is built on",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			fmt.Fprintln(s.Out, versionLine())
			return nil
		},
	}
}

// versionLine is what 'doubletake version' and 'doubletake run --version'
// print: "doubletake v1.2.3 (commit 0123456789ab, collector v0.161.0)".
func versionLine() string {
	bi, _ := debug.ReadBuildInfo()
	return formatVersion(Version, Commit, Modified == "true", bi)
}

// formatVersion names the version (the module's, for 'go install
// module@version', when none was linked in), the commit (the linked one,
// else the build info's, "with local changes" when vcs.modified says so)
// and the collector release.
func formatVersion(version, commit string, modified bool, bi *debug.BuildInfo) string {
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
	about := ""
	if commit != "" {
		if len(commit) > 12 {
			commit = commit[:12]
		}
		about = "commit " + commit
		if modified {
			about += " with local changes"
		}
		about += ", "
	}
	return fmt.Sprintf("doubletake %s (%scollector %s)", version, about, distro.CollectorVersion)
}
