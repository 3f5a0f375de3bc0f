package guard

// CheckJSON refuses b with a *DepthError when its objects and arrays nest
// deeper than maxContainers. Strings (with their escapes) are skipped; the
// bytes are not otherwise validated.
func CheckJSON(b []byte, maxContainers int) error {
	depth := 0
	inString := false
	for i := 0; i < len(b); i++ {
		c := b[i]
		if inString {
			switch c {
			case '\\':
				i++
			case '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '{', '[':
			if depth++; depth > maxContainers {
				return &DepthError{Format: "JSON", Limit: maxContainers, Offset: i}
			}
		case '}', ']':
			if depth > 0 {
				depth--
			}
		}
	}
	return nil
}
