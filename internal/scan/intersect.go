package scan

import (
	"slices"
	"strconv"
	"strings"
)

// Deciding whether a specifier admits a hazard means deciding whether two
// sets of versions intersect. Both are built from comparison clauses, so
// membership of a version can only change at the versions those clauses
// name. The intersection, when not empty, therefore contains one of a finite
// set of candidates: the hazard's known releases, every version a clause
// names, and the versions just around each (its release, the release with
// ".1" appended, which sorts above it and all its post-releases, and the
// release with its last number incremented, which is where a wildcard or ~=
// range ends). TestAdmitsMatchesBruteForce checks that claim against an
// exhaustive search over a grid of releases.

// candidates returns known, then the boundary versions of specs in
// ascending order, without duplicates.
func candidates(known []Version, specs ...Specifier) []Version {
	seen := make(map[string]bool, len(known)+8)
	out := make([]Version, 0, len(known)+8)
	for _, v := range known {
		if !seen[v.String()] {
			seen[v.String()] = true
			out = append(out, v)
		}
	}
	var bounds []Version
	add := func(s string) {
		v, err := ParseVersion(s)
		if err != nil || seen[v.String()] {
			return
		}
		seen[v.String()] = true
		bounds = append(bounds, v)
	}
	add("0")
	for _, s := range specs {
		for _, c := range s.clauses {
			if c.v.raw == "" {
				continue // === with a version that is not PEP 440
			}
			add(c.v.String())
			base := c.v.v.BaseVersion()
			add(base)
			add(base + ".1")
			add(bumpLast(base))
			if c.op == "~=" {
				add(joinPrefix(c.prefix, true))
			}
		}
	}
	slices.SortFunc(bounds, Version.Compare)
	return append(out, bounds...)
}

// bumpLast increments the last release number of a base version
// ("1!0.142" becomes "1!0.143"). It returns "" when it cannot.
func bumpLast(base string) string {
	i := strings.LastIndexByte(base, '.')
	head, last := base[:i+1], base[i+1:]
	if j := strings.LastIndexByte(last, '!'); j >= 0 {
		head, last = head+last[:j+1], last[j+1:]
	}
	n, err := strconv.ParseUint(last, 10, 64)
	if err != nil || n == ^uint64(0) {
		return ""
	}
	return head + strconv.FormatUint(n+1, 10)
}

// joinPrefix turns a split prefix (epoch first) back into a version,
// incrementing its last element if bump is set.
func joinPrefix(prefix []string, bump bool) string {
	if len(prefix) < 2 {
		return ""
	}
	s := strings.Join(prefix[1:], ".")
	if prefix[0] != "0" {
		s = prefix[0] + "!" + s
	}
	if bump {
		return bumpLast(s)
	}
	return s
}

// admittedBy returns an affected version that spec allows a resolver to
// pick, if there is one. Pre-releases count only when spec itself names a
// pre-release (see Specifier.Contains).
func (h *Hazard) admittedBy(spec Specifier) (Version, bool) {
	for _, v := range candidates(h.versions, h.affected, spec) {
		if h.affected.Contains(v, true) && spec.Contains(v, false) {
			return v, true
		}
	}
	return Version{}, false
}

// satisfiable returns a version that s allows, preferring the given ones.
func satisfiable(s Specifier, prefer ...Version) (Version, bool) {
	for _, v := range candidates(prefer, s) {
		if s.Contains(v, false) {
			return v, true
		}
	}
	return Version{}, false
}
