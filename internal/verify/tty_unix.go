//go:build linux || darwin || freebsd || netbsd || openbsd

package verify

import (
	"os"

	"golang.org/x/sys/unix"
)

// interruptFromTerminal reports whether a SIGINT this process receives is,
// most likely, the terminal's ^C: one of the given streams is a terminal
// whose foreground process group is this process's own. The kernel sends
// ^C to that whole group, so a command started in it (as verify starts CMD)
// has received the signal already; passing it on would deliver it twice,
// and many programs take a second interrupt as "quit now", skipping the
// final flush of their telemetry.
func interruptFromTerminal(streams ...any) bool {
	for _, s := range streams {
		f, ok := s.(*os.File)
		if !ok || f == nil {
			continue
		}
		pgrp, err := unix.IoctlGetInt(int(f.Fd()), unix.TIOCGPGRP)
		if err != nil {
			continue // not a terminal, or not ours
		}
		return pgrp == unix.Getpgrp()
	}
	return false
}
