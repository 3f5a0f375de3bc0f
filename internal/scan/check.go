package scan

import (
	"fmt"
	"io"
)

// This file checks the contents of each kind of file against the database.

func (s *scanner) installed(path string, f io.Reader) {
	md, err := parseMetadata(f)
	if err != nil {
		s.fileError(path, fmt.Errorf("broken metadata: %w", err))
		return
	}
	hazards := s.db.lookup(normalizeName(md.Name))
	if len(hazards) == 0 {
		return
	}
	v, err := ParseVersion(md.Version)
	if err != nil {
		s.problem(path, md.VersionLine, fmt.Sprintf("broken metadata: %s: %v", md.Name, err))
		return
	}
	for _, h := range hazards {
		if h.affected.Contains(v, true) {
			s.add(h.installed(path, md.VersionLine, md.Version))
		}
	}
}

// uvLock checks a uv.lock, or a poetry.lock (same [[package]] name and
// version fields; no format version to check) when uv is false.
func (s *scanner) uvLock(path string, data []byte, uv bool) {
	pkgs, warning, err := parseUVLock(data)
	if !uv {
		warning = ""
	}
	if err != nil {
		s.fileError(path, err)
		return
	}
	if warning != "" {
		s.problem(path, 0, warning)
	}
	for _, p := range pkgs {
		hazards := s.db.lookup(normalizeName(p.Name))
		if len(hazards) == 0 {
			continue
		}
		v, err := ParseVersion(p.Version)
		if err != nil {
			s.problem(path, p.Line, fmt.Sprintf("package %s: %v", p.Name, err))
			continue
		}
		for _, h := range hazards {
			if !h.affected.Contains(v, true) {
				continue
			}
			if uv {
				s.add(h.lockedInUV(path, p.Line, p.Version))
			} else {
				s.add(h.lockedInPoetry(path, p.Line, p.Version))
			}
		}
	}
}

func (s *scanner) pyproject(path string, data []byte) {
	p, errs, err := parsePyproject(data)
	if err != nil {
		s.fileError(path, err)
		return
	}
	for _, e := range errs {
		s.problem(path, e.Line, e.Msg)
	}
	constraints := make(map[string]Specifier)
	for _, c := range p.Constraints {
		constraints[c.NormalizedName()] = constraints[c.NormalizedName()].And(c.Specifier)
	}
	overridden := make(map[string]bool)
	for _, o := range p.Overrides {
		overridden[o.NormalizedName()] = true
		s.requirement(path, o.Line, o.Requirement, o.Section, constraints[o.NormalizedName()])
	}
	for _, r := range p.Requirements {
		if overridden[r.NormalizedName()] {
			continue // uv installs what the override says instead
		}
		s.requirement(path, r.Line, r.Requirement, r.Section, constraints[r.NormalizedName()])
	}
	for _, r := range p.Poetry {
		// One finding for the first alternative that admits a hazard.
		for _, alt := range r.Alternatives {
			req := r.Requirement
			req.Specifier = alt
			if s.requirementAdmits(path, r.Line, req, r.Section, Specifier{}) {
				break
			}
		}
	}
	for _, nj := range p.NotJudged {
		s.notJudged(path, nj.Line, nj.Reason, nj.Detail)
	}
}

// requirement checks one requirement. A requirements-file line that pins a
// single version (== without a wildcard, or ===) is a lock; anything else is
// a manifest specifier, checked with the constraints that narrow it.
func (s *scanner) requirement(path string, line int, r Requirement, section string, constraints Specifier) {
	hazards := s.db.lookup(r.NormalizedName())
	if len(hazards) == 0 {
		return
	}
	if r.URL != "" {
		// A direct reference: only a wheel or sdist file name says which
		// version it is.
		req, ok := requirementFromFileName(urlFileName(r.URL))
		if !ok || req.NormalizedName() != r.NormalizedName() {
			reason := DirectURL
			if isVCS(r.URL) {
				reason = VCS
			}
			where := ""
			if section != "" {
				where = section + ": "
			}
			s.notJudged(path, line, reason, where+r.Name+" from "+excerpt(r.URL)+"; the URL names no version, not judged")
			return
		}
		r.URL, r.Specifier = "", req.Specifier
	}
	if pin, ok := r.Specifier.Pin(); ok && section == "" {
		v, err := ParseVersion(pin)
		if err != nil {
			return // === with a version that is not PEP 440
		}
		for _, h := range hazards {
			if h.affected.Contains(v, true) && constraints.Contains(v, true) {
				s.add(h.pinned(path, line, r, pin))
			}
		}
		return
	}
	s.requirementAdmits(path, line, r, section, constraints)
}

// requirementAdmits adds a finding for each hazard r's specifier, narrowed
// by constraints, admits, and reports whether there was one.
func (s *scanner) requirementAdmits(path string, line int, r Requirement, section string, constraints Specifier) bool {
	effective := r.Specifier.And(constraints)
	found := false
	for _, h := range s.db.lookup(r.NormalizedName()) {
		if v, ok := s.admittedBy(h, effective); ok {
			s.add(h.admits(path, line, r, section, v))
			found = true
		}
	}
	return found
}

type admitsKey struct {
	h    *Hazard
	spec string
}

type admitsResult struct {
	v  Version
	ok bool
}

func (s *scanner) admittedBy(h *Hazard, spec Specifier) (Version, bool) {
	key := admitsKey{h, spec.String()}
	r, hit := s.admits[key]
	if !hit {
		r.v, r.ok = h.admittedBy(spec)
		if len(s.admits) >= maxAdmitsMemo {
			clear(s.admits)
		}
		s.admits[key] = r
	}
	return r.v, r.ok
}
