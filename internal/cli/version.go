package cli

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/doubletake/doubletake/internal/distro"
)

// Version is set at link time (-ldflags "-X github.com/doubletake/doubletake/internal/cli.Version=v1.2.3").
var Version = "dev"

func newVersionCommand(s Streams) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print doubletake's version and the collector release it is built on",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			fmt.Fprintln(s.Out, versionLine())
			return nil
		},
	}
}

// versionLine is what 'doubletake version' and 'doubletake run --version'
// print.
func versionLine() string {
	v := Version
	if v == "dev" {
		if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v = bi.Main.Version
		}
	}
	return fmt.Sprintf("doubletake %s (collector %s)", v, distro.CollectorVersion)
}
