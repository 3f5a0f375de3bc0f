// Command doubletake makes telemetry arrive exactly once, and proves it.
package main

import (
	"os"

	"github.com/doubletake/doubletake/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], cli.Streams{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}))
}
