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
	} `toml:"project"`
	DependencyGroups map[string][]any `toml:"dependency-groups"`
	Tool             struct {
		UV struct {
			DevDependencies        []string `toml:"dev-dependencies"`
			ConstraintDependencies []string `toml:"constraint-dependencies"`
			OverrideDependencies   []string `toml:"override-dependencies"`
		} `toml:"uv"`
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
	return out, errs, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
