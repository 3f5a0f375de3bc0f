package capture

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/doubletake/doubletake/internal/termsafe"
)

// Target is where a Forwarder sends requests.
type Target struct {
	Protocol string // "grpc" or "http"
	Secure   bool   // https
	Host     string // host:port
	Path     string // http: prefix of /v1/<signal>, without a trailing slash
}

// ParseTarget parses an OTLP endpoint URL for protocol "grpc" or "http".
// The scheme must be http or https and a port is required; a gRPC target
// takes no path, an HTTP target's path is the prefix of /v1/<signal>.
func ParseTarget(raw, protocol string) (Target, error) {
	if protocol != "grpc" && protocol != "http" {
		return Target{}, fmt.Errorf("protocol %q: want grpc or http", protocol)
	}
	// Errors quote the URL without its user info: a password given in it
	// must not reach a terminal or a log.
	shown := termsafe.RedactURL(raw)
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // url.Error quotes the whole URL
		}
		return Target{}, fmt.Errorf("%q is not a URL: %w", shown, err)
	}
	t := Target{Protocol: protocol}
	switch u.Scheme {
	case "http":
	case "https":
		t.Secure = true
	default:
		return Target{}, fmt.Errorf("%q: want an http:// or https:// URL", shown)
	}
	if u.User != nil {
		return Target{}, fmt.Errorf("%q: credentials in the URL are refused: they would show in the process list", shown)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return Target{}, fmt.Errorf("%q: want scheme://host:port[/path] without user, query or fragment", shown)
	}
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil || host == "" || port == "" {
		return Target{}, fmt.Errorf("%q: want a host and a port", shown)
	}
	t.Host = u.Host
	p := strings.TrimRight(u.Path, "/")
	if protocol == "grpc" && p != "" {
		return Target{}, fmt.Errorf("%q: a gRPC endpoint takes no path", shown)
	}
	t.Path = p
	return t, nil
}

// ForwardStats counts what a Forwarder did.
type ForwardStats struct {
	Received  int    `json:"received"` // requests handed to it
	Sent      int    `json:"sent"`     // accepted by the target
	Failed    int    `json:"failed"`   // refused by the target or not delivered
	Dropped   int    `json:"dropped"`  // not sent: the queue was full, or Close timed out
	LastError string `json:"last_error,omitempty"`
}

// ForwardQueue is how many requests a Forwarder holds before it drops.
const ForwardQueue = 1024

// Forwarder sends received requests on to another OTLP endpoint, in the
// background and in arrival order, through a bounded queue. It never
// retries: a retry could itself duplicate data downstream.
type Forwarder struct {
	target  Target
	timeout time.Duration
	queue   chan *Request
	stop    chan struct{}
	done    chan struct{}

	conn   *grpc.ClientConn
	traces ptraceotlp.GRPCClient
	mets   pmetricotlp.GRPCClient
	logs   plogotlp.GRPCClient
	client *http.Client

	mu     sync.Mutex
	closed bool
	stats  ForwardStats
}

// NewForwarder starts a Forwarder to t.
func NewForwarder(t Target) (*Forwarder, error) {
	f := &Forwarder{
		target: t, timeout: 10 * time.Second,
		queue: make(chan *Request, ForwardQueue),
		stop:  make(chan struct{}), done: make(chan struct{}),
	}
	if t.Protocol == "grpc" {
		creds := insecure.NewCredentials()
		if t.Secure {
			creds = credentials.NewTLS(&tls.Config{MinVersion: tls.VersionTLS12})
		}
		conn, err := grpc.NewClient(t.Host, grpc.WithTransportCredentials(creds))
		if err != nil {
			return nil, fmt.Errorf("connecting to %s: %w", t.Host, err)
		}
		f.conn = conn
		f.traces = ptraceotlp.NewGRPCClient(conn)
		f.mets = pmetricotlp.NewGRPCClient(conn)
		f.logs = plogotlp.NewGRPCClient(conn)
	} else {
		f.client = &http.Client{Timeout: f.timeout}
	}
	go f.loop()
	return f, nil
}

// Enqueue hands r to the Forwarder; it drops r when the queue is full or
// the Forwarder is closed.
func (f *Forwarder) Enqueue(r *Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stats.Received++
	if f.closed {
		f.stats.Dropped++
		f.stats.LastError = "received after the forwarder closed"
		return
	}
	select {
	case f.queue <- r:
	default:
		f.stats.Dropped++
		f.stats.LastError = fmt.Sprintf("queue full (%d requests)", ForwardQueue)
	}
}

// Close sends what is queued, waiting at most wait, and returns the
// totals. Requests still queued after wait are counted as dropped. Call it
// once.
func (f *Forwarder) Close(wait time.Duration) ForwardStats {
	f.mu.Lock()
	f.closed = true
	close(f.queue)
	f.mu.Unlock()
	select {
	case <-f.done:
	case <-time.After(wait):
		close(f.stop)
		<-f.done
	}
	if f.conn != nil {
		_ = f.conn.Close()
	}
	if f.client != nil {
		f.client.CloseIdleConnections()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stats
}

func (f *Forwarder) loop() {
	defer close(f.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-f.stop:
			cancel()
		case <-f.done:
		}
	}()
	for r := range f.queue {
		select {
		case <-f.stop:
			f.count(errors.New("not sent before shutdown"), true)
			continue
		default:
		}
		f.count(f.send(ctx, r), false)
	}
}

func (f *Forwarder) count(err error, dropped bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case err == nil:
		f.stats.Sent++
	case dropped:
		f.stats.Dropped++
		f.stats.LastError = err.Error()
	default:
		f.stats.Failed++
		f.stats.LastError = err.Error()
	}
}

func (f *Forwarder) send(ctx context.Context, r *Request) error {
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	if f.conn != nil {
		var err error
		switch r.Signal {
		case Traces:
			_, err = f.traces.Export(ctx, ptraceotlp.NewExportRequestFromTraces(r.Traces))
		case Metrics:
			_, err = f.mets.Export(ctx, pmetricotlp.NewExportRequestFromMetrics(r.Metrics))
		case Logs:
			_, err = f.logs.Export(ctx, plogotlp.NewExportRequestFromLogs(r.Logs))
		}
		return err
	}
	var body []byte
	var err error
	switch r.Signal {
	case Traces:
		body, err = ptraceotlp.NewExportRequestFromTraces(r.Traces).MarshalProto()
	case Metrics:
		body, err = pmetricotlp.NewExportRequestFromMetrics(r.Metrics).MarshalProto()
	case Logs:
		body, err = plogotlp.NewExportRequestFromLogs(r.Logs).MarshalProto()
	}
	if err != nil {
		return fmt.Errorf("encoding %s: %w", r.Signal, err)
	}
	scheme := "http"
	if f.target.Secure {
		scheme = "https"
	}
	url := fmt.Sprintf("%s://%s%s/v1/%s", scheme, f.target.Host, f.target.Path, r.Signal)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", ctProtobuf)
	resp, err := f.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("POST %s: %s", url, resp.Status)
	}
	return nil
}
