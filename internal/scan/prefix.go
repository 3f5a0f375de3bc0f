package scan

import "strings"

// Prefix matching (==X.* and the == half of ~=), done as pypa/packaging does
// it because go-pep440-version pads releases wrongly; see pep440.go.

// prefixMatch reports whether v matches the split prefix of a ==X.* clause,
// following pypa/packaging: the candidate's public version is split like the
// prefix, its release is padded with zeros to the prefix's length, and the
// leading elements must be equal.
func prefixMatch(v Version, prefix []string) bool {
	got := splitVersion(v.v.Public())
	got = padRelease(got, releaseLen(prefix))
	if len(got) < len(prefix) {
		return false
	}
	for i := range prefix {
		if got[i] != prefix[i] {
			return false
		}
	}
	return true
}

// compatiblePrefix returns the prefix that ~=v implies: v's epoch and
// release without its last element, ignoring pre, post and dev segments.
func compatiblePrefix(v Version) []string {
	parts := splitVersion(v.v.Public())
	n := 0
	for _, p := range parts {
		if strings.HasPrefix(p, "dev") || strings.HasPrefix(p, "a") || strings.HasPrefix(p, "b") ||
			strings.HasPrefix(p, "rc") || strings.HasPrefix(p, "post") {
			break
		}
		n++
	}
	if n > 0 {
		n--
	}
	return parts[:n]
}

// splitVersion splits a canonical version into its epoch, then its
// dot-separated elements, with a release number fused to a pre-release
// ("5a4") split in two, as pypa/packaging's _version_split does.
func splitVersion(s string) []string {
	epoch := "0"
	if i := strings.LastIndexByte(s, '!'); i >= 0 {
		epoch, s = s[:i], s[i+1:]
	}
	out := []string{epoch}
	for item := range strings.SplitSeq(s, ".") {
		if n, pre, ok := splitFusedPre(item); ok {
			out = append(out, n, pre)
		} else {
			out = append(out, item)
		}
	}
	return out
}

// splitFusedPre splits "5a4", "5b1", "5c2" or "5rc1" into the number and the
// pre-release.
func splitFusedPre(s string) (string, string, bool) {
	i := 0
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	if i == 0 || i == len(s) {
		return "", "", false
	}
	rest := s[i:]
	var tail string
	switch {
	case strings.HasPrefix(rest, "rc"):
		tail = rest[2:]
	case rest[0] == 'a' || rest[0] == 'b' || rest[0] == 'c':
		tail = rest[1:]
	default:
		return "", "", false
	}
	if !allDigits(tail) {
		return "", "", false
	}
	return s[:i], rest, true
}

// releaseLen counts the leading all-digit elements of a split version.
func releaseLen(parts []string) int {
	n := 0
	for n < len(parts) && allDigits(parts[n]) {
		n++
	}
	return n
}

// padRelease pads the release (leading digit elements) of parts with "0"
// up to n elements.
func padRelease(parts []string, n int) []string {
	have := releaseLen(parts)
	if have >= n {
		return parts
	}
	out := make([]string, 0, len(parts)+n-have)
	out = append(out, parts[:have]...)
	for range n - have {
		out = append(out, "0")
	}
	return append(out, parts[have:]...)
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return false
		}
	}
	return true
}
