package scan

import (
	"fmt"
	"slices"

	"github.com/pelletier/go-toml/v2"
)

// declaredRequirement is a dependency specifier read from a pyproject.toml.
type declaredRequirement struct {
	Requirement
	Section string // e.g. project.dependencies, dependency-groups.test
	Line    int    // 0 when it could not be located
}

type pyprojectFile struct {
	Project struct {
		Dependencies         []string            `toml:"dependencies"`
		OptionalDependencies map[string][]string `toml:"optional-dependencies"`
		Dynamic              []string            `toml:"dynamic"`
	} `toml:"project"`
	DependencyGroups map[string][]any `toml:"dependency-groups"`
	Tool             struct {
		UV struct {
			DevDependencies        []string `toml:"dev-dependencies"`
			ConstraintDependencies []string `toml:"constraint-dependencies"`
			OverrideDependencies   []string `toml:"override-dependencies"`
		} `toml:"uv"`
		Poetry struct {
			Dependencies    map[string]any `toml:"dependencies"`
			DevDependencies map[string]any `toml:"dev-dependencies"`
			Group           map[string]struct {
				Dependencies map[string]any `toml:"dependencies"`
			} `toml:"group"`
		} `toml:"poetry"`
	} `toml:"tool"`
}

// pyproject holds the requirements of a pyproject.toml.
type pyproject struct {
	// Requirements are PEP 621 [project] dependencies and
	// optional-dependencies, PEP 735 [dependency-groups] (without
	// {include-group = ...} entries, whose requirements are read where they
	// are defined) and uv's legacy [tool.uv] dev-dependencies.
	Requirements []declaredRequirement
	// Constraints ([tool.uv] constraint-dependencies) narrow every
	// requirement of the same package; Overrides ([tool.uv]
	// override-dependencies) replace them.
	Constraints []declaredRequirement
	Overrides   []declaredRequirement
	// Poetry holds [tool.poetry] dependencies, each alternative of a
	// constraint with || as one requirement with the same Line.
	Poetry []poetryRequirement
	// NotJudged lists what the file says but the scan cannot check:
	// dynamic dependencies, Poetry git / path / url dependencies and
	// constraints it cannot translate.
	NotJudged []NotJudged
}

// poetryRequirement is one Poetry dependency; Alternatives are the PEP 440
// translations of its constraint's ||-separated alternatives.
type poetryRequirement struct {
	declaredRequirement
	Alternatives []Specifier
}

// parsePyproject reads the dependency specifiers of a pyproject.toml. It
// returns the requirements it could parse and one lineError per entry it
// could not; err is set only when the file is not valid TOML.
func parsePyproject(data []byte) (pyproject, []lineError, error) {
	var f pyprojectFile
	if err := toml.Unmarshal(data, &f); err != nil {
		return pyproject{}, nil, tomlError(err)
	}
	var out pyproject
	var errs []lineError
	find := newStringFinder(data)
	add := func(dst *[]declaredRequirement, section, s string) {
		line := find.find(s)
		r, err := ParseRequirement(s)
		if err != nil {
			errs = append(errs, lineError{Line: line, Msg: fmt.Sprintf("%s: %v", section, err)})
			return
		}
		*dst = append(*dst, declaredRequirement{Requirement: r, Section: section, Line: line})
	}

	for _, s := range f.Project.Dependencies {
		add(&out.Requirements, "project.dependencies", s)
	}
	for _, extra := range sortedKeys(f.Project.OptionalDependencies) {
		for _, s := range f.Project.OptionalDependencies[extra] {
			add(&out.Requirements, "project.optional-dependencies."+extra, s)
		}
	}
	for _, group := range sortedKeys(f.DependencyGroups) {
		section := "dependency-groups." + group
		for _, e := range f.DependencyGroups[group] {
			switch e := e.(type) {
			case string:
				add(&out.Requirements, section, e)
			case map[string]any:
				if _, ok := e["include-group"]; !ok {
					errs = append(errs, lineError{Msg: fmt.Sprintf("%s: table entry without include-group", section)})
				}
			default:
				errs = append(errs, lineError{Msg: fmt.Sprintf("%s: entry %v is neither a string nor an include-group table", section, e)})
			}
		}
	}
	for _, s := range f.Tool.UV.DevDependencies {
		add(&out.Requirements, "tool.uv.dev-dependencies", s)
	}
	for _, s := range f.Tool.UV.ConstraintDependencies {
		add(&out.Constraints, "tool.uv.constraint-dependencies", s)
	}
	for _, s := range f.Tool.UV.OverrideDependencies {
		add(&out.Overrides, "tool.uv.override-dependencies", s)
	}
	for _, d := range f.Project.Dynamic {
		if d == "dependencies" || d == "optional-dependencies" {
			out.NotJudged = append(out.NotJudged, NotJudged{Line: find.find(d), Reason: Dynamic,
				Detail: fmt.Sprintf("project.dynamic lists %q: the build backend computes them, so this file does not say which versions are allowed; scan the lockfile or the installed environment instead", d)})
		}
	}
	poetry := func(section string, deps map[string]any) {
		for _, name := range sortedKeys(deps) {
			if name == "python" {
				continue // the Python version, not a package
			}
			out.poetryDependency(find, section, name, deps[name], &errs)
		}
	}
	poetry("tool.poetry.dependencies", f.Tool.Poetry.Dependencies)
	poetry("tool.poetry.dev-dependencies", f.Tool.Poetry.DevDependencies)
	for _, g := range sortedKeys(f.Tool.Poetry.Group) {
		poetry("tool.poetry.group."+g+".dependencies", f.Tool.Poetry.Group[g].Dependencies)
	}
	return out, errs, nil
}

// poetryDependency reads one Poetry dependency: a constraint string, a
// table with a version (or a git, path or url source), or a list of such
// tables (one per environment).
func (p *pyproject) poetryDependency(find *stringFinder, section, name string, v any, errs *[]lineError) {
	switch v := v.(type) {
	case string:
		line := find.find(v)
		alts, err := poetryConstraint(v)
		if err != nil {
			p.NotJudged = append(p.NotJudged, NotJudged{Line: line, Reason: UnsupportedSpecifier,
				Detail: fmt.Sprintf("%s: %s %s: %v", section, excerpt(name), excerpt(v), err)})
			return
		}
		if !validName(name) {
			*errs = append(*errs, lineError{Line: line, Msg: fmt.Sprintf("%s: invalid distribution name %s", section, excerpt(name))})
			return
		}
		p.Poetry = append(p.Poetry, poetryRequirement{
			declaredRequirement: declaredRequirement{Requirement: Requirement{Name: name}, Section: section, Line: line},
			Alternatives:        alts,
		})
	case map[string]any:
		for _, src := range []struct {
			key    string
			reason Reason
		}{{"git", VCS}, {"path", LocalPath}, {"url", DirectURL}, {"file", LocalPath}} {
			if loc, ok := v[src.key].(string); ok {
				p.NotJudged = append(p.NotJudged, NotJudged{Line: find.find(loc), Reason: src.reason,
					Detail: fmt.Sprintf("%s: %s from %s %s; not judged", section, excerpt(name), src.key, excerpt(loc))})
				return
			}
		}
		version, _ := v["version"].(string)
		if version == "" {
			version = "*"
		}
		p.poetryDependency(find, section, name, version, errs)
	case []any:
		for _, e := range v {
			p.poetryDependency(find, section, name, e, errs)
		}
	default:
		*errs = append(*errs, lineError{Msg: fmt.Sprintf("%s: %s: neither a constraint string nor a table", section, excerpt(name))})
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
