package guard

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
	for i, c := range p {
		if w.inString {
			switch {
			case w.escaped:
				w.escaped = false
			case c == '\\':
				w.escaped = true
			case c == '"':
				w.inString = false
			}
			continue
		}
		switch c {
		case '"':
			w.inString = true
		case '{', '[':
			if w.depth++; w.depth > w.limit {
				w.tooDeep, w.pos = true, w.pos+i
				return false
			}
		case '}', ']':
			if w.depth > 0 {
				w.depth--
			}
		}
	}
	w.pos += len(p)
	return true
}
