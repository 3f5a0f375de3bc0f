package loadgen

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"

	"github.com/doubletake/doubletake/internal/capture"
)

// sender sends one pre-encoded OTLP export request and waits for the answer.
type sender interface {
	send(ctx context.Context, sig capture.Signal, body []byte) error
	close()
}

// CheckLoopback refuses any target that is not a loopback address: the load
// Generator only ever sends to this machine.
func CheckLoopback(target string) error {
	host, _, err := net.SplitHostPort(target)
	if err != nil {
		return fmt.Errorf("target %q: want host:port: %w", target, err)
	}
	if host == "localhost" {
		return nil
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("target %q: only loopback addresses (127.0.0.1) are allowed", target)
	}
	return nil
}

func newSender(protocol, target string) (sender, error) {
	if err := CheckLoopback(target); err != nil {
		return nil, err
	}
	switch protocol {
	case "grpc":
		conn, err := grpc.NewClient(target,
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.ForceCodecV2(rawCodec{}), grpc.MaxCallRecvMsgSize(16<<20)))
		if err != nil {
			return nil, err
		}
		return &grpcSender{conn: conn}, nil
	case "http":
		return &httpSender{
			base: "http://" + target,
			client: &http.Client{Transport: &http.Transport{
				MaxIdleConnsPerHost: 1,
				DisableCompression:  true,
			}},
		}, nil
	default:
		return nil, fmt.Errorf("protocol %q: want grpc or http", protocol)
	}
}

// rawCodec puts bytes on the wire as they are and ignores the response
// body: requests are encoded before the load starts.
type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(v.([]byte))}, nil
}
func (rawCodec) Unmarshal(mem.BufferSlice, any) error { return nil }
func (rawCodec) Name() string                         { return "proto" }

var grpcMethods = map[capture.Signal]string{
	capture.Traces:  "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
	capture.Metrics: "/opentelemetry.proto.collector.metrics.v1.MetricsService/Export",
	capture.Logs:    "/opentelemetry.proto.collector.logs.v1.LogsService/Export",
}

type grpcSender struct{ conn *grpc.ClientConn }

func (g *grpcSender) send(ctx context.Context, sig capture.Signal, body []byte) error {
	var reply struct{}
	return g.conn.Invoke(ctx, grpcMethods[sig], body, &reply)
}

func (g *grpcSender) close() { _ = g.conn.Close() }

type httpSender struct {
	base   string
	client *http.Client
}

func (h *httpSender) send(ctx context.Context, sig capture.Signal, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.base+"/v1/"+string(sig), bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	resp, err := h.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %d: %q", resp.StatusCode, msg)
	}
	return nil
}

func (h *httpSender) close() { h.client.CloseIdleConnections() }

// requestTimeout bounds every request, so a stalled receiver cannot keep a
// run from ending.
const requestTimeout = 10 * time.Second
