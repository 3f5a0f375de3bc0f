package scan

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// poetryConstraint translates a Poetry version constraint into PEP 440
// specifiers, one per ||-separated alternative, as poetry-core's
// parse_constraint reads it:
//
//	*, ""            any version
//	^1.2.3           >=1.2.3,<2     (the first non-zero part is bumped;
//	^0.2.3           >=0.2.3,<0.3    with only zeros, the last given one)
//	~1.2.3, ~1.2     >=1.2.3,<1.3 / >=1.2,<1.3;  ~1: >=1,<2
//	1.2.3, =1.2.3    ==1.2.3;  1.2.*: ==1.2.*
//	>=1.2,<2.0 or ">=1.2 <2.0"  every comparison applies (PEP 440 operators)
//
// Anything else (hyphen ranges, "x" wildcards, ...) is an error, which the
// scan reports as not judged.
func poetryConstraint(s string) ([]Specifier, error) {
	var alts []Specifier
	for alt := range strings.SplitSeq(s, "||") {
		spec, err := poetryAlternative(alt)
		if err != nil {
			return nil, err
		}
		alts = append(alts, spec)
	}
	return alts, nil
}

func poetryAlternative(s string) (Specifier, error) {
	// Join an operator to its version ("> = 1.0" does not occur, ">= 1.0"
	// does), then split the comparisons at commas and spaces.
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		b.WriteByte(c)
		if strings.IndexByte("<>=!~^", c) >= 0 {
			for i+1 < len(s) && s[i+1] == ' ' {
				i++
			}
		}
	}
	var clauses []string
	for part := range strings.FieldsFuncSeq(b.String(), func(r rune) bool { return r == ',' || r == ' ' || r == '\t' }) {
		c, err := poetryClause(part)
		if err != nil {
			return Specifier{}, err
		}
		if c != "" {
			clauses = append(clauses, c)
		}
	}
	return ParseSpecifier(strings.Join(clauses, ","))
}

func poetryClause(p string) (string, error) {
	switch {
	case p == "*":
		return "", nil
	case strings.HasPrefix(p, "^"):
		return caretRange(p[1:])
	case strings.HasPrefix(p, "~="):
		return p, nil
	case strings.HasPrefix(p, "~"):
		return tildeRange(p[1:])
	case strings.HasPrefix(p, "=="), strings.HasPrefix(p, "!="), strings.HasPrefix(p, ">="),
		strings.HasPrefix(p, "<="), strings.HasPrefix(p, ">"), strings.HasPrefix(p, "<"):
		return p, nil
	case strings.HasPrefix(p, "="):
		return "=" + p, nil
	case p != "" && isDigit(p[0]):
		return "==" + p, nil
	}
	return "", fmt.Errorf("constraint %s is not one doubletake translates", excerpt(p))
}

// releaseParts returns the numeric release parts of a version written in a
// caret or tilde constraint.
func releaseParts(v string) ([]uint64, error) {
	if _, err := ParseVersion(v); err != nil {
		return nil, err
	}
	var nums []uint64
	for f := range strings.SplitSeq(v, ".") {
		n, err := strconv.ParseUint(f, 10, 32)
		if err != nil {
			break // a pre-, post- or dev part ends the release
		}
		nums = append(nums, n)
	}
	if len(nums) == 0 {
		return nil, errors.New("no release number")
	}
	return nums, nil
}

func joinParts(nums []uint64) string {
	s := make([]string, len(nums))
	for i, n := range nums {
		s[i] = strconv.FormatUint(n, 10)
	}
	return strings.Join(s, ".")
}

func caretRange(v string) (string, error) {
	nums, err := releaseParts(v)
	if err != nil {
		return "", fmt.Errorf("^%s: %w", v, err)
	}
	i := 0
	for i < len(nums)-1 && nums[i] == 0 {
		i++
	}
	upper := append(append([]uint64(nil), nums[:i]...), nums[i]+1)
	return fmt.Sprintf(">=%s,<%s", v, joinParts(upper)), nil
}

func tildeRange(v string) (string, error) {
	nums, err := releaseParts(v)
	if err != nil {
		return "", fmt.Errorf("~%s: %w", v, err)
	}
	var upper []uint64
	if len(nums) == 1 {
		upper = []uint64{nums[0] + 1}
	} else {
		upper = []uint64{nums[0], nums[1] + 1}
	}
	return fmt.Sprintf(">=%s,<%s", v, joinParts(upper)), nil
}
