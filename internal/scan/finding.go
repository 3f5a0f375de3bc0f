package scan

import (
	"cmp"
	"fmt"
	"slices"
)

// Kind says how a file lets a hazardous release in.
type Kind string

const (
	// KindInstalled: an installed distribution (site-packages METADATA) is an
	// affected release. Processes using this environment export twice now.
	KindInstalled Kind = "installed"
	// KindLocked: a uv.lock entry or an == pin in a requirements file is an
	// affected release. The next install from it exports twice.
	KindLocked Kind = "locked"
	// KindAdmits: a manifest specifier (pyproject.toml, or an unpinned
	// requirements line) allows an affected release, which the next resolve
	// may pick.
	KindAdmits Kind = "admits"
)

// Finding is one file location that installs, locks or admits a hazard.
type Finding struct {
	Kind    Kind   `json:"kind"`
	Path    string `json:"path"`
	Line    int    `json:"line,omitempty"`
	Package string `json:"package"`
	// Version is the installed or locked version (installed, locked).
	Version string `json:"version,omitempty"`
	// Requirement is the requirement as written (locked from a requirements
	// pin, admits), Section where in a pyproject.toml it is.
	Requirement string `json:"requirement,omitempty"`
	Section     string `json:"section,omitempty"`
	// Admits is an affected version the requirement allows (admits).
	Admits string `json:"admits,omitempty"`

	Affected  string `json:"affected"`
	Effect    string `json:"effect"`
	Reference string `json:"reference"`
	// Exclusion is the hazard's exclusion with the package's name (e.g.
	// fastapi!=0.142.*); Summary its optional short effect; Fixed its
	// first good release, if there is one.
	Exclusion string `json:"exclusion"`
	Summary   string `json:"summary,omitempty"`
	Fixed     string `json:"fixed,omitempty"`

	// Suggest is the requirement to use instead (e.g.
	// fastapi>=0.135,!=0.142.*), Fix says what to do in this place. Both
	// come from the hazard entry alone (hazards.yaml): the fixed release
	// to upgrade to, the exclusion that keeps the affected ones out. scan
	// prints Fix under the finding and verify at the end of its line.
	Suggest string `json:"suggest,omitempty"`
	Fix     string `json:"fix"`
}

// Problem is a file the scan could not read or understand. The scan goes on.
type Problem struct {
	Path    string `json:"path"`
	Line    int    `json:"line,omitempty"`
	Message string `json:"message"`
}

// Reason says why the scan did not judge something.
type Reason string

const (
	// SkipOutsideRoot: a symbolic link, or a -r / -c include, that leaves
	// the scanned root. It is not followed; only its own path is reported.
	SkipOutsideRoot Reason = "outside-root"
	// SkipSpecialFile: a FIFO, socket, device or other non-regular file
	// with a name the scan reads. It is not opened.
	SkipSpecialFile Reason = "special-file"
	// Dynamic: pyproject.toml declares its dependencies dynamic (computed
	// by the build backend), so the file does not list them.
	Dynamic Reason = "dynamic"
	// UnsupportedManifest: a dependency file the scan does not read
	// (Pipfile, pdm.lock, setup.py, setup.cfg, environment.yml, ...).
	UnsupportedManifest Reason = "unsupported-manifest"
	// DirectURL: a requirement given as a URL whose file name carries no
	// version.
	DirectURL Reason = "url"
	// VCS: a requirement from a version control system (git+https://...).
	VCS Reason = "vcs"
	// LocalPath: a requirement given as a local directory or archive
	// without a version in its name, or an editable install (-e).
	LocalPath Reason = "path"
	// EnvVar: a requirements line that uses ${VARIABLE}, which pip expands
	// at install time; the scan does not read the environment.
	EnvVar Reason = "environment-variable"
	// UnsupportedSpecifier: a version constraint the scan cannot translate
	// (a Poetry constraint it does not know).
	UnsupportedSpecifier Reason = "unsupported-specifier"
)

// NotJudged is something the scan saw but could not check: it is neither a
// finding nor a problem, but the scan cannot vouch for it.
type NotJudged struct {
	Path   string `json:"path"`
	Line   int    `json:"line,omitempty"`
	Reason Reason `json:"reason"`
	Detail string `json:"detail"`
}

// Result is the outcome of a scan.
type Result struct {
	Findings  []Finding   `json:"findings"`
	NotJudged []NotJudged `json:"not_judged"`
	Problems  []Problem   `json:"problems"`
	FilesRead int         `json:"files_read"`
	// FileCapReached: the scan stopped at Options.MaxFiles; files after
	// the cap were not read.
	FileCapReached bool `json:"file_cap_reached,omitempty"`
}

func (r *Result) sort() {
	slices.SortStableFunc(r.Findings, func(a, b Finding) int {
		return cmp.Or(cmp.Compare(a.Path, b.Path), cmp.Compare(a.Line, b.Line),
			cmp.Compare(a.Package, b.Package), cmp.Compare(a.Kind, b.Kind),
			cmp.Compare(a.Reference, b.Reference))
	})
	slices.SortStableFunc(r.Problems, func(a, b Problem) int {
		return cmp.Or(cmp.Compare(a.Path, b.Path), cmp.Compare(a.Line, b.Line))
	})
	slices.SortStableFunc(r.NotJudged, func(a, b NotJudged) int {
		return cmp.Or(cmp.Compare(a.Path, b.Path), cmp.Compare(a.Line, b.Line))
	})
}

func (h *Hazard) finding(kind Kind, path string, line int) Finding {
	return Finding{
		Kind:      kind,
		Path:      path,
		Line:      line,
		Package:   h.name,
		Affected:  h.Affected,
		Effect:    h.Effect,
		Reference: h.Reference,
		Exclusion: h.Package + h.Exclusion,
		Summary:   h.Summary,
		Fixed:     h.Fixed,
	}
}

// The advice, for every kind of finding: upgrade to the fixed release
// where one is known, and keep the affected releases out of what is
// resolved (the exclusion), so that no later resolve brings them back. An
// environment already built exports twice until it is upgraded, whatever
// its manifests say.

// installed returns the finding for an installed distribution: upgrade
// it in place.
func (h *Hazard) installed(path string, line int, version string) Finding {
	f := h.finding(KindInstalled, path, line)
	f.Version = version
	if h.fixed != nil {
		f.Suggest = fmt.Sprintf("%s>=%s", h.Package, h.Fixed)
		f.Fix = fmt.Sprintf("upgrade to %s (pip install '%s') and restart what runs from this environment", f.Suggest, f.Suggest)
	} else {
		f.Suggest = h.Package + h.Exclusion
		f.Fix = fmt.Sprintf("install a release that satisfies %s (pip install '%s') and restart what runs from this environment", f.Suggest, f.Suggest)
	}
	return f
}

// lockedInUV returns the finding for a uv.lock entry: exclude the
// affected releases, then upgrade the locked one.
func (h *Hazard) lockedInUV(path string, line int, version string) Finding {
	f := h.finding(KindLocked, path, line)
	f.Version = version
	f.Suggest = h.Package + h.Exclusion
	f.Fix = fmt.Sprintf("add %q to the project's dependencies (or [tool.uv] constraint-dependencies), run uv lock --upgrade-package %s, then uv sync", f.Suggest, h.Package)
	return f
}

// lockedInPoetry returns the finding for a poetry.lock entry: the same
// as uv.lock's, with Poetry's commands.
func (h *Hazard) lockedInPoetry(path string, line int, version string) Finding {
	f := h.finding(KindLocked, path, line)
	f.Version = version
	f.Suggest = h.Package + h.Exclusion
	f.Fix = fmt.Sprintf("add %q to %s's constraint in pyproject.toml, then run poetry update %s", h.Exclusion, h.Package, h.Package)
	return f
}

// pinned returns the finding for an == pin in a requirements file.
func (h *Hazard) pinned(path string, line int, r Requirement, version string) Finding {
	f := h.finding(KindLocked, path, line)
	f.Version = version
	f.Requirement = r.String()
	if h.fixed != nil {
		spec, _ := ParseSpecifier("==" + h.Fixed)
		f.Suggest = r.withSpecifier(spec)
		f.Fix = fmt.Sprintf("pin %s and reinstall", f.Suggest)
	} else {
		f.Suggest = r.withSpecifier(h.exclusion)
		f.Fix = fmt.Sprintf("pin a release that satisfies %s and reinstall", h.Exclusion)
	}
	return f
}

// admits returns the finding for a specifier that allows version v.
func (h *Hazard) admits(path string, line int, r Requirement, section string, v Version) Finding {
	f := h.finding(KindAdmits, path, line)
	f.Requirement = r.String()
	f.Section = section
	f.Admits = v.String()
	switch {
	case hasGoodVersion(r.Specifier.And(h.exclusion), h):
		f.Suggest = r.withSpecifier(r.Specifier.And(h.exclusion))
		f.Fix = fmt.Sprintf("require %s, then re-lock and reinstall", f.Suggest)
	case h.fixed != nil:
		// Adding the exclusion would leave nothing: the specifier only
		// allows affected releases.
		spec, _ := ParseSpecifier(">=" + h.Fixed)
		f.Suggest = r.withSpecifier(spec)
		f.Fix = fmt.Sprintf("%s allows only affected releases: require %s, then re-lock and reinstall", r.Specifier, f.Suggest)
	default:
		f.Suggest = r.withSpecifier(h.exclusion)
		f.Fix = fmt.Sprintf("%s allows only affected releases: require %s, then re-lock and reinstall", r.Specifier, f.Suggest)
	}
	return f
}

// hasGoodVersion reports whether s allows some release.
func hasGoodVersion(s Specifier, h *Hazard) bool {
	var prefer []Version
	if h.fixed != nil {
		prefer = append(prefer, *h.fixed)
	}
	return satisfiable(s, prefer...)
}
