package guard

import "bytes"

// CheckJSON refuses b with a *DepthError when its objects and arrays nest
// deeper than maxContainers. Strings (with their escapes) are skipped; the
// bytes are not otherwise validated.
func CheckJSON(b []byte, maxContainers int) error {
	w := jsonWalker{limit: maxContainers}
	if !w.feed(b) {
		return w.err()
	}
	return nil
}

// jsonWalker counts open objects and arrays in a JSON stream fed in pieces.
type jsonWalker struct {
	limit    int
	pos      int
	depth    int
	deepest  int // the most containers open at once so far
	inString bool
	escaped  bool
	tooDeep  bool
}

func (w *jsonWalker) err() error {
	return &DepthError{Format: "JSON", Limit: w.limit, Offset: w.pos}
}

func (w *jsonWalker) feed(p []byte) bool {
	if w.tooDeep {
		return false
	}
	depth := w.depth
	for i := 0; i < len(p); {
		if w.inString {
			if w.escaped { // the previous piece ended on a backslash
				w.escaped = false
				i++
				continue
			}
			j := bytes.IndexByte(p[i:], '"')
			if j < 0 {
				// The string goes on past this piece: does it end inside
				// an escape?
				k := len(p)
				for k > i && p[k-1] == '\\' {
					k--
				}
				w.escaped = (len(p)-k)%2 == 1
				break
			}
			q := i + j
			k := q
			for k > i && p[k-1] == '\\' {
				k--
			}
			i = q + 1
			if (q-k)%2 == 0 { // not an escaped quote
				w.inString = false
			}
			continue
		}
		switch p[i] {
		case '"':
			w.inString = true
		case '{', '[':
			if depth++; depth > w.limit {
				w.depth, w.tooDeep, w.pos = depth, true, w.pos+i
				return false
			}
			w.deepest = max(w.deepest, depth)
		case '}', ']':
			if depth > 0 {
				depth--
			}
		}
		i++
	}
	w.depth = depth
	w.pos += len(p)
	return true
}
