package scan

import (
	"testing"

	pep440 "github.com/aquasecurity/go-pep440-version"
)

func mustVersion(t testing.TB, s string) Version {
	t.Helper()
	v, err := ParseVersion(s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func mustSpecifier(t testing.TB, s string) Specifier {
	t.Helper()
	spec, err := ParseSpecifier(s)
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

// TestVersionOrder checks the ordering example of PEP 440 ("Summary of
// permitted suffixes and relative ordering"), plus epochs.
func TestVersionOrder(t *testing.T) {
	order := []string{
		"1.dev0", "1.0.dev456", "1.0a1", "1.0a2.dev456", "1.0a12.dev456", "1.0a12",
		"1.0b1.dev456", "1.0b2", "1.0b2.post345.dev456", "1.0b2.post345", "1.0rc1.dev456",
		"1.0rc1", "1.0", "1.0+abc.5", "1.0+abc.7", "1.0+5", "1.0.post456.dev34", "1.0.post456",
		"1.0.15", "1.1.dev1", "2013.10", "1!0.1", "1!1.0",
	}
	for i := range order {
		for j := range order {
			want := 0
			switch {
			case i < j:
				want = -1
			case i > j:
				want = 1
			}
			if got := mustVersion(t, order[i]).Compare(mustVersion(t, order[j])); got != want {
				t.Errorf("Compare(%s, %s) = %d, want %d", order[i], order[j], got, want)
			}
		}
	}
}

func TestParseVersionNormalises(t *testing.T) {
	for in, want := range map[string]string{
		"1.0":          "1.0",
		"v1.0":         "1.0",
		"V1.0":         "1.0",
		" 1.0 ":        "1.0",
		"1.0-Alpha.1":  "1.0a1",
		"1.0.c1":       "1.0rc1",
		"1.0-5":        "1.0.post5",
		"1.0rev3":      "1.0.post3",
		"1.0dev":       "1.0.dev0",
		"1!0.1":        "1!0.1",
		"1.0+Ubuntu-1": "1.0+ubuntu.1", // the library alone keeps '-'
		"0.142.0RC1":   "0.142.0rc1",
	} {
		if got := mustVersion(t, in).String(); got != want {
			t.Errorf("ParseVersion(%q) = %q, want %q", in, got, want)
		}
	}
	for _, bad := range []string{"", "1!", "foo", "1.0+", "99999999999999999999", "1.0 2.0"} {
		if _, err := ParseVersion(bad); err == nil {
			t.Errorf("ParseVersion(%q): want error", bad)
		}
	}
}

// TestSpecifierContains holds PEP 440's own examples (section "Version
// specifiers") and the cases the hazard database relies on.
func TestSpecifierContains(t *testing.T) {
	tests := []struct {
		spec, version string
		want          bool
	}{
		// Version matching, with version = 1.1.post1.
		{"==1.1", "1.1.post1", false},
		{"==1.1.post1", "1.1.post1", true},
		{"==1.1.*", "1.1.post1", true},
		// Zero padding and prefix matching.
		{"==1.1", "1.1.0", true},
		{"==1.1.0", "1.1", true},
		{"==1.1", "1.1a1", false},
		{"==1.1a1", "1.1a1", true},
		{"==1.1.*", "1.1a1", true},
		{"==1.1.*", "1.10", false},
		{"==1.*", "10.0", false},
		// Version exclusion, with version = 1.1.post1.
		{"!=1.1", "1.1.post1", true},
		{"!=1.1.post1", "1.1.post1", false},
		{"!=1.1.*", "1.1.post1", false},
		// Local versions are ignored by public specifiers.
		{"==1.0", "1.0+local", true},
		{"==1.0+abc", "1.0", false},
		{"==1.0+abc", "1.0+ABC", true},
		{"<=1.0", "1.0+abc.5", true},
		// Exclusive ordered comparisons.
		{">1.7", "1.7.post2", false},
		{">1.7", "1.7.1", true},
		{">1.7", "1.7+local", false},
		{">1.7.post2", "1.7.post3", true},
		{"<3.1", "3.1.dev0", false},
		{"<3.1", "3.0.dev0", true},
		{"<3.1", "3.1rc1", false},
		// Compatible release: ~=V.N is >=V.N, ==V.*.
		{"~=2.2", "2.9", true},
		{"~=2.2", "3.0", false},
		{"~=2.2.post3", "2.9", true},
		{"~=2.2.post3", "2.2", false},
		{"~=1.4.5", "1.4.9", true},
		{"~=1.4.5", "1.5.0", false},
		{"~=2.2.0", "2.2.1", true},
		{"~=2.2.0", "2.3", false},
		{"~=1.4.5.0", "1.4.5.1", true},
		{"~=1.4.5.0", "1.4.6", false},
		// Epochs.
		{">=1.0", "1!0.1", true},
		{"<2", "1!0.1", false},
		{"==1!0.*", "1!0.1", true},
		{"==1!0.*", "0.1", false},
		{"!=1!0.1", "1!0.1", false},
		{"~=1!1.0", "1!1.1", true},
		{"~=1!1.0", "1.1", false},
		// Arbitrary equality compares strings.
		{"===2.0", "2.0", true},
		{"===2.0", "2.0.0", false},
		{"===foobar", "1.0", false}, // accepted, though no PEP 440 version matches it
		// Whitespace, case.
		{">= 1.0 , < 2", "1.5", true},
		{">=V1.0RC1", "1.0", true},
		// The hazard.
		{">=0.142.0,<0.143.0", "0.142.2", true},
		{">=0.142.0,<0.143.0", "0.142.4", true},
		{">=0.142.0,<0.143.0", "0.141.9", false},
		{">=0.142.0,<0.143.0", "0.143.0", false},
		{">=0.142.0,<0.143.0", "0.143.0rc1", false}, // <V excludes V's pre-releases
		{"==0.142.*", "0.142.3", true},
		{"==0.142.*", "0.142", true},
		{"==0.142.*", "0.1420", false},
		{"!=0.142.*", "0.142.3", false},
		{"!=0.142.*", "0.143.0", true},
		{">=0.135,!=0.142.*", "0.142.3", false},
		{">=0.135,!=0.142.*", "0.141.9", true},
		{">=0.135,!=0.142.*", "0.143.0", true},
		{"", "0.142.0", true},
	}
	for _, tt := range tests {
		got := mustSpecifier(t, tt.spec).Contains(mustVersion(t, tt.version), true)
		if got != tt.want {
			t.Errorf("%q contains %s = %v, want %v", tt.spec, tt.version, got, tt.want)
		}
	}
}

// TestLibraryWorkarounds covers the cases go-pep440-version v0.0.1 gets
// wrong and the wrapper gets right. Each row logs the library's own answer,
// so a fixed library shows up in -v output.
func TestLibraryWorkarounds(t *testing.T) {
	tests := []struct {
		spec, version string
		want          bool
	}{
		{"~=1.4.5a4", "1.4.6", true}, // PEP 440: ~=1.4.5a4 is >=1.4.5a4, ==1.4.*
		{"~=1.4.5a4", "1.4.5", true},
		{"~=1.4.5a4", "1.5.0", false},
		{"==1.0.*", "1", true}, // release padded with zeros
		{"==1.2.0.*", "1.2", true},
		{"!=1.2.0.*", "1.2", false},
		{"==1!1.0.0.*", "1!1.0", true},
		{"==0!1.*", "1.0", true}, // an explicit zero epoch is the default epoch
		{"==1.0+ubuntu.1", "1.0+ubuntu-1", true},
		{">=V1.0", "1.0", true},
	}
	for _, tt := range tests {
		got := mustSpecifier(t, tt.spec).Contains(mustVersion(t, tt.version), true)
		if got != tt.want {
			t.Errorf("%q contains %s = %v, want %v", tt.spec, tt.version, got, tt.want)
		}
		lib := "error"
		if s, err := pep440.NewSpecifiers(tt.spec); err == nil {
			if v, err := pep440.Parse(tt.version); err == nil {
				lib = map[bool]string{true: "true", false: "false"}[s.Check(v)]
			}
		}
		t.Logf("%-16s %-14s wrapper=%v library=%s", tt.spec, tt.version, got, lib)
	}
}

// TestPreReleasePolicy documents the pre-release rule: a specifier that names
// no pre-release excludes them when asking what a resolver may pick
// (includePre=false); installed or locked versions are judged with
// includePre=true because they are already present.
func TestPreReleasePolicy(t *testing.T) {
	tests := []struct {
		spec, version     string
		resolve, presence bool
	}{
		{">=0.142.0", "0.142.0rc1", false, false}, // rc1 sorts before 0.142.0
		{">=0.142.0", "0.143.0rc1", false, true},  // excluded unless present
		{">=0.142.0", "0.143.0.dev1", false, true},
		{">=0.142.0rc1", "0.143.0rc1", true, true}, // the specifier names a pre-release
		{"==0.142.*", "0.142.1rc1", false, true},
		{"", "0.142.1rc1", false, true},
		{"!=0.142.0rc1", "0.143.0rc1", false, true}, // != does not opt in
		{">=0.142.0,<0.143.0", "0.142.5rc1", false, true},
	}
	for _, tt := range tests {
		spec, v := mustSpecifier(t, tt.spec), mustVersion(t, tt.version)
		if got := spec.Contains(v, false); got != tt.resolve {
			t.Errorf("%q contains %s (resolve) = %v, want %v", tt.spec, tt.version, got, tt.resolve)
		}
		if got := spec.Contains(v, true); got != tt.presence {
			t.Errorf("%q contains %s (present) = %v, want %v", tt.spec, tt.version, got, tt.presence)
		}
	}
}

func TestParseSpecifierErrors(t *testing.T) {
	for _, bad := range []string{
		"1.0",                      // no operator
		">=",                       // no version
		">=1.0,",                   // empty clause
		">=1.0 <2.0",               // clauses need commas
		">=1.0||<0.5",              // not PEP 440
		">=1.0.*",                  // wildcard with an ordered comparison
		"~=1",                      // ~= needs two release numbers
		"~=1.0.*",                  //
		"==1.0+abc.*",              // wildcard with a local version
		"==1.0.dev1.*",             // wildcard with a dev release
		">1.0+abc",                 // local version in an ordered comparison
		"=1.0",                     // not an operator
		"===foo bar",               // one word
		">=1.0;x",                  // garbage
		"==0.142.*.*",              //
		"!=01.0.*junk",             //
		">=1.0,,<2",                //
		"~=99999999999999999999.0", //
	} {
		if _, err := ParseSpecifier(bad); err == nil {
			t.Errorf("ParseSpecifier(%q): want error", bad)
		}
	}
}

func TestSpecifierPinAndString(t *testing.T) {
	for in, want := range map[string]struct {
		pin    string
		pinned bool
		str    string
	}{
		"==0.142.0":          {"0.142.0", true, "==0.142.0"},
		"===0.142.0":         {"0.142.0", true, "===0.142.0"},
		" == 0.142.0 ":       {"0.142.0", true, "==0.142.0"},
		"==0.142.*":          {"", false, "==0.142.*"},
		">=0.135, !=0.142.*": {"", false, ">=0.135,!=0.142.*"},
		"==0.142.0,<1":       {"", false, "==0.142.0,<1"},
		"":                   {"", false, ""},
	} {
		s := mustSpecifier(t, in)
		pin, ok := s.Pin()
		if pin != want.pin || ok != want.pinned || s.String() != want.str {
			t.Errorf("%q: Pin() = %q, %v; String() = %q; want %q, %v, %q", in, pin, ok, s.String(), want.pin, want.pinned, want.str)
		}
	}
}
