package guardextension

import (
	"fmt"

	"github.com/doubletake/doubletake/internal/guard"
)

// DefaultMaxInFlightBytes is the default bound on the body bytes held by
// HTTP requests in flight: 8 requests of the default 16 MiB limit, or
// hundreds of ordinary ones.
const DefaultMaxInFlightBytes = 128 << 20

// Config is the guard's configuration.
type Config struct {
	// MaxDepth is the deepest message nesting accepted (the export request
	// is depth 1, a span's attribute value 6); JSON bodies may nest twice
	// as many objects and arrays.
	MaxDepth int `mapstructure:"max_depth"`
	// MaxInFlightBytes bounds the decompressed body bytes that all HTTP
	// requests in flight hold together; past it, requests are refused
	// with 503 (retryable) until earlier ones are answered. 0: no bound.
	// Keep it above the receivers' max_request_body_size: a body larger
	// than the whole bound is refused every time it is sent.
	MaxInFlightBytes int64 `mapstructure:"max_in_flight_bytes"`
	// MaxGRPCDecompressions bounds the gRPC messages the process
	// decompresses at once (grpc-go does it before any middleware, for
	// every gRPC server); others wait for a slot.
	MaxGRPCDecompressions int `mapstructure:"max_grpc_decompressions"`

	_ struct{}
}

func createDefaultConfig() *Config {
	return &Config{
		MaxDepth:              guard.DefaultMaxDepth,
		MaxInFlightBytes:      DefaultMaxInFlightBytes,
		MaxGRPCDecompressions: guard.DefaultGRPCDecompressions,
	}
}

// Validate checks the configuration.
func (c *Config) Validate() error {
	if c.MaxDepth < 8 || c.MaxDepth > guard.MaxDepthLimit {
		return fmt.Errorf("max_depth must be between 8 and %d, got %d", guard.MaxDepthLimit, c.MaxDepth)
	}
	if c.MaxGRPCDecompressions < 1 {
		return fmt.Errorf("max_grpc_decompressions must be at least 1, got %d", c.MaxGRPCDecompressions)
	}
	if c.MaxInFlightBytes < 0 {
		return fmt.Errorf("max_in_flight_bytes must not be negative, got %d", c.MaxInFlightBytes)
	}
	return nil
}
