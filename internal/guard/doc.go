// Package guard refuses OTLP requests that nest deeper than a limit, before
// anything decodes them.
//
// pdata's protobuf and JSON decoders recurse once per nested message, with no
// limit: one 12 MB request nesting a million ArrayValues ends the process
// with a Go stack overflow, which no recover can catch. The guard walks the
// bytes once, iteratively, with a small fixed stack and no heap allocation,
// and reports how deep they nest:
//
//   - protobuf: the depth of nested messages as pdata decodes them (the
//     export request is depth 1, a span's attribute value 6), following
//     OTLP's schema for traces, metrics and logs;
//   - JSON: the depth of nested objects and arrays, whose limit is twice the
//     protobuf one (each message is an object, possibly inside an array).
//
// It does not validate: bytes it cannot parse are left to the decoder, which
// refuses them with its own message; the guard only guarantees that nothing
// reaches the decoder nesting deeper than the limit.
//
// HTTPHandler and GRPC apply it to an HTTP handler (after decompression) and
// a gRPC server (a codec that checks before unmarshalling, and an
// interceptor that answers InvalidArgument).
package guard
