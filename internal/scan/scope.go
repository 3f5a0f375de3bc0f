package scan

import (
	"fmt"
	"sync"
)

// A release that exports twice often says so in the telemetry itself:
// FastAPI 0.142.x records its own spans and log records under the
// instrumentation scope "fastapi" with its version, so the copies a
// gateway drops carry the release's name. ScopeMatcher names them from
// the same hazard database scan and verify read, with the advice verify
// gives for an installed release.

// maxScopeName and maxScopeVersion bound what Match looks at: a longer
// scope name or version names no distribution release (PEP 440 versions
// and PEP 508 names are short), and is not parsed.
const (
	maxScopeName    = 128
	maxScopeVersion = 64
)

// ScopeMatcher matches instrumentation scopes (name, version) against a
// hazard database. It holds no state that grows: the findings of the
// releases each hazard lists (versions:) are made once, when it is built;
// another version inside a hazard's affected range is matched by parsing
// and its finding made for the call. It is safe for concurrent use.
type ScopeMatcher struct {
	byName map[string][]*Hazard  // PEP 503 normalised package name
	listed map[scopeKey]*Finding // the hazards' listed versions, as written and normalised
}

type scopeKey struct{ name, version string }

// NewScopeMatcher returns a matcher of db's hazards.
func NewScopeMatcher(db *DB) *ScopeMatcher {
	m := &ScopeMatcher{byName: map[string][]*Hazard{}, listed: map[scopeKey]*Finding{}}
	for name, hs := range db.byName {
		m.byName[name] = hs
		for _, h := range hs {
			for i, v := range h.versions {
				f := h.scopeFinding(h.Versions[i])
				k := scopeKey{name, v.String()}
				if _, ok := m.listed[k]; !ok {
					m.listed[k] = &f
				}
				if raw := h.Versions[i]; raw != k.version {
					m.listed[scopeKey{name, raw}] = &f
				}
			}
		}
	}
	return m
}

// BuiltinScopeMatcher is the matcher of the built-in hazard database,
// made once. It is nil only if that database does not parse, which its
// tests rule out.
var BuiltinScopeMatcher = sync.OnceValue(func() *ScopeMatcher {
	hs, err := BuiltinHazards()
	if err != nil {
		return nil
	}
	return NewScopeMatcher(NewDB(hs...))
})

// Match returns the finding for a scope whose name is a package of the
// database and whose version is one of its affected releases: a finding
// of kind installed without a path (Package, Version, the hazard's
// fields, and Fix, verify's advice for the installed release), or nil.
// A listed release is found without allocating; a nil matcher matches
// nothing.
func (m *ScopeMatcher) Match(name, version string) *Finding {
	if m == nil || name == "" || version == "" || len(name) > maxScopeName || len(version) > maxScopeVersion {
		return nil
	}
	hs, ok := m.byName[name]
	if !ok {
		if isNormalized(name) || !validName(name) {
			return nil
		}
		name = normalizeName(name)
		if hs, ok = m.byName[name]; !ok {
			return nil
		}
	}
	if f, ok := m.listed[scopeKey{name, version}]; ok {
		return f
	}
	v, err := ParseVersion(version)
	if err != nil {
		return nil
	}
	for _, h := range hs {
		if h.affected.Contains(v, true) {
			f := h.scopeFinding(v.String())
			return &f
		}
	}
	return nil
}

// scopeFinding is the finding for release version of h seen as a
// scope: what scan says of it installed, without a path.
func (h *Hazard) scopeFinding(version string) Finding {
	return h.installed("", 0, version)
}

// Release is the release f names, "fastapi 0.142.4", escaped and cut as
// the text output's fields are.
func (f Finding) Release() string {
	return safeText(f.Package+" "+f.Version, maxTextField)
}

// ScopeBrief is f in one line for copies received under the release's
// instrumentation scope (a gateway's status page, summary and warning):
// the release, what it is known to do and f.Fix, the advice verify gives
// for the release installed, e.g.
//
//	copies from fastapi 0.142.4 (known to attach a second exporter when
//	OTEL_EXPORTER_OTLP_ENDPOINT is set): upgrade to fastapi>=0.143.0 (pip
//	install 'fastapi>=0.143.0') and restart what runs from this environment
func (f Finding) ScopeBrief() string {
	known := "known to make telemetry arrive twice, " + f.Reference
	if f.Summary != "" {
		known = "known to " + f.Summary
	}
	return fmt.Sprintf("copies from %s (%s): %s", f.Release(), safeText(known, maxTextField), safeText(f.Fix, 2*maxTextField))
}
