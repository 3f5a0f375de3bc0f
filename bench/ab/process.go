package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/doubletake/doubletake/internal/loadgen"
)

// gatewayProc is a running `doubletake run`.
type gatewayProc struct {
	cmd  *exec.Cmd
	pid  string
	log  string
	done chan struct{}
	err  error
}

func (c *abConfig) startGateway(ctx context.Context, cfgPath, logPath, health string) (*gatewayProc, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	args := []string{c.bin, "run", "--config", cfgPath}
	if c.gatewayCPUs != "" {
		// taskset execs the gateway: the pid stays the gateway's.
		args = append([]string{"taskset", "-c", c.gatewayCPUs}, args...)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OTEL_") && !strings.HasPrefix(kv, "GOMAXPROCS=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	g := &gatewayProc{cmd: cmd, pid: strconv.Itoa(cmd.Process.Pid), log: logPath, done: make(chan struct{})}
	go func() { g.err = cmd.Wait(); logf.Close(); close(g.done) }()
	deadline := time.Now().Add(60 * time.Second)
	client := &http.Client{Timeout: time.Second}
	for {
		select {
		case <-g.done:
			return nil, fmt.Errorf("the gateway exited before it was healthy: %w\n%s", g.err, tail(logPath))
		case <-ctx.Done():
			g.stop()
			return nil, ctx.Err()
		default:
		}
		if resp, err := client.Get("http://" + health + "/"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return g, nil
			}
		}
		if time.Now().After(deadline) {
			g.stop()
			return nil, fmt.Errorf("the gateway was not healthy within 60s\n%s", tail(logPath))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop ends the gateway with SIGINT, then SIGKILL after 20s.
func (g *gatewayProc) stop() {
	select {
	case <-g.done:
		return
	default:
	}
	_ = g.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-g.done:
	case <-time.After(20 * time.Second):
		_ = g.cmd.Process.Kill()
		<-g.done
	}
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

type probe struct {
	gen     loadgen.Snapshot
	sink    loadgen.Counts
	gwCPU   float64
	selfCPU float64
	busy    float64
}

func takeProbe(g *loadgen.Generator, sk *loadgen.Sink, pid string) probe {
	p := probe{gen: g.Stats.Snapshot(), sink: sk.Counts()}
	p.gwCPU, _ = loadgen.ProcCPU(pid)
	p.selfCPU, _ = loadgen.ProcCPU("self")
	p.busy, _ = loadgen.SystemBusy()
	return p
}

// waitQuiet waits until the machine's CPUs, less this process, were busy
// for fewer than below cores over half a second, or limit passes; it
// returns the last figure.
func waitQuiet(ctx context.Context, below float64, limit time.Duration) float64 {
	deadline := time.Now().Add(limit)
	for {
		b0, s0, t0 := must(loadgen.SystemBusy()), must(loadgen.ProcCPU("self")), time.Now()
		select {
		case <-ctx.Done():
			return 0
		case <-time.After(500 * time.Millisecond):
		}
		secs := time.Since(t0).Seconds()
		other := (must(loadgen.SystemBusy()) - b0 - (must(loadgen.ProcCPU("self")) - s0)) / secs
		if other < below || time.Now().After(deadline) {
			return other
		}
	}
}

func procStatusKBFile(path, key string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && k == key {
			if f := strings.Fields(v); len(f) > 0 {
				return strconv.ParseUint(f[0], 10, 64)
			}
		}
	}
	return 0, fmt.Errorf("%s: no %s", path, key)
}
