package scan

import "strings"

// normalizeName returns the PEP 503 normalised form of a distribution name:
// lower case, with every run of '-', '_' and '.' replaced by a single '-'.
func normalizeName(name string) string {
	if isNormalized(name) {
		return name
	}
	var b strings.Builder
	b.Grow(len(name))
	sep := false
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '-' || c == '_' || c == '.':
			sep = true
			continue
		case 'A' <= c && c <= 'Z':
			c += 'a' - 'A'
		}
		if sep && b.Len() > 0 {
			b.WriteByte('-')
		}
		sep = false
		b.WriteByte(c)
	}
	return b.String()
}

// validName reports whether name is a valid PEP 508 distribution name:
// ASCII letters and digits, with '.', '-' and '_' allowed inside.
func validName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if isAlnum(c) {
			continue
		}
		if (c == '.' || c == '-' || c == '_') && i > 0 && i < len(name)-1 {
			continue
		}
		return false
	}
	return true
}

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v'
}

// isNormalized reports whether name is already in normalised form: lower
// case letters and digits with single '-' between them.
func isNormalized(name string) bool {
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case 'a' <= c && c <= 'z' || '0' <= c && c <= '9':
		case c == '-' && i > 0 && i < len(name)-1 && name[i-1] != '-':
		default:
			return false
		}
	}
	return true
}
