//go:build !(linux || darwin || freebsd || netbsd || openbsd)

package verify

// interruptFromTerminal: without a portable way to ask a terminal for its
// foreground process group, every signal is passed on.
func interruptFromTerminal(...any) bool { return false }
