//go:generate ../../../scripts/generate.sh

// Package otlpjsonencodingextension is the otlp_json encoding extension: OTLP JSON, as
// pdata writes it, made valid JSON text. pdata's JSON marshaler copies the
// bytes of a string as they are, so a span name or attribute holding
// invalid UTF-8 (which OTLP protobuf carries unchanged) makes a line that
// strict JSON readers refuse. This encoding replaces each run of invalid
// bytes with the escape \ufffd (U+FFFD, as Go's encoding/json does); valid
// data is written byte for byte as pdata writes it. The file exporter uses
// it with `encoding: otlp_json`.
package otlpjsonencodingextension
