package scan

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestParseRequirement(t *testing.T) {
	tests := []struct {
		in                   string
		name, spec, url, mkr string
		extras               []string
	}{
		{in: "fastapi", name: "fastapi"},
		{in: "fastapi>=0.135", name: "fastapi", spec: ">=0.135"},
		{in: "FastAPI >= 0.135 , != 0.142.*", name: "FastAPI", spec: ">=0.135,!=0.142.*"},
		{in: "fastapi[standard,all]>=0.135", name: "fastapi", spec: ">=0.135", extras: []string{"standard", "all"}},
		{in: "fastapi [ standard ] (>=0.135)", name: "fastapi", spec: ">=0.135", extras: []string{"standard"}},
		{in: `fastapi==0.142.0; python_version >= "3.9"`, name: "fastapi", spec: "==0.142.0", mkr: `python_version >= "3.9"`},
		{in: `fastapi ; sys_platform == "linux"`, name: "fastapi", mkr: `sys_platform == "linux"`},
		{in: "fastapi @ https://example.invalid/fastapi-0.142.2-py3-none-any.whl", name: "fastapi", url: "https://example.invalid/fastapi-0.142.2-py3-none-any.whl"},
		{in: `fastapi @ file:///x;y.whl ; python_version > "3"`, name: "fastapi", url: "file:///x;y.whl", mkr: `python_version > "3"`},
		{in: "zope.interface~=6.0", name: "zope.interface", spec: "~=6.0"},
		{in: "a", name: "a"},
	}
	for _, tt := range tests {
		r, err := ParseRequirement(tt.in)
		if err != nil {
			t.Errorf("ParseRequirement(%q): %v", tt.in, err)
			continue
		}
		if r.Name != tt.name || r.Specifier.String() != tt.spec || r.URL != tt.url || r.Marker != tt.mkr || !slices.Equal(r.Extras, tt.extras) {
			t.Errorf("ParseRequirement(%q) = %q %v %q %q %q", tt.in, r.Name, r.Extras, r.Specifier, r.URL, r.Marker)
		}
	}
}

func TestParseRequirementErrors(t *testing.T) {
	for _, bad := range []string{
		"", ">=1.0", "-fastapi", "fastapi-", "fastapi[", "fastapi[a b]", "fastapi>=", "fastapi 1.0",
		"fastapi(>=1.0", "fastapi (>=1.0) junk", "fastapi;", "fastapi @ ", "fastapi>=1.0 <2",
		"fastapi===a b", "fastapi @ http://a b",
	} {
		if r, err := ParseRequirement(bad); err == nil {
			t.Errorf("ParseRequirement(%q) = %+v, want error", bad, r)
		}
	}
}

func TestNormalizeName(t *testing.T) {
	for in, want := range map[string]string{
		"FastAPI":           "fastapi",
		"Friendly-Bard":     "friendly-bard",
		"FRIENDLY-BARD":     "friendly-bard",
		"friendly.bard":     "friendly-bard",
		"friendly_bard":     "friendly-bard",
		"friendly--bard":    "friendly-bard",
		"FrIeNdLy-._.-bArD": "friendly-bard",
	} {
		if got := normalizeName(in); got != want {
			t.Errorf("normalizeName(%q) = %q, want %q", in, got, want)
		}
	}
}

func itoa(n int) string {
	const digits = "0123456789"
	if n < 10 {
		return digits[n : n+1]
	}
	return itoa(n/10) + digits[n%10:n%10+1]
}

// FuzzParseRequirement checks that the requirement parser never panics,
// that what it accepts is well formed, and that formatting a parsed
// requirement and parsing it again gives the same requirement.
func FuzzParseRequirement(f *testing.F) {
	for _, s := range []string{
		"fastapi", "fastapi>=0.135,!=0.142.*", "fastapi[standard]==0.142.0; python_version >= \"3.9\"",
		"fastapi @ https://example.invalid/f.whl ; os_name == \"nt\"", "fastapi (~=0.142.1)", "a===b",
		"fastapi==0.142.0 --hash=sha256:00", "-r other.txt", "fastapi>=1!0.1.post1.dev2+local",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRequirement(s)
		if err != nil {
			return
		}
		if !validName(r.Name) || normalizeName(r.Name) == "" {
			t.Fatalf("accepted invalid name %q from %q", r.Name, s)
		}
		if r.URL != "" && !r.Specifier.IsEmpty() {
			t.Fatalf("%q: both a URL and a specifier", s)
		}
		out := r.String()
		r2, err := ParseRequirement(out)
		if err != nil {
			t.Fatalf("%q formats as %q, which does not parse: %v", s, out, err)
		}
		if r2.String() != out {
			t.Fatalf("%q formats as %q, then as %q", s, out, r2.String())
		}
		if utf8.ValidString(s) && strings.ContainsAny(r.Name, " \t\n") {
			t.Fatalf("name with whitespace: %q", r.Name)
		}
		// Evaluating the specifier must not panic either.
		for _, v := range []string{"0", "0.142.0", "1!2.0rc1.post3.dev4+x.1"} {
			r.Specifier.Contains(mustVersion(t, v), true)
			r.Specifier.Contains(mustVersion(t, v), false)
		}
	})
}

// FuzzSpecifier checks that parsing and evaluating a specifier against a
// version never panics (the library panics on inputs it did not validate),
// and that a specifier's String form parses to the same specifier.
func FuzzSpecifier(f *testing.F) {
	f.Add(">=0.142.0,<0.143.0", "0.142.2")
	f.Add("!=0.142.*", "0.142.0rc1")
	f.Add("~=1.4.5a4", "1.4.6")
	f.Add("==1!0.*", "1!0.1+local.7")
	f.Add("===foobar", "1.0.post1.dev0")
	f.Fuzz(func(t *testing.T, spec, version string) {
		s, err := ParseSpecifier(spec)
		if err != nil {
			return
		}
		s2, err := ParseSpecifier(s.String())
		if err != nil || s2.String() != s.String() {
			t.Fatalf("%q: String %q reparses as %q, %v", spec, s.String(), s2.String(), err)
		}
		v, err := ParseVersion(version)
		if err != nil {
			return
		}
		a, b := s.Contains(v, true), s2.Contains(v, true)
		if a != b {
			t.Fatalf("%q and its String form %q disagree on %s", spec, s.String(), version)
		}
		if s.Contains(v, false) && !a {
			t.Fatalf("%q: %s allowed for resolving but not when present", spec, version)
		}
		if h := (&Hazard{affected: s}); true {
			h.admittedBy(s)
		}
	})
}
