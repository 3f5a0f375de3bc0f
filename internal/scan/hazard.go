package scan

import (
	_ "embed"
	"errors"
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

// builtinHazards is the hazard database compiled into the binary.
//
//go:embed hazards.yaml
var builtinHazards []byte

// Hazard is one entry of the hazard database: a range of releases of one
// package that makes telemetry arrive twice.
type Hazard struct {
	Package   string   // distribution name as written in the database
	Affected  string   // PEP 440 specifier of the bad releases
	Versions  []string // known bad releases, all inside Affected
	Fixed     string   // first good release, if there is one
	Effect    string   // what goes wrong
	Reference string   // issue or pull request, e.g. fastapi/fastapi#16476
	Exclusion string   // specifier to add to a requirement, e.g. !=0.142.*
	// Summary (optional) completes "known to ...", e.g. "attach a second
	// exporter when OTEL_EXPORTER_OTLP_ENDPOINT is set": verify's line.
	Summary string

	name      string // PEP 503 normalised Package
	affected  Specifier
	exclusion Specifier
	versions  []Version
	fixed     *Version
}

// hazardEntry is one entry of a hazard file, as written.
type hazardEntry struct {
	Package   string
	Affected  string
	Versions  []string
	Fixed     string
	Effect    string
	Reference string
	Exclusion string
	Summary   string
}

// BuiltinHazards returns the hazard database embedded in the binary.
func BuiltinHazards() ([]*Hazard, error) {
	return ParseHazards(builtinHazards, "built-in hazards.yaml")
}

// ParseHazards parses and validates a hazard database in YAML: a top-level
// hazards: list of entries. source names the data in errors. Every invalid
// entry is reported, by index and field.
func ParseHazards(data []byte, source string) ([]*Hazard, error) {
	list, err := hazardList(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	var errs []error
	out := make([]*Hazard, 0, len(list))
	for i, node := range list {
		e, fieldErrs := decodeEntry(node)
		label := fmt.Sprintf("hazards[%d]", i)
		if e.Package != "" {
			label += " (" + strings.TrimSpace(e.Package) + ")"
		}
		if len(fieldErrs) == 0 {
			var h *Hazard
			h, fieldErrs = e.compile()
			if len(fieldErrs) == 0 {
				out = append(out, h)
			}
		}
		for _, err := range fieldErrs {
			errs = append(errs, fmt.Errorf("%s: %s: %w", source, label, err))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// hazardList returns the entries of the top-level hazards: list.
func hazardList(data []byte) ([]*yaml.Node, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	if len(doc.Content) == 0 {
		return nil, errors.New("empty hazard file: want a top-level hazards: list")
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("line %d: want a mapping with a hazards: list at the top level", root.Line)
	}
	var list *yaml.Node
	for i := 0; i+1 < len(root.Content); i += 2 {
		if key := root.Content[i]; key.Value != "hazards" {
			return nil, fmt.Errorf("line %d: unknown top-level field %q (want hazards)", key.Line, key.Value)
		}
		list = root.Content[i+1]
	}
	switch {
	case list == nil:
		return nil, errors.New("no top-level hazards: list")
	case list.Kind != yaml.SequenceNode:
		return nil, fmt.Errorf("line %d: hazards: want a list of entries", list.Line)
	case len(list.Content) == 0:
		return nil, errors.New("no entries under hazards")
	}
	return list.Content, nil
}

// decodeEntry decodes one entry, rejecting unknown keys and values of the
// wrong type.
func decodeEntry(node *yaml.Node) (hazardEntry, []error) {
	var e hazardEntry
	if node.Kind != yaml.MappingNode {
		return e, []error{fmt.Errorf("line %d: want a mapping with keys %s", node.Line, hazardFields)}
	}
	var errs []error
	for i := 0; i+1 < len(node.Content); i += 2 {
		key, value := node.Content[i], node.Content[i+1]
		var str *string
		switch key.Value {
		case "package":
			str = &e.Package
		case "affected":
			str = &e.Affected
		case "fixed":
			str = &e.Fixed
		case "effect":
			str = &e.Effect
		case "reference":
			str = &e.Reference
		case "exclusion":
			str = &e.Exclusion
		case "summary":
			str = &e.Summary
		case "versions":
			if value.Kind != yaml.SequenceNode {
				errs = append(errs, fmt.Errorf("versions: line %d: want a list of versions", value.Line))
				continue
			}
			for j, item := range value.Content {
				if item.Kind != yaml.ScalarNode {
					errs = append(errs, fmt.Errorf("versions[%d]: line %d: want a version", j, item.Line))
					continue
				}
				e.Versions = append(e.Versions, item.Value)
			}
			continue
		default:
			errs = append(errs, fmt.Errorf("line %d: unknown field %q (want one of %s)", key.Line, key.Value, hazardFields))
			continue
		}
		if value.Kind != yaml.ScalarNode {
			errs = append(errs, fmt.Errorf("%s: line %d: want a string", key.Value, value.Line))
			continue
		}
		*str = value.Value
	}
	return e, errs
}

// maxSummary bounds a hazard's summary: it is quoted in one line of
// verify's report.
const maxSummary = 200

// hazardFields lists the keys a hazard entry may have.
const hazardFields = "package, affected, versions, fixed, effect, reference, exclusion, summary"

// compile validates e and returns its Hazard, or one error per invalid
// field, each naming the field.
func (e hazardEntry) compile() (*Hazard, []error) {
	h := &Hazard{
		Package:   strings.TrimSpace(e.Package),
		Affected:  strings.TrimSpace(e.Affected),
		Versions:  e.Versions,
		Fixed:     strings.TrimSpace(e.Fixed),
		Effect:    strings.TrimSpace(e.Effect),
		Reference: strings.TrimSpace(e.Reference),
		Exclusion: strings.TrimSpace(e.Exclusion),
		Summary:   strings.Join(strings.Fields(e.Summary), " "),
	}
	var errs []error
	fail := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	switch {
	case h.Package == "":
		fail("package", "required")
	case !validName(h.Package):
		fail("package", "%q is not a valid distribution name", h.Package)
	default:
		h.name = normalizeName(h.Package)
	}
	if h.Effect == "" {
		fail("effect", "required")
	}
	if h.Reference == "" {
		fail("reference", "required")
	}
	if len(h.Summary) > maxSummary {
		fail("summary", "%d bytes, want at most %d (one clause completing \"known to ...\")", len(h.Summary), maxSummary)
	}

	var err error
	affectedOK := false
	if h.Affected == "" {
		fail("affected", "required (a PEP 440 specifier, e.g. >=0.142.0,<0.143.0)")
	} else if h.affected, err = ParseSpecifier(h.Affected); err != nil {
		fail("affected", "%v", err)
	} else if !satisfiable(h.affected, h.versions...) {
		fail("affected", "%q matches no release", h.Affected)
	} else {
		affectedOK = true
	}

	for i, s := range h.Versions {
		v, err := ParseVersion(s)
		if err != nil {
			fail(fmt.Sprintf("versions[%d]", i), "%v", err)
			continue
		}
		if affectedOK && !h.affected.Contains(v, true) {
			fail(fmt.Sprintf("versions[%d]", i), "%s is outside affected %q", s, h.Affected)
			continue
		}
		h.versions = append(h.versions, v)
	}

	if h.Fixed != "" {
		v, err := ParseVersion(h.Fixed)
		switch {
		case err != nil:
			fail("fixed", "%v", err)
		case affectedOK && h.affected.Contains(v, true):
			fail("fixed", "%s is inside affected %q", h.Fixed, h.Affected)
		default:
			h.fixed = &v
		}
	}

	switch h.Exclusion {
	case "":
		fail("exclusion", "required (the specifier to add, e.g. !=0.142.*)")
	default:
		if h.exclusion, err = ParseSpecifier(h.Exclusion); err != nil {
			fail("exclusion", "%v", err)
			break
		}
		if !affectedOK {
			break
		}
		if v, ok := h.admittedBy(h.exclusion); ok {
			fail("exclusion", "%q still allows affected version %s", h.Exclusion, v)
		}
		if h.fixed != nil && !h.exclusion.Contains(*h.fixed, true) {
			fail("exclusion", "%q excludes the fixed version %s", h.Exclusion, h.Fixed)
		}
	}
	return h, errs
}

// DB indexes hazards by normalised package name.
type DB struct {
	byName map[string][]*Hazard
	n      int
}

// NewDB returns a database of the given hazards.
func NewDB(hazards ...*Hazard) *DB {
	db := &DB{byName: make(map[string][]*Hazard)}
	for _, h := range hazards {
		db.byName[h.name] = append(db.byName[h.name], h)
		db.n++
	}
	return db
}

// Len returns the number of hazards in db.
func (db *DB) Len() int { return db.n }

// lookup returns the hazards of a PEP 503 normalised package name.
func (db *DB) lookup(name string) []*Hazard { return db.byName[name] }
