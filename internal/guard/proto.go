package guard

// Message names an OTLP message type the protobuf walker knows the fields of.
type Message uint8

// Request roots and the messages inside them. Only messages whose fields
// hold other messages are told apart; the rest are leaf.
// kind names a request root's signal: traces, metrics or logs.
func (m Message) kind() string {
	switch m {
	case TracesRequest:
		return "traces"
	case MetricsRequest:
		return "metrics"
	case LogsRequest:
		return "logs"
	}
	return "unknown"
}

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
// before them nests too deep. A message too short to hold maxDepth levels
// is skipped unread (see mayExceed).
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
	var stack [MaxDepthLimit]frame
	w := protoWalker{limit: maxDepth, stack: stack[:maxDepth]}
	w.reset(root, len(b))
	if !w.feed(b) {
		return w.err()
	}
	return nil
}

// ProtoDepth is the nesting depth of b read as a root message, the root
// being 1, as far as b is well-formed; it is at most MaxDepthLimit+1.
func ProtoDepth(b []byte, root Message) int {
	var stack [MaxDepthLimit]frame
	w := protoWalker{limit: MaxDepthLimit, stack: stack[:], exact: true}
	w.reset(root, len(b))
	if !w.feed(b) {
		return MaxDepthLimit + 1
	}
	return w.deepest
}

// Parse states of the walker.
const (
	stTag    uint8 = iota // reading a field's tag
	stVarint              // reading a varint value
	stLen                 // reading a length prefix
	stSkip                // skipping bytes
	stDead                // not well-formed: the rest is the decoder's
)

// protoWalker follows a protobuf stream fed in pieces, byte by byte where
// it must (tags, varints) and by whole spans where it can (values it does
// not descend into). It never recurses; its stack has limit frames.
type protoWalker struct {
	limit   int
	stack   []frame
	sp      int
	pos     int // absolute offset of the next byte
	deepest int
	st      uint8
	acc     uint64
	shift   uint
	field   int32
	skip    int // bytes left in stSkip
	group   int // groups open inside the current message
	deepAt  int // where the limit was exceeded, when tooDeep
	tooDeep bool
	// exact: descend into every message, to measure the depth (deepest);
	// otherwise a message too short to nest past the limit is skipped.
	exact bool
}

// mayExceed says whether a message of length bytes opened in the current
// one must be walked: whether it can nest past the limit. Every level
// inside it takes at least two bytes (a tag and a length), so it reaches
// at most its own depth (w.sp+2) plus length/2; a shorter one is skipped
// whole, which is most of an OTLP request (attributes, events, and spans
// themselves when the limit is the default). The walker answers the same
// either way for every input the decoder takes.
func (w *protoWalker) mayExceed(length int) bool {
	return w.exact || w.sp+2+length/2 > w.limit
}

func (w *protoWalker) reset(root Message, size int) {
	w.stack[0] = frame{end: size, kind: root}
	w.sp, w.pos, w.deepest, w.st, w.acc, w.shift, w.skip, w.group, w.tooDeep = 0, 0, 1, stTag, 0, 0, 0, 0, false
}

func (w *protoWalker) err() error {
	return &DepthError{Format: "protobuf", Limit: w.limit, Offset: w.deepAt}
}

// feed walks p, the bytes following those fed before. It returns false
// once the input nests deeper than the limit, and keeps returning false.
func (w *protoWalker) feed(p []byte) bool {
	if w.tooDeep {
		return false
	}
	for i := 0; i < len(p) && w.st != stDead; {
		top := &w.stack[w.sp]
		if w.st == stTag && w.shift == 0 && len(p)-i >= 2*maxVarintLen {
			// Fast path: a whole tag and the varint after it are here.
			if w.group == 0 && w.pos == top.end && w.sp > 0 {
				w.sp--
				continue
			}
			var ok bool
			if i, ok = w.fastField(p, i, top); !ok {
				return false
			}
			continue
		}
		switch w.st {
		case stSkip:
			n := min(w.skip, len(p)-i)
			i += n
			w.pos += n
			if w.skip -= n; w.skip == 0 {
				w.st = stTag
			}
			continue
		case stTag:
			if w.shift == 0 && w.group == 0 && w.pos == top.end && w.sp > 0 {
				w.sp-- // the message ended: back to its parent
				continue
			}
		}
		if w.pos >= top.end || w.shift >= 64 {
			w.st = stDead
			break
		}
		c := p[i]
		i++
		w.pos++
		w.acc |= uint64(c&0x7f) << w.shift
		if c >= 0x80 {
			w.shift += 7
			continue
		}
		v := w.acc
		w.acc, w.shift = 0, 0
		switch w.st {
		case stVarint:
			w.st = stTag
		case stTag:
			w.field = int32(v >> 3) // as pdata's ConsumeTag truncates
			if w.field <= 0 {
				w.st = stDead
				break
			}
			switch v & 7 {
			case 0:
				w.st = stVarint
			case 1:
				w.startSkip(8, top.end)
			case 2:
				w.st = stLen
			case 3:
				w.group++
			case 4:
				if w.group == 0 {
					w.st = stDead
				}
				w.group--
			case 5:
				w.startSkip(4, top.end)
			default:
				w.st = stDead
			}
		case stLen:
			length := int(v)
			if length < 0 || length > top.end-w.pos {
				w.st = stDead
				break
			}
			if w.group == 0 {
				if k := child(top.kind, w.field); k != none && w.mayExceed(length) {
					if w.sp+2 > w.limit {
						w.tooDeep, w.deepAt = true, w.pos
						return false
					}
					w.sp++
					w.stack[w.sp] = frame{end: w.pos + length, kind: k}
					w.deepest = max(w.deepest, w.sp+1)
					w.st = stTag
					break
				}
			}
			w.startSkip(length, top.end)
		}
	}
	return true
}

// maxVarintLen is the most bytes pdata reads for one varint.
const maxVarintLen = 10

// fastField reads one field's tag and, for varints and lengths, its value
// from p[i:], which holds at least 2*maxVarintLen bytes; it leaves the
// walker where the slow path would. It returns false when the field opens
// a message beyond the limit.
func (w *protoWalker) fastField(p []byte, i int, top *frame) (int, bool) {
	tag, n := readVarint(p, i)
	if n == 0 || n > top.end-w.pos {
		w.st = stDead
		return i, true
	}
	i += n
	w.pos += n
	w.field = int32(tag >> 3) // as pdata's ConsumeTag truncates
	if w.field <= 0 {
		w.st = stDead
		return i, true
	}
	switch tag & 7 {
	case 0, 2:
		v, n := readVarint(p, i)
		if n == 0 || n > top.end-w.pos {
			w.st = stDead
			return i, true
		}
		i += n
		w.pos += n
		if tag&7 == 0 {
			return i, true
		}
		length := int(v)
		if length < 0 || length > top.end-w.pos {
			w.st = stDead
			return i, true
		}
		if w.group == 0 {
			if k := child(top.kind, w.field); k != none && w.mayExceed(length) {
				if w.sp+2 > w.limit {
					w.tooDeep, w.deepAt = true, w.pos
					return i, false
				}
				w.sp++
				w.stack[w.sp] = frame{end: w.pos + length, kind: k}
				w.deepest = max(w.deepest, w.sp+1)
				return i, true
			}
		}
		w.startSkip(length, top.end)
	case 1:
		w.startSkip(8, top.end)
	case 3:
		w.group++
	case 4:
		if w.group == 0 {
			w.st = stDead
		}
		w.group--
	case 5:
		w.startSkip(4, top.end)
	default:
		w.st = stDead
	}
	return i, true
}

// readVarint reads a varint at p[i:] as pdata's ConsumeVarint does (at
// most 10 bytes, high bits of the last dropped); n is 0 when it is longer.
func readVarint(p []byte, i int) (v uint64, n int) {
	for shift := uint(0); shift < 64; shift += 7 {
		c := p[i+n]
		n++
		v |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return v, n
		}
	}
	return 0, 0
}

func (w *protoWalker) startSkip(n, end int) {
	switch {
	case n > end-w.pos:
		w.st = stDead
	case n == 0:
		w.st = stTag
	default:
		w.skip, w.st = n, stSkip
	}
}
