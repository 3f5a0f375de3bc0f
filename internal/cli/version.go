package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/doubletake/doubletake/internal/buildinfo"
	"github.com/doubletake/doubletake/internal/distro"
)

func newVersionCommand(s Streams) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print doubletake's version, its commit and the collector release it is built on",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			fmt.Fprintln(s.Out, versionLine(buildinfo.Read()))
			return nil
		},
	}
}

// versionLine is what 'doubletake version' and 'doubletake run --version'
// print: "doubletake v1.2.3 (commit 0123456789ab, collector v0.161.0)".
func versionLine(b buildinfo.Info) string {
	about := b.About()
	if about != "" {
		about += ", "
	}
	return fmt.Sprintf("doubletake %s (%scollector %s)", b.Version, about, distro.CollectorVersion)
}
