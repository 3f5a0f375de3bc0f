package scan

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

func fastapiHazard(t testing.TB) *Hazard {
	t.Helper()
	hs, err := BuiltinHazards()
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hs {
		if h.name == "fastapi" {
			return h
		}
	}
	t.Fatal("no fastapi hazard in the built-in database")
	return nil
}

func TestAdmittedBy(t *testing.T) {
	h := fastapiHazard(t)
	tests := []struct {
		spec    string
		witness string // "" when the specifier admits no affected version
	}{
		{"", "0.142.0"},
		{">=0.135", "0.142.0"},
		{">=0.135,!=0.142.*", ""},
		{">=0.135,<0.142", ""},
		{">=0.135,<0.142.0", ""},
		{">=0.135,<0.142.1", "0.142.0"},
		{">=0.142.3", "0.142.3"},
		{">0.142.4", "0.142.4.1"}, // no known release, but 0.142.5 would be affected
		{">=0.143", ""},
		{"==0.142.2", "0.142.2"},
		{"==0.142.*", "0.142.0"},
		{"~=0.141.0", ""},
		{"~=0.142.1", "0.142.1"},
		{"~=0.141", "0.142.0"},
		{"<0.142.0", ""},
		{"<0.142.0rc1", ""},
		{"<=0.142.0", "0.142.0"},
		{"!=0.142.0,!=0.142.1,!=0.142.2,!=0.142.3,!=0.142.4,<0.143", "0.142.0.1"},
		{"==0.142.0,!=0.142.*", ""},
		{">=1!0.1", ""}, // epoch 1 sorts above every epoch-0 release
		{"===0.142.1", "0.142.1"},
		{"===0.142.1.0", "0.142.1.0"}, // a release spelt exactly so would be affected
		{"===0.143.0", ""},
		{">=0.143.0rc1", ""},
		{">=0.142.0rc1,<0.142.0", ""}, // only pre-releases of 0.142.0, below the range
		// Between post-releases (issue 14): no final release lies there.
		{">0.142.4.post1,<0.142.4.post3", "0.142.4.post2"},
		{">=0.142.4.post1,<0.142.4.post2", "0.142.4.post1"},
		{">0.142.4.post1,<0.142.4.post2", ""}, // only 0.142.4.post2's dev releases, and they are pre-releases
		{">0.142.4,<0.142.4.post3", ""},       // >V leaves out V's post-releases
		{">0.142.3.post0,<0.142.3.post2", "0.142.3.post1"},
		{">=0.142.4.post1,<0.142.4.1", "0.142.4.0.1"}, // a final release, preferred
		{"<=0.142.0.post0,>0.142.0", ""},              // >0.142.0 leaves out 0.142.0.post0
		{"==0.142.1.0.0.5", "0.142.1.0.0.5"},          // a long release
		{">0.142.1,<0.142.1.0.0.1", "0.142.1.0.0.0.1"},
		{">0.142.1,<0.142.1.0.0.0", ""}, // 0.142.1.0.0.0 is 0.142.1
		{">0.142.1.post9,<0.142.1.post10.dev0", ""},
		{">0.142.1.post9,<=0.142.1.post10", "0.142.1.post10"},
		{">=0.142.2a1,<0.142.2", ""}, // pre-releases, and the specifier names one: but <V leaves out V's
		{">=0.142.2a1,<0.142.2.post1", "0.142.2"},
	}
	for _, tt := range tests {
		v, ok := h.admittedBy(mustSpecifier(t, tt.spec))
		got := ""
		if ok {
			got = v.String()
		}
		if got != tt.witness {
			t.Errorf("admittedBy(%q) = %q, want %q", tt.spec, got, tt.witness)
		}
	}
}

func TestAdmittedByPreReleases(t *testing.T) {
	// A hazard that only hits pre-releases is admitted only by specifiers
	// that name a pre-release: resolvers skip pre-releases otherwise. (Note
	// that ">=2.0rc1,<2.0" would be empty: <2.0 excludes 2.0's pre-releases.)
	hs, err := ParseHazards([]byte(`
hazards:
  - package: demo
    affected: ">=2.0rc1,<2.0rc3"
    versions: [2.0rc1, 2.0rc2]
    fixed: "2.0"
    exclusion: ">=2.0"
    effect: doubles spans
    reference: demo#1
`), "test")
	if err != nil {
		t.Fatal(err)
	}
	h := hs[0]
	for spec, want := range map[string]bool{
		">=1.0":      false,
		">=2.0rc1":   true,
		"==2.0rc2":   true,
		">=1.0,<3":   false,
		">=2.0.dev0": true,
	} {
		if _, got := h.admittedBy(mustSpecifier(t, spec)); got != want {
			t.Errorf("admittedBy(%q) = %v, want %v", spec, got, want)
		}
	}
}

// TestAdmitsMatchesBruteForce checks the candidate method of admittedBy
// against an exhaustive search: for random specifiers over a grid of
// releases, whenever some grid release is both affected and allowed,
// admittedBy must find a witness, and every witness it finds must really be
// both.
func TestAdmitsMatchesBruteForce(t *testing.T) {
	var grid []Version
	var gridStr []string
	for minor := 140; minor <= 144; minor++ {
		gridStr = append(gridStr, fmt.Sprintf("0.%d", minor))
		for patch := 0; patch <= 6; patch++ {
			gridStr = append(gridStr, fmt.Sprintf("0.%d.%d", minor, patch))
			gridStr = append(gridStr, fmt.Sprintf("0.%d.%d.post1", minor, patch))
		}
	}
	for _, s := range gridStr {
		grid = append(grid, mustVersion(t, s))
	}
	ops := []string{"==", "!=", ">=", "<=", ">", "<", "~=", "==*", "!=*"}
	rng := rand.New(rand.NewPCG(1, 2))
	randClause := func() string {
		op := ops[rng.IntN(len(ops))]
		minor := 139 + rng.IntN(7)
		switch op {
		case "==*", "!=*":
			return fmt.Sprintf("%s0.%d.*", op[:2], minor)
		case "~=":
			if rng.IntN(2) == 0 {
				return fmt.Sprintf("~=0.%d", minor)
			}
		}
		if op != "~=" && rng.IntN(8) == 0 {
			return fmt.Sprintf("%s0.%d.%d.post1", op, minor, rng.IntN(8))
		}
		return fmt.Sprintf("%s0.%d.%d", op, minor, rng.IntN(8))
	}
	randSpec := func(n int) string {
		parts := make([]string, 1+rng.IntN(n))
		for i := range parts {
			parts[i] = randClause()
		}
		return strings.Join(parts, ",")
	}
	h := fastapiHazard(t)
	checked := 0
	for range 1500 {
		// Random hazards too, so that the property does not hinge on one range.
		affected := mustSpecifier(t, randSpec(2))
		hz := &Hazard{affected: affected}
		spec := mustSpecifier(t, randSpec(3))
		if rng.IntN(4) == 0 {
			hz = h
		}
		brute := ""
		for _, v := range grid {
			if hz.affected.Contains(v, true) && spec.Contains(v, false) {
				brute = v.String()
				break
			}
		}
		w, ok := hz.admittedBy(spec)
		if ok && (!hz.affected.Contains(w, true) || !spec.Contains(w, false)) {
			t.Fatalf("affected %q, spec %q: witness %s is not in both", hz.affected, spec, w)
		}
		if brute != "" && !ok {
			t.Fatalf("affected %q, spec %q: brute force finds %s, admittedBy finds nothing", hz.affected, spec, brute)
		}
		if brute != "" {
			checked++
		}
	}
	t.Logf("%d of 1500 random cases intersect on the grid", checked)
	if checked < 150 {
		t.Fatalf("only %d intersecting cases: the generator is too narrow", checked)
	}
}

// TestAdmitsExact checks admittedBy against an independent oracle: for
// random hazards and specifiers over the whole PEP 440 ordering (epochs,
// pre-, post-, dev and local versions, wildcards, ~= and ===), it
// enumerates a fixed grid of versions around every bound the generator can
// name, checks each with the specifiers' own Contains, and requires that
// admittedBy finds a witness exactly when the grid holds one, and that its
// witness is in both.
func TestAdmitsExact(t *testing.T) {
	releases := []string{"0", "0.141", "0.141.9", "0.142", "0.142.0.1", "0.142.1", "0.142.3", "0.142.4",
		"0.142.4.0.1", "0.142.4.1", "0.142.5", "0.143", "0.143.0.1", "0.144", "1!0.142.4", "1!0.142.4.1", "1!0.143", "2!0"}
	suffixes := []string{"", "a0", "a1", "a2", "b1", "rc0", "rc1", "rc2", "rc3", ".post0", ".post1", ".post2", ".post3",
		".post4", ".dev0", ".dev1", ".dev2", ".dev3", "a1.post1", "a1.dev1", "rc1.post1", "rc2.dev0", "rc2.dev1",
		".post1.dev1", ".post1.dev2", ".post2.dev0", ".post2.dev3", ".post3.dev1", "+loc", ".post2+loc", "a1+loc"}
	var grid []Version
	for _, r := range releases {
		for _, sfx := range suffixes {
			grid = append(grid, mustVersion(t, r+sfx))
		}
	}

	// The generator names versions from the same neighbourhood.
	clauseReleases := []string{"0.142", "0.142.4", "0.142.4", "0.142.4", "0.142.4.1", "1!0.142.4"}
	clauseSuffixes := []string{"", "", "", "a1", "rc1", "rc2", ".post1", ".post3", ".dev1", "a1.post1", ".post1.dev2", "rc2.dev1"}
	rng := rand.New(rand.NewPCG(14, 440))
	pick := func(xs []string) string { return xs[rng.IntN(len(xs))] }
	randClause := func() string {
		r := pick(clauseReleases)
		switch op := pick([]string{"==", "!=", "<", "<=", ">", ">=", "~=", "==*", "!=*", "===", "==+"}); op {
		case "==*", "!=*":
			return op[:2] + r + ".*"
		case "~=":
			if !strings.Contains(r, ".") {
				r += ".0"
			}
			return op + r + pick(clauseSuffixes)
		case "===":
			return op + r + pick(clauseSuffixes)
		case "==+":
			return "==" + r + "+loc"
		default:
			return op + r + pick(clauseSuffixes)
		}
	}
	randSpec := func(n int) Specifier {
		for {
			parts := make([]string, 1+rng.IntN(n))
			for i := range parts {
				parts[i] = randClause()
			}
			if s, err := ParseSpecifier(strings.Join(parts, ",")); err == nil {
				return s
			}
		}
	}
	const cases = 1000
	both := 0
	for range cases {
		hz := &Hazard{affected: randSpec(2)}
		spec := randSpec(3)
		oracle := ""
		for _, v := range grid {
			if hz.affected.Contains(v, true) && spec.Contains(v, false) {
				oracle = v.String()
				break
			}
		}
		w, ok := hz.admittedBy(spec)
		if ok && (!hz.affected.Contains(w, true) || !spec.Contains(w, false)) {
			t.Fatalf("affected %q, spec %q: witness %s is not in both", hz.affected, spec, w)
		}
		if oracle != "" && !ok {
			t.Fatalf("affected %q, spec %q: the oracle finds %s, admittedBy finds nothing", hz.affected, spec, oracle)
		}
		if oracle != "" {
			both++
		}
	}
	t.Logf("%d of %d random cases intersect on the grid", both, cases)
	if both < cases/10 {
		t.Fatalf("only %d intersecting cases: the generator is too narrow", both)
	}
}
