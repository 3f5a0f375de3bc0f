package verify

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"time"

	"github.com/doubletake/doubletake/internal/analyze"
	"github.com/doubletake/doubletake/internal/capture"
	"github.com/doubletake/doubletake/internal/termsafe"
)

// receiver is verify's in-process OTLP receiver: every request it takes is
// analysed and, with --forward, sent on.
type receiver struct {
	srv *capture.Server
	fwd *capture.Forwarder // nil without --forward

	mu sync.Mutex // guards an
	an *analyze.Analyzer
}

// startReceiver listens on --listen (a free loopback port without it).
func startReceiver(o Options) (*receiver, error) {
	addr, listenSet := o.Listen, o.Listen != ""
	if !listenSet {
		addr = "127.0.0.1:0"
	}
	r := &receiver{an: analyze.New(analyze.Options{ExportInterval: o.ExportInterval})}
	if o.Forward != "" {
		target, _ := capture.ParseTarget(o.Forward, o.ForwardProtocol) // checked by Validate
		var err error
		if r.fwd, err = capture.NewForwarder(target); err != nil {
			return nil, fmt.Errorf("verify: --forward %s: %w", termsafe.RedactURL(o.Forward), err)
		}
	}
	srv, err := capture.Listen(addr, r.handle)
	if err != nil {
		if r.fwd != nil {
			r.fwd.Close(time.Second)
		}
		return nil, fmt.Errorf("verify: %w%s", err, listenHint(err, listenSet))
	}
	r.srv = srv
	return r, nil
}

// handle analyses one request and queues it for --forward.
func (r *receiver) handle(req *capture.Request) error {
	at := analyze.Arrival{Seq: req.Seq, Received: req.Received, Peer: req.Peer, Protocol: string(req.Protocol)}
	r.mu.Lock()
	switch req.Signal {
	case capture.Traces:
		r.an.AddTraces(at, req.Traces)
	case capture.Metrics:
		r.an.AddMetrics(at, req.Metrics)
	case capture.Logs:
		r.an.AddLogs(at, req.Logs)
	}
	r.mu.Unlock()
	if r.fwd != nil {
		r.fwd.Enqueue(req)
	}
	return nil
}

// stop shuts the receiver down and drains the forwarder, saying on stderr
// what could not be forwarded. It returns the forwarder's totals, nil
// without --forward.
func (r *receiver) stop(s Streams, forward string) *capture.ForwardStats {
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	shutErr := r.srv.Shutdown(sctx)
	cancel()
	if shutErr != nil {
		_ = r.srv.Close()
	}
	if r.fwd == nil {
		return nil
	}
	st := r.fwd.Close(10 * time.Second)
	if st.Failed > 0 || st.Dropped > 0 {
		fmt.Fprintf(s.Err, "doubletake: verify: forwarding to %s: %d of %d requests failed, %d dropped (last error: %s)\n",
			termsafe.RedactURL(forward), st.Failed, st.Received, st.Dropped, termsafe.Escape(st.LastError))
	}
	return &st
}

// report is the analysis of everything received, undecodable requests
// counted.
func (r *receiver) report() *analyze.Report {
	r.mu.Lock()
	rep := r.an.Report()
	r.mu.Unlock()
	rep.Malformed = r.srv.Malformed()
	return rep
}

func listenHint(err error, listenSet bool) string {
	if listenSet && errors.Is(err, syscall.EADDRINUSE) {
		return " (another process holds this port; choose another --listen address, or leave --listen out to use a free port)"
	}
	return ""
}
