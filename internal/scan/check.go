package scan

import (
	"fmt"
	"os"
)

// This file checks the contents of each kind of file against the database.

func (s *scanner) installed(path string) {
	f, err := os.Open(path)
	if err != nil {
		s.problem(path, 0, unwrapPathError(err))
		return
	}
	defer f.Close()
	s.res.FilesRead++
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

func (s *scanner) uvLock(path string, data []byte) {
	pkgs, warning, err := parseUVLock(data)
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
			if h.affected.Contains(v, true) {
				s.add(h.lockedInUV(path, p.Line, p.Version))
			}
		}
	}
}

func (s *scanner) requirements(path string, data []byte) {
	reqs, errs := parseRequirementsFile(data)
	for _, e := range errs {
		s.problem(path, e.Line, e.Msg)
	}
	for _, r := range reqs {
		s.requirement(path, r.Line, r.Requirement, "", Specifier{})
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
}

// requirement checks one requirement. A requirements-file line that pins a
// single version (== without a wildcard, or ===) is a lock; anything else is
// a manifest specifier, checked with the constraints that narrow it.
func (s *scanner) requirement(path string, line int, r Requirement, section string, constraints Specifier) {
	hazards := s.db.lookup(r.NormalizedName())
	if len(hazards) == 0 || r.URL != "" {
		return // a direct reference names no version to judge
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
	effective := r.Specifier.And(constraints)
	for _, h := range hazards {
		if v, ok := s.admittedBy(h, effective); ok {
			s.add(h.admits(path, line, r, section, v))
		}
	}
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
		s.admits[key] = r
	}
	return r.v, r.ok
}
