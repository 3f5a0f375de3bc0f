// Package guardtest builds hostile OTLP requests for tests: export requests
// whose one span carries an attribute value nested as deep as asked.
package guardtest

import (
	"encoding/binary"
	"strings"
)

// DeepTraces is an OTLP ExportTraceServiceRequest in protobuf whose one
// span has an attribute whose value is levels ArrayValues nested in one
// another (message depth 6 + 2*levels). It is built without recursion, in
// one pass: 1.25M levels make about 12 MB.
func DeepTraces(levels int) []byte {
	// sizes[i]: the encoded size of the AnyValue at nesting level i (0 the
	// outermost, levels the innermost: {int_value: 1}).
	sizes := make([]int, levels+1)
	sizes[levels] = 2 // tag 3<<3|0, value 1
	for i := levels - 1; i >= 0; i-- {
		arr := 1 + uvarintLen(sizes[i+1]) + sizes[i+1] // ArrayValue{values: inner}
		sizes[i] = 1 + uvarintLen(arr) + arr           // AnyValue{array_value: arr}
	}
	var kv []byte
	kv = appendBytesField(kv, 1, []byte("deep"))
	kvSize := len(kv) + 1 + uvarintLen(sizes[0]) + sizes[0]

	var sp []byte
	sp = appendBytesField(sp, 1, traceID)
	sp = appendBytesField(sp, 2, spanID)
	sp = appendBytesField(sp, 5, []byte("deep"))
	spSize := len(sp) + 1 + uvarintLen(kvSize) + kvSize
	ssSize := 1 + uvarintLen(spSize) + spSize
	rsSize := 1 + uvarintLen(ssSize) + ssSize

	out := make([]byte, 0, 1+uvarintLen(rsSize)+rsSize)
	out = appendTagLen(out, 1, rsSize) // ExportTraceServiceRequest.resource_spans
	out = appendTagLen(out, 2, ssSize) // ResourceSpans.scope_spans
	out = appendTagLen(out, 2, spSize) // ScopeSpans.spans
	out = append(out, sp...)
	out = appendTagLen(out, 9, kvSize) // Span.attributes
	out = append(out, kv...)
	out = appendTagLen(out, 2, sizes[0]) // KeyValue.value
	for i := 0; i < levels; i++ {
		arr := 1 + uvarintLen(sizes[i+1]) + sizes[i+1]
		out = appendTagLen(out, 5, arr)        // AnyValue.array_value
		out = appendTagLen(out, 1, sizes[i+1]) // ArrayValue.values
	}
	return append(out, 3<<3, 1) // AnyValue.int_value = 1
}

// DeepTracesJSON is DeepTraces in OTLP/JSON.
func DeepTracesJSON(levels int) []byte {
	var b strings.Builder
	b.Grow(60*levels + 300)
	b.WriteString(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"0102030405060708090a0b0c0d0e0f10","spanId":"0102030405060708","name":"deep","attributes":[{"key":"deep","value":`)
	for range levels {
		b.WriteString(`{"arrayValue":{"values":[`)
	}
	b.WriteString(`{"intValue":"1"}`)
	for range levels {
		b.WriteString(`]}}`)
	}
	b.WriteString(`}]}]}]}]}`)
	return []byte(b.String())
}

var (
	traceID = []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	spanID  = []byte{1, 2, 3, 4, 5, 6, 7, 8}
)

func appendTagLen(b []byte, field, n int) []byte {
	b = binary.AppendUvarint(b, uint64(field)<<3|2)
	return binary.AppendUvarint(b, uint64(n))
}

func appendBytesField(b []byte, field int, v []byte) []byte {
	return append(appendTagLen(b, field, len(v)), v...)
}

func uvarintLen(n int) int {
	l := 1
	for n >= 0x80 {
		n >>= 7
		l++
	}
	return l
}
