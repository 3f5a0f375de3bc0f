package verify

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/doubletake/doubletake/internal/analyze"
	"github.com/doubletake/doubletake/internal/capture"
)

// perSignalEndpointVars are removed from CMD's environment so that
// OTEL_EXPORTER_OTLP_ENDPOINT reaches every signal of every SDK. No single
// per-signal value works for both protocols: OTLP/HTTP uses a per-signal URL
// as is (it needs the /v1/<signal> path), while the Go SDK's gRPC exporters
// dial host+path (a path breaks the dial). The base variable works for both:
// HTTP exporters append /v1/<signal>, gRPC exporters use host:port.
var perSignalEndpointVars = []string{
	"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
	"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
	"OTEL_EXPORTER_OTLP_LOGS_ENDPOINT",
}

// NotStartedError says that the command could not be started.
type NotStartedError struct {
	Name string // argv[0]
	Err  error
}

func (e *NotStartedError) Error() string {
	return fmt.Sprintf("verify: cannot run %q: %v", e.Name, e.Err)
}

func (e *NotStartedError) Unwrap() error { return e.Err }

// CommandResult is what happened to the command.
type CommandResult struct {
	Argv     []string       `json:"argv"`
	ExitCode int            `json:"exit_code"`        // -1 when killed by a signal or not started
	Signal   string         `json:"signal,omitempty"` // the signal that ended it
	Error    string         `json:"error,omitempty"`  // why it could not run
	Failed   bool           `json:"failed"`
	Elapsed  analyze.Millis `json:"elapsed_ms"`
}

// Describe says in one line how the command ended.
func (c *CommandResult) Describe() string {
	name := filepath.Base(c.Argv[0])
	switch {
	case c.Error != "":
		return fmt.Sprintf("%s could not run: %s", name, c.Error)
	case c.Signal != "":
		return fmt.Sprintf("%s was killed by signal %s after %s", name, c.Signal, c.Elapsed)
	default:
		return fmt.Sprintf("%s exited with status %d after %s", name, c.ExitCode, c.Elapsed)
	}
}

// runChild runs CMD, passing signals on, then waits for its exports to go
// quiet. The error is set only when CMD could not be started.
func runChild(s Streams, args []string, srv *capture.Server, sigs <-chan os.Signal, o Options) (*CommandResult, error) {
	res := &CommandResult{Argv: args, ExitCode: -1}
	c := childCommand(s, args, srv.Endpoint(), o.ReportOnStdout)
	started := time.Now()
	if err := c.Start(); err != nil {
		res.Error = err.Error()
		res.Failed = true
		return res, &NotStartedError{Name: args[0], Err: unwrapExec(err)}
	}
	waitErr := waitPassingSignals(c, s, sigs)
	exited := time.Now()
	res.Elapsed = analyze.Millis(exited.Sub(started))
	res.record(c.ProcessState, waitErr)
	awaitQuiet(srv, exited, o.Grace, o.GraceMax, sigs)
	return res, nil
}

// childCommand is CMD with its exports pointed at endpoint (childEnv; what
// it removes is said on stderr) and verify's standard streams. With
// jsonToStdout CMD's stdout goes to verify's stderr: verify's stdout
// carries the JSON report alone, so that a parser reading it gets the
// report alone.
func childCommand(s Streams, args []string, endpoint string, jsonToStdout bool) *exec.Cmd {
	c := exec.Command(args[0], args[1:]...)
	env, removed := childEnv(os.Environ(), endpoint)
	for _, name := range removed {
		fmt.Fprintf(s.Err, "doubletake: verify: %s is not passed to the command, so that every signal goes to the receiver\n", name)
	}
	c.Env = env
	c.Stdin, c.Stdout, c.Stderr = s.In, s.Out, s.Err
	if jsonToStdout {
		c.Stdout = s.Err
	}
	return c
}

// waitPassingSignals waits for the started c to exit and passes on the
// signals the terminal cannot have sent it.
func waitPassingSignals(c *exec.Cmd, s Streams, sigs <-chan os.Signal) error {
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	for {
		select {
		case err := <-done:
			return err
		case sig := <-sigs:
			// CMD runs in verify's process group: a ^C at a terminal where
			// verify runs in the foreground (asked now: a job can be moved
			// to the background) has reached CMD directly. Only what the
			// terminal cannot have sent (SIGTERM, a SIGINT sent to verify
			// alone) is passed on.
			if sig == os.Interrupt && interruptFromTerminal(s.In, s.Out, s.Err) {
				continue
			}
			_ = c.Process.Signal(sig)
		}
	}
}

// record sets how CMD ended: its exit code, or the signal that killed it,
// or why waiting for it failed.
func (c *CommandResult) record(ps *os.ProcessState, waitErr error) {
	if ps != nil {
		c.ExitCode = ps.ExitCode()
		if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			c.Signal = ws.Signal().String()
			c.ExitCode = -1
		}
	}
	if waitErr != nil && ps == nil {
		c.Error = waitErr.Error()
	}
	c.Failed = c.ExitCode != 0
}

// awaitQuiet waits for CMD's final flushes: until nothing has arrived for
// grace, at most graceMax after CMD exited; a signal cuts the wait short.
func awaitQuiet(srv *capture.Server, exited time.Time, grace, graceMax time.Duration, sigs <-chan os.Signal) {
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for {
		last := srv.LastReceived()
		if last.Before(exited) {
			last = exited
		}
		now := time.Now()
		if now.Sub(last) >= grace || now.Sub(exited) >= graceMax {
			return
		}
		select {
		case <-tick.C:
		case <-sigs:
			return
		}
	}
}

// receiveUntil is verify without CMD: it receives until SIGINT or SIGTERM,
// the end of ctx, or duration (0: no limit), and returns how long.
func receiveUntil(ctx context.Context, s Streams, endpoint string, sigs <-chan os.Signal, duration time.Duration) analyze.Millis {
	fmt.Fprintf(s.Err, "doubletake: verify: receiving OTLP (gRPC, HTTP/protobuf, HTTP/JSON) on %s %s\n", endpoint, untilWhat(duration))
	started := time.Now()
	var timeout <-chan time.Time
	if duration > 0 {
		t := time.NewTimer(duration)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case sig := <-sigs:
		fmt.Fprintf(s.Err, "doubletake: verify: %s received, stopping\n", sig)
	case <-timeout:
	case <-ctx.Done():
	}
	return analyze.Millis(time.Since(started))
}

func untilWhat(d time.Duration) string {
	if d > 0 {
		return fmt.Sprintf("for %s (or until SIGINT/SIGTERM)", d)
	}
	return "until SIGINT/SIGTERM"
}

// childEnv is env with OTEL_EXPORTER_OTLP_ENDPOINT set to endpoint and the
// per-signal endpoint variables removed. It returns the names it removed.
func childEnv(env []string, endpoint string) ([]string, []string) {
	out := make([]string, 0, len(env)+1)
	var removed []string
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		switch {
		case name == "OTEL_EXPORTER_OTLP_ENDPOINT":
			continue
		case isPerSignalEndpoint(name):
			removed = append(removed, name)
			continue
		}
		out = append(out, kv)
	}
	return append(out, "OTEL_EXPORTER_OTLP_ENDPOINT="+endpoint), removed
}

func isPerSignalEndpoint(name string) bool {
	for _, v := range perSignalEndpointVars {
		if name == v {
			return true
		}
	}
	return false
}

// unwrapExec keeps the useful part of an exec error.
func unwrapExec(err error) error {
	var ee *exec.Error
	if errors.As(err, &ee) {
		return ee.Err
	}
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
