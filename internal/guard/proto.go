package guard

// Message names an OTLP message type the protobuf walker knows the fields of.
type Message uint8

// Request roots and the messages inside them. Only messages whose fields
// hold other messages are told apart; the rest are leaf.
const (
	leaf    Message = iota // a message without message fields
	Unknown                // a request of unknown signal: every root is tried
	TracesRequest
	MetricsRequest
	LogsRequest
	resourceSpans
	resourceMetrics
	resourceLogs
	resource
	scopeSpans
	scopeMetrics
	scopeLogs
	scope
	span
	spanEvent
	spanLink
	metric
	gauge     // gauge and sum: field 1 number data points
	histogram // histogram: field 1 histogram data points
	expHistogram
	summary
	numberPoint
	histogramPoint
	expHistogramPoint
	summaryPoint
	exemplar
	logRecord
	keyValue
	anyValue
	arrayValue
	keyValueList
	none // not a message field
)

// child is the message type of field f of a message of type m, or none when
// f is not a message field. It mirrors pdata's generated decoders (pdata
// v1.67.0, internal/generated_proto_*.go): every field they decode by
// recursing into UnmarshalProto, except the fixed-size ids.
func child(m Message, f int32) Message {
	switch m {
	case TracesRequest:
		if f == 1 {
			return resourceSpans
		}
	case MetricsRequest:
		if f == 1 {
			return resourceMetrics
		}
	case LogsRequest:
		if f == 1 {
			return resourceLogs
		}
	case resourceSpans:
		switch f {
		case 1:
			return resource
		case 2, 1000: // 1000: the deprecated instrumentation_library_spans
			return scopeSpans
		}
	case resourceMetrics:
		switch f {
		case 1:
			return resource
		case 2, 1000:
			return scopeMetrics
		}
	case resourceLogs:
		switch f {
		case 1:
			return resource
		case 2, 1000:
			return scopeLogs
		}
	case resource:
		switch f {
		case 1:
			return keyValue
		case 3: // entity_refs
			return leaf
		}
	case scopeSpans:
		switch f {
		case 1:
			return scope
		case 2:
			return span
		}
	case scopeMetrics:
		switch f {
		case 1:
			return scope
		case 2:
			return metric
		}
	case scopeLogs:
		switch f {
		case 1:
			return scope
		case 2:
			return logRecord
		}
	case scope:
		if f == 3 {
			return keyValue
		}
	case span:
		switch f {
		case 9:
			return keyValue
		case 11:
			return spanEvent
		case 13:
			return spanLink
		case 15: // status
			return leaf
		}
	case spanEvent:
		if f == 3 {
			return keyValue
		}
	case spanLink:
		if f == 4 {
			return keyValue
		}
	case metric:
		switch f {
		case 5, 7: // gauge, sum
			return gauge
		case 9:
			return histogram
		case 10:
			return expHistogram
		case 11:
			return summary
		case 12: // metadata
			return keyValue
		}
	case gauge:
		if f == 1 {
			return numberPoint
		}
	case histogram:
		if f == 1 {
			return histogramPoint
		}
	case expHistogram:
		if f == 1 {
			return expHistogramPoint
		}
	case summary:
		if f == 1 {
			return summaryPoint
		}
	case numberPoint:
		switch f {
		case 7:
			return keyValue
		case 5:
			return exemplar
		}
	case histogramPoint:
		switch f {
		case 9:
			return keyValue
		case 8:
			return exemplar
		}
	case expHistogramPoint:
		switch f {
		case 1:
			return keyValue
		case 8, 9: // positive, negative buckets
			return leaf
		case 11:
			return exemplar
		}
	case summaryPoint:
		switch f {
		case 7:
			return keyValue
		case 6: // quantile values
			return leaf
		}
	case exemplar:
		if f == 7 {
			return keyValue
		}
	case logRecord:
		switch f {
		case 5:
			return anyValue
		case 6:
			return keyValue
		}
	case keyValue:
		if f == 2 {
			return anyValue
		}
	case anyValue:
		switch f {
		case 5:
			return arrayValue
		case 6:
			return keyValueList
		}
	case arrayValue:
		if f == 1 {
			return anyValue
		}
	case keyValueList:
		if f == 1 {
			return keyValue
		}
	}
	return none
}

// frame is one open message: where it ends and what it is.
type frame struct {
	end  int
	kind Message
}

// CheckProto refuses b with a *DepthError when, read as a root message, it
// nests deeper than maxDepth messages (the root is depth 1). It allocates
// nothing and does not recurse. Bytes that are not well-formed protobuf end
// the walk without error: the decoder refuses them itself, and nothing
// before them nests too deep.
func CheckProto(b []byte, root Message, maxDepth int) error {
	if maxDepth <= 0 || maxDepth > MaxDepthLimit {
		maxDepth = DefaultMaxDepth
	}
	if root == Unknown {
		for _, r := range [...]Message{TracesRequest, MetricsRequest, LogsRequest} {
			if err := CheckProto(b, r, maxDepth); err != nil {
				return err
			}
		}
		return nil
	}
	if _, at, deep := walkProto(b, root, maxDepth); deep {
		return &DepthError{Format: "protobuf", Limit: maxDepth, Offset: at}
	}
	return nil
}

// ProtoDepth is the nesting depth of b read as a root message, the root
// being 1, as far as b is well-formed; it is at most MaxDepthLimit+1.
func ProtoDepth(b []byte, root Message) int {
	d, _, _ := walkProto(b, root, MaxDepthLimit)
	return d
}

// walkProto returns the deepest nesting seen and, when it is beyond
// maxDepth, where: the walk stops there.
func walkProto(b []byte, root Message, maxDepth int) (depth, at int, tooDeep bool) {
	var stack [MaxDepthLimit]frame
	sp := 0
	stack[0] = frame{end: len(b), kind: root}
	deepest := 1
	pos := 0
	for {
		top := stack[sp]
		if pos >= top.end {
			if sp == 0 {
				return deepest, 0, false
			}
			sp--
			continue
		}
		tag, p, ok := varint(b, pos, top.end)
		if !ok {
			return deepest, 0, false
		}
		field, wire := int32(tag>>3), tag&7 // as pdata's ConsumeTag truncates
		if field <= 0 {
			return deepest, 0, false
		}
		pos = p
		switch wire {
		case 0:
			if _, pos, ok = varint(b, pos, top.end); !ok {
				return deepest, 0, false
			}
		case 1:
			if pos += 8; pos > top.end {
				return deepest, 0, false
			}
		case 5:
			if pos += 4; pos > top.end {
				return deepest, 0, false
			}
		case 2:
			var n uint64
			if n, pos, ok = varint(b, pos, top.end); !ok {
				return deepest, 0, false
			}
			length := int(n)
			if length < 0 || length > top.end-pos {
				return deepest, 0, false
			}
			k := child(top.kind, field)
			if k == none {
				pos += length
				continue
			}
			if sp+2 > maxDepth {
				return sp + 2, pos, true
			}
			sp++
			stack[sp] = frame{end: pos + length, kind: k}
			deepest = max(deepest, sp+1)
		case 3:
			if pos, ok = skipGroup(b, pos, top.end); !ok {
				return deepest, 0, false
			}
		default: // an end group without a start, or an illegal wire type
			return deepest, 0, false
		}
	}
}

// skipGroup skips the rest of a group whose start tag ends at pos, as
// pdata's ConsumeUnknown does: counting nested groups, without recursion.
func skipGroup(b []byte, pos, end int) (int, bool) {
	depth := 1
	for depth > 0 {
		tag, p, ok := varint(b, pos, end)
		if !ok || int32(tag>>3) <= 0 {
			return 0, false
		}
		pos = p
		switch tag & 7 {
		case 0:
			if _, pos, ok = varint(b, pos, end); !ok {
				return 0, false
			}
		case 1:
			if pos += 8; pos > end {
				return 0, false
			}
		case 5:
			if pos += 4; pos > end {
				return 0, false
			}
		case 2:
			var n uint64
			if n, pos, ok = varint(b, pos, end); !ok {
				return 0, false
			}
			if l := int(n); l < 0 || l > end-pos {
				return 0, false
			}
			pos += int(n)
		case 3:
			depth++
		case 4:
			depth--
		default:
			return 0, false
		}
	}
	return pos, true
}

// varint reads a base-128 varint from b[pos:end], as pdata's ConsumeVarint.
func varint(b []byte, pos, end int) (uint64, int, bool) {
	var v uint64
	for shift := uint(0); shift < 64; shift += 7 {
		if pos >= end {
			return 0, 0, false
		}
		c := b[pos]
		pos++
		v |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return v, pos, true
		}
	}
	return 0, 0, false
}
