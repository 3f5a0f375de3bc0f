package scan

import (
	"context"
	"strings"
	"testing"
)

// TestScopeMatcher: a scope named after a hazard's package (as written
// or normalised) with an affected release is matched, listed or not; any
// other scope, version, or a nil matcher, is not.
func TestScopeMatcher(t *testing.T) {
	m := NewScopeMatcher(builtinDB(t))
	for _, c := range []struct {
		name, version string
		want          string // the release named, "" for none
	}{
		{"fastapi", "0.142.4", "fastapi 0.142.4"},
		{"fastapi", "0.142.0", "fastapi 0.142.0"},
		{"FastAPI", "0.142.2", "fastapi 0.142.2"},
		{"fastapi", "0.142.5", "fastapi 0.142.5"},                // not listed, inside affected
		{"fastapi", "0.142.4.post1", "fastapi 0.142.4.post1"},    // likewise
		{"fastapi", " 0.142.4 ", "fastapi 0.142.4"},              // parsed as pip reads it
		{"fastapi", "0.143.0", ""},                               // the fix
		{"fastapi", "0.143.5", ""},                               // auto-configure opted in: no hazard in the release
		{"fastapi", "0.141.9", ""},                               // before
		{"opentelemetry.instrumentation.fastapi", "0.142.4", ""}, // contrib's scope
		{"opentelemetry.instrumentation.fastapi", "0.59b0", ""},  // contrib's scope
		{"fastapi", "", ""},                                      // no version
		{"", "0.142.4", ""},                                      // no name
		{"fastapi", "not a version", ""},                         // garbage
		{"fastapi", "0.142.4\x1b[2J", ""},                        // hostile
		{"fast api", "0.142.4", ""},                              // not a distribution name
		{"fastapi", "0.142." + strings.Repeat("1", 100), ""},     // too long to be one
		{strings.Repeat("f", 200), "0.142.4", ""},                // likewise
		{"seed", "0.142.4", ""},                                  // the app's own scope
	} {
		f := m.Match(c.name, c.version)
		got := ""
		if f != nil {
			got = f.Release()
			if f.Kind != KindInstalled || f.Path != "" || f.Package != "fastapi" || f.Reference != "fastapi/fastapi#16476" {
				t.Errorf("Match(%q, %q) = %+v", c.name, c.version, f)
			}
		}
		if got != c.want {
			t.Errorf("Match(%q, %q) names %q, want %q", c.name, c.version, got, c.want)
		}
	}
	var nilMatcher *ScopeMatcher
	if f := nilMatcher.Match("fastapi", "0.142.4"); f != nil {
		t.Errorf("a nil matcher matched %+v", f)
	}
	if BuiltinScopeMatcher() == nil || BuiltinScopeMatcher().Match("fastapi", "0.142.4") == nil {
		t.Error("the built-in matcher does not match fastapi 0.142.4")
	}
}

// TestScopeBriefAdvisesAsVerify: the gateway's line for copies under a
// release's scope gives the advice verify's line gives for the release
// installed, word for word, and what the release is known to do.
func TestScopeBriefAdvisesAsVerify(t *testing.T) {
	db := builtinDB(t)
	r := Scan(context.Background(), db, "testdata/tree/envs/bad")
	if len(r.Findings) != 1 || r.Findings[0].Kind != KindInstalled {
		t.Fatalf("findings %+v, want fastapi 0.142.2 installed", r.Findings)
	}
	verify := r.Findings[0].Brief("WHERE")
	f := NewScopeMatcher(db).Match("fastapi", "0.142.2")
	if f == nil {
		t.Fatal("fastapi 0.142.2 not matched")
	}
	const want = "copies from fastapi 0.142.2 (known to attach a second exporter when OTEL_EXPORTER_OTLP_ENDPOINT is set): " +
		"upgrade to fastapi>=0.143.0 (pip install 'fastapi>=0.143.0') and restart what runs from this environment"
	if got := f.ScopeBrief(); got != want {
		t.Errorf("ScopeBrief\n  %s\nwant\n  %s", got, want)
	}
	if _, fix, _ := strings.Cut(verify, "): "); !strings.HasSuffix(f.ScopeBrief(), "): "+fix) {
		t.Errorf("the gateway's line\n  %s\ndoes not end with verify's advice\n  %s", f.ScopeBrief(), fix)
	}
	if f.Fix != r.Findings[0].Fix || f.Summary != r.Findings[0].Summary {
		t.Errorf("fix %q, summary %q; verify's %q, %q", f.Fix, f.Summary, r.Findings[0].Fix, r.Findings[0].Summary)
	}
}

// TestScopeMatchListedAllocatesNothing: the gateway matches a copy's scope
// on its judging path: a listed release, and a scope of no hazard's
// package, cost no allocation.
func TestScopeMatchListedAllocatesNothing(t *testing.T) {
	m := NewScopeMatcher(builtinDB(t))
	for _, c := range [][2]string{{"fastapi", "0.142.4"}, {"seed", "1.0"}, {"opentelemetry-instrumentation-fastapi", "0.59b0"}} {
		if n := testing.AllocsPerRun(100, func() { m.Match(c[0], c[1]) }); n != 0 {
			t.Errorf("Match(%q, %q): %v allocations", c[0], c[1], n)
		}
	}
}

// FuzzScopeMatch: any scope name and version: no panic, and a match names
// an affected release of the package in printable text.
func FuzzScopeMatch(f *testing.F) {
	for _, s := range [][2]string{{"fastapi", "0.142.4"}, {"FastAPI", "0.142.3"}, {"fastapi", "0.142.9rc1"}, {"fastapi", "0.143"}, {"x", "\xff"}} {
		f.Add(s[0], s[1])
	}
	m := NewScopeMatcher(builtinDB(f))
	h := fastapiHazard(f)
	f.Fuzz(func(t *testing.T, name, version string) {
		r := m.Match(name, version)
		if r == nil {
			return
		}
		if normalizeName(name) != "fastapi" {
			t.Fatalf("Match(%q, %q) named %q", name, version, r.Release())
		}
		v, err := ParseVersion(r.Version)
		if err != nil || !h.affected.Contains(v, true) {
			t.Fatalf("Match(%q, %q) named version %q outside %s (%v)", name, version, r.Version, h.Affected, err)
		}
		if b := r.ScopeBrief(); strings.ContainsAny(b, "\x00\x1b\n\r") {
			t.Fatalf("ScopeBrief %q", b)
		}
	})
}
