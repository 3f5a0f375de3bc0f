package scan

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Deciding whether a specifier admits a hazard means deciding whether two
// sets of versions intersect. Both are built from comparison clauses, so
// membership can only change at the versions those clauses name (and, for
// ==X.* and ~=, at the first version of a release prefix, X.dev0, and the
// first one after it). Between two adjacent such boundaries every ordered
// comparison and prefix match is constant; what still varies is the kind of
// version, because PEP 440's exclusive comparisons (>V leaves out V's
// post-releases, <V its pre-releases) and the pre-release rule single out
// kinds. So the intersection, when not empty, holds one of these candidates
// (candidates adds them all):
//
//   - every clause version as written, its public version, and its release;
//   - a final release strictly between any two boundaries with different
//     releases: a boundary's release padded with zeros to the longest
//     release named, then ".1" (above all of its post-releases, below any
//     longer release that differs at an earlier place);
//   - the nearest versions of the other kinds on either side of a boundary
//     within its release: the next and previous post-release, pre-release
//     number and dev number, the first pre-release of each later kind,
//     R.dev0, R.post0, and the prefix boundaries of wildcards and ~=.
//
// Plain final releases pass every special rule, so within a cell that has
// one, it is the best witness; a cell without one lies inside one release
// (only its pre-, post- or dev releases), and the neighbours above cover
// the first of each kind in it. TestAdmitsExact checks the claim against an
// oracle that enumerates many more versions around every bound.

var canonicalVersion = regexp.MustCompile(`^(?:(\d+)!)?(\d+(?:\.\d+)*)(?:(a|b|rc)(\d+))?(?:\.post(\d+))?(?:\.dev(\d+))?(?:\+(.*))?$`)

// candidates returns known, then the boundary versions of specs in
// ascending order, without duplicates.
func candidates(known []Version, specs ...Specifier) []Version {
	seen := make(map[string]bool, len(known)+32)
	out := make([]Version, 0, len(known)+32)
	for _, v := range known {
		if !seen[v.raw] {
			seen[v.raw] = true
			out = append(out, v)
		}
	}
	var bounds []Version
	add := func(s string) {
		if s == "" || seen[s] {
			return
		}
		v, err := ParseVersion(s)
		if err != nil {
			return
		}
		seen[s] = true
		bounds = append(bounds, v)
	}
	add("0")
	longest := 1
	for _, s := range specs {
		for _, c := range s.clauses {
			if c.v.raw != "" {
				longest = max(longest, strings.Count(c.v.v.BaseVersion(), ".")+1)
			}
		}
	}
	for _, s := range specs {
		for _, c := range s.clauses {
			if c.v.raw == "" {
				continue // === with a version that is not PEP 440
			}
			if c.op == "===" {
				add(c.version) // === compares the text
			}
			neighbours(c.v, longest, add)
			if c.op == "~=" {
				p := joinPrefix(c.prefix, false)
				add(p)
				add(p + ".dev0")
				if next := joinPrefix(c.prefix, true); next != "" {
					add(next)
					add(next + ".dev0")
				}
			}
		}
	}
	// Final releases first: they make the plainest witnesses.
	slices.SortFunc(bounds, func(a, b Version) int {
		if fa, fb := a.isFinal(), b.isFinal(); fa != fb {
			if fa {
				return -1
			}
			return 1
		}
		return a.Compare(b)
	})
	return append(out, bounds...)
}

// isFinal reports whether v is a final release: no pre-, post-, dev or
// local part.
func (v Version) isFinal() bool {
	return !v.v.IsPreRelease() && !v.v.IsPostRelease() && v.v.Local() == ""
}

// neighbours adds v and the versions around it that candidates needs.
func neighbours(v Version, longest int, add func(string)) {
	add(v.raw)
	add(v.String())
	add(v.v.Public())
	m := canonicalVersion.FindStringSubmatch(v.String())
	if m == nil {
		return
	}
	epoch, release, preL, preN, post, dev := m[1], m[2], m[3], m[4], m[5], m[6]
	base := release
	if epoch != "" {
		base = epoch + "!" + release
	}
	// The release, a final release just above all of its variants, the
	// next release, and the first version of each.
	add(base)
	add(base + ".dev0")
	add(base + ".post0")
	pad := strings.Count(release, ".") + 1
	add(base + strings.Repeat(".0", max(longest-pad, 0)) + ".1")
	if next := bumpLast(base); next != "" {
		add(next)
		add(next + ".dev0")
	}
	if prev := dropLast(base); prev != "" {
		add(prev)
		add(prev + strings.Repeat(".0", max(longest-strings.Count(prev, ".")-1, 0)) + ".1")
	}
	// The first pre-release of each kind, and the neighbours of v's own
	// pre-release number.
	for _, k := range []string{"a", "b", "rc"} {
		add(base + k + "0")
	}
	pre := ""
	if preL != "" {
		pre = preL + preN
		n := atoi(preN)
		add(base + preL + strconv.FormatUint(n+1, 10))
		if n > 0 {
			add(base + preL + strconv.FormatUint(n-1, 10))
		}
		add(base + pre)
		add(base + pre + ".post0")
		add(base + pre + ".dev0")
	}
	// Post- and dev-release neighbours, with v's pre-release kept.
	if post != "" {
		n := atoi(post)
		add(base + pre + ".post" + strconv.FormatUint(n+1, 10))
		if n > 0 {
			add(base + pre + ".post" + strconv.FormatUint(n-1, 10))
		}
		add(base + pre + ".post" + post)
		add(base + pre + ".post" + strconv.FormatUint(n+1, 10) + ".dev0")
		add(base + pre + ".post" + post + ".dev0")
	}
	if dev != "" {
		stem := base + pre
		if post != "" {
			stem += ".post" + post
		}
		n := atoi(dev)
		add(stem + ".dev" + strconv.FormatUint(n+1, 10))
		if n > 0 {
			add(stem + ".dev" + strconv.FormatUint(n-1, 10))
		}
		add(stem)
	}
}

func atoi(s string) uint64 {
	n, _ := strconv.ParseUint(s, 10, 64)
	return n
}

// dropLast decrements the last release number of a base version, if it
// is not zero ("0.142.4" becomes "0.142.3").
func dropLast(base string) string {
	i := strings.LastIndexByte(base, '.')
	j := strings.LastIndexByte(base, '!')
	head, last := base[:max(i, j)+1], base[max(i, j)+1:]
	n, err := strconv.ParseUint(last, 10, 64)
	if err != nil || n == 0 {
		return ""
	}
	return head + strconv.FormatUint(n-1, 10)
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

// satisfiable reports whether s allows some version, trying the given
// ones first.
func satisfiable(s Specifier, prefer ...Version) bool {
	for _, v := range candidates(prefer, s) {
		if s.Contains(v, false) {
			return true
		}
	}
	return false
}
