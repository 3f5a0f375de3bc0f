//go:build linux

package e2e

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// openPTY opens a pseudo-terminal pair: the master, where the test types
// and reads, and the slave, which becomes the command's terminal.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY|syscall.O_CLOEXEC, 0)
	requireDep(t, err, "a pseudo-terminal (/dev/ptmx)")
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY|syscall.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(); s.Close() })
	return m, s
}

// TestVerifyTerminalInterruptReachesCommandOnce: `doubletake verify -- CMD`
// in the foreground of a terminal, and the user types ^C. The terminal
// sends SIGINT to the foreground process group, verify and CMD alike; verify
// must not pass its copy on as well, or CMD sees two interrupts (and many
// programs take the second as "quit now", skipping their final export).
func TestVerifyTerminalInterruptReachesCommandOnce(t *testing.T) {
	node, err := lookPath("node")
	requireDep(t, err, "node")
	master, slave := openPTY(t)
	ctx := ctxTimeout(t, time.Minute)
	// CMD counts SIGINTs until it reads "stop". Node (libuv) queues every
	// signal it catches, so two interrupts are seen as two, however close;
	// a shell's trap can merge them.
	script := `let n = 0;
process.on('SIGINT', () => { n++; console.log('INT ' + n); });
let buf = '';
process.stdin.setEncoding('utf8').on('data', (d) => {
  buf += d;
  if (buf.includes('stop')) { console.log('total ' + n); process.exit(7); }
});
console.log('ready');`
	cmd := exec.CommandContext(ctx, binary, "verify", "--grace", "100ms", "--", node, "-e", script)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	// A session of its own with the pty as its controlling terminal: verify
	// (and so CMD) is the terminal's foreground process group.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close()

	lines := make(chan string, 64)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(master) // ends with EIO once every slave is closed
		for sc.Scan() {
			lines <- strings.TrimRight(sc.Text(), "\r")
		}
	}()
	var seen []string
	await := func(want string) {
		t.Helper()
		for l := range lines {
			seen = append(seen, l)
			if strings.HasSuffix(l, want) { // after the terminal's echo of ^C, say
				return
			}
		}
		t.Fatalf("terminal closed before %q; it showed:\n%s", want, strings.Join(seen, "\n"))
	}
	await("ready")
	if _, err := master.Write([]byte{0x03}); err != nil { // ^C
		t.Fatal(err)
	}
	await("INT 1")
	if _, err := master.Write([]byte("stop\n")); err != nil {
		t.Fatal(err)
	}
	await("total 1")
	for l := range lines {
		seen = append(seen, l)
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("verify: %v, want exit 3 (CMD exited 7); terminal:\n%s", err, strings.Join(seen, "\n"))
	}
	out := strings.Join(seen, "\n")
	if strings.Contains(out, "INT 2") || !strings.Contains(out, "node exited with status 7") {
		t.Fatalf("terminal:\n%s", out)
	}
}
