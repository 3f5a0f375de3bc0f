//go:generate ../../scripts/generate.sh

// Package guardextension is a collector extension that protects OTLP
// receivers from requests nesting deeper than a limit: listed as a
// middleware of a receiver's HTTP or gRPC server, it checks each request's
// bytes before anything decodes them (see internal/guard) and refuses the
// deep ones with HTTP 400 / gRPC InvalidArgument.
//
//	extensions:
//	  guard:
//	    max_depth: 128
//	receivers:
//	  otlp:
//	    protocols:
//	      grpc:
//	        middlewares: [{id: guard}]
//	      http:
//	        middlewares: [{id: guard}]
//	service:
//	  extensions: [guard]
//
// It also refuses, with a retryable 503 / Unavailable and before decoding,
// a request that a full sending queue would refuse after: once every
// request of its kind has entered the same queues (a dedup_otlp_* exporter
// records that it was entered, see internal/admission), a request one of
// them has no room for.
//
// On HTTP it runs after confighttp's decompression and size limit, so it
// sees the decompressed body; on gRPC it installs the server's codec, so no
// other middleware of the same server may set one.
package guardextension
