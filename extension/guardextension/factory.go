package guardextension

import (
	"context"

	"go.opentelemetry.io/collector/component"
	// configgrpc registers its gRPC compressors (zstd, snappy) in its
	// init; importing it here orders that before this package's init.
	_ "go.opentelemetry.io/collector/config/configgrpc"
	"go.opentelemetry.io/collector/extension"
	// And grpc-go's gzip.
	_ "google.golang.org/grpc/encoding/gzip"

	"github.com/doubletake/doubletake/extension/guardextension/internal/metadata"
	"github.com/doubletake/doubletake/internal/guard"
)

// Every gRPC decompressor in the process takes one of a bounded number of
// slots (max_grpc_decompressions): grpc-go decompresses before any
// middleware could look.
func init() {
	guard.BoundGRPCDecompression("gzip", "zstd", "snappy")
}

// Type is the extension's component type in collector configs
// (metadata.yaml).
var Type = metadata.Type

// NewFactory returns the guard extension's factory.
func NewFactory() extension.Factory {
	return extension.NewFactory(
		Type,
		func() component.Config { return createDefaultConfig() },
		func(_ context.Context, set extension.Settings, cfg component.Config) (extension.Extension, error) {
			return newGuard(set, cfg.(*Config))
		},
		metadata.ExtensionStability,
	)
}
