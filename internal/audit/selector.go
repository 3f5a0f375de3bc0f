package audit

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// splitSelector splits a PromQL series selector into its leading metric
// name ("" when it has none) and the matchers between its braces ("" when
// it has none). It checks only the outline: a name, then at most one
// brace-enclosed list whose quoted strings may hold braces, then nothing.
// The server validates the matchers themselves.
func splitSelector(sel string) (name, matchers string, err error) {
	s := strings.TrimSpace(sel)
	if s == "" {
		return "", "", errors.New("empty selector")
	}
	i := 0
	for i < len(s) && isNameByte(s[i], i == 0) {
		i++
	}
	name = s[:i]
	rest := strings.TrimSpace(s[i:])
	if rest == "" {
		if name == "" {
			return "", "", fmt.Errorf("selector %q: want a metric name or {matchers}", sel)
		}
		return name, "", nil
	}
	if rest[0] != '{' {
		if name == "" {
			return "", "", fmt.Errorf("selector %q: want a metric name or {matchers}", sel)
		}
		return "", "", fmt.Errorf("selector %q: unexpected %q after the metric name: a function, range or offset is not a series selector", sel, rest[:1])
	}
	end, err := closingBrace(rest)
	if err != nil {
		return "", "", fmt.Errorf("selector %q: %w", sel, err)
	}
	if tail := strings.TrimSpace(rest[end+1:]); tail != "" {
		return "", "", fmt.Errorf("selector %q: unexpected %q after }: a range, offset or function is not a series selector", sel, tail)
	}
	matchers = strings.TrimSpace(rest[1:end])
	if name == "" && matchers == "" {
		return "", "", fmt.Errorf("selector %q: no matchers", sel)
	}
	return name, matchers, nil
}

func isNameByte(c byte, first bool) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '_', c == ':':
		return true
	case c >= '0' && c <= '9':
		return !first
	}
	return false
}

// closingBrace returns the index of the brace closing s[0] == '{', skipping
// quoted strings.
func closingBrace(s string) (int, error) {
	for i := 1; i < len(s); i++ {
		switch c := s[i]; c {
		case '}':
			return i, nil
		case '{':
			return 0, errors.New("unexpected { inside the matchers")
		case '"', '\'', '`':
			j := i + 1
			for ; j < len(s); j++ {
				if s[j] == '\\' && c != '`' {
					j++
					continue
				}
				if s[j] == c {
					break
				}
			}
			if j >= len(s) {
				return 0, errors.New("unterminated string")
			}
			i = j
		}
	}
	return 0, errors.New("missing }")
}

// withName narrows a selector to one metric name. ok is false when the
// selector names another metric.
func withName(sel, name string) (narrowed string, ok bool, err error) {
	n, m, err := splitSelector(sel)
	if err != nil {
		return "", false, err
	}
	if n != "" && n != name {
		return "", false, nil
	}
	var b strings.Builder
	b.WriteString(`{__name__=`)
	b.WriteString(strconv.Quote(name))
	if m != "" {
		b.WriteString(", ")
		b.WriteString(m)
	}
	b.WriteByte('}')
	return b.String(), true, nil
}
