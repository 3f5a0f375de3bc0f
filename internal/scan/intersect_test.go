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
		if ok && !(hz.affected.Contains(w, true) && spec.Contains(w, false)) {
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
