package scan

import (
	"strings"
	"testing"
)

func TestBuiltinHazards(t *testing.T) {
	hs, err := BuiltinHazards()
	if err != nil {
		t.Fatal(err)
	}
	h := fastapiHazard(t)
	if h.Affected != ">=0.142.0,<0.143.0" || h.Fixed != "0.143.0" || h.Exclusion != "!=0.142.*" ||
		h.Reference != "fastapi/fastapi#16476" {
		t.Errorf("fastapi hazard = %+v", h)
	}
	if len(h.versions) != 5 {
		t.Errorf("fastapi hazard has %d known versions, want 0.142.0 to 0.142.4", len(h.versions))
	}
	for _, want := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "BatchSpanProcessor", "PeriodicExportingMetricReader", "twice"} {
		if !strings.Contains(h.Effect, want) {
			t.Errorf("effect does not mention %s: %q", want, h.Effect)
		}
	}
	for _, v := range []string{"0.142.0", "0.142.4"} {
		if !h.affected.Contains(mustVersion(t, v), true) {
			t.Errorf("%s not affected", v)
		}
	}
	for _, v := range []string{"0.141.9", "0.143.0"} {
		if h.affected.Contains(mustVersion(t, v), true) {
			t.Errorf("%s affected", v)
		}
	}
	if db := NewDB(hs...); db.Len() != len(hs) || len(db.lookup("fastapi")) != 1 {
		t.Errorf("NewDB: %d hazards, lookup(fastapi) = %v", db.Len(), db.lookup("fastapi"))
	}
}

const validEntry = `
  - package: Demo_Pkg
    affected: "==1.2.*"
    versions: ["1.2.0", "1.2.1"]
    fixed: "1.3.0"
    exclusion: "!=1.2.*"
    effect: exports twice
    reference: demo/demo#1
`

func TestParseHazards(t *testing.T) {
	hs, err := ParseHazards([]byte("hazards:"+validEntry), "user.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(hs) != 1 || hs[0].name != "demo-pkg" || hs[0].fixed == nil || hs[0].fixed.String() != "1.3.0" {
		t.Fatalf("got %+v", hs)
	}
	// Optional fields: versions, fixed.
	_, err = ParseHazards([]byte(`
hazards:
  - package: demo
    affected: ">=1,<2"
    exclusion: ">=2"
    effect: x
    reference: y
`), "user.yaml")
	if err != nil {
		t.Fatal(err)
	}
}

func TestParseHazardsErrors(t *testing.T) {
	tests := []struct {
		name, yaml string
		want       []string // substrings of the error
	}{
		{"empty file", ``, []string{"user.yaml: empty hazard file"}},
		{"no entries", `hazards: []`, []string{"user.yaml: no entries"}},
		{"not a list", `hazards: fastapi`, []string{"user.yaml: line 1: hazards: want a list of entries"}},
		{"top level list", `- package: x`, []string{"user.yaml: line 1: want a mapping with a hazards: list"}},
		{"unknown top-level field", `hazard: []`, []string{`user.yaml: line 1: unknown top-level field "hazard"`}},
		{"bad yaml", `hazards: [`, []string{"user.yaml: yaml: line 1:"}},
		{"unknown field", "hazards:" + validEntry + "    fixd: 1.0\n", []string{`user.yaml: hazards[0] (Demo_Pkg): line 9: unknown field "fixd"`}},
		{"entry not a mapping", "hazards:\n  - fastapi\n", []string{"user.yaml: hazards[0]: line 2: want a mapping"}},
		{"wrong types", `
hazards:
  - package: demo
    versions: {a: 1}
    effect: [x]
`, []string{
			"hazards[0] (demo): versions: line 4: want a list of versions",
			"hazards[0] (demo): effect: line 5: want a string",
		}},
		{"missing fields", `
hazards:
  - package: demo
`, []string{
			"hazards[0] (demo): effect: required",
			"hazards[0] (demo): reference: required",
			"hazards[0] (demo): affected: required",
			"hazards[0] (demo): exclusion: required",
		}},
		{"second entry bad", "hazards:" + validEntry + `
  - package: "bad name"
    affected: ">=1.0 <2.0"
    versions: ["x"]
    fixed: "nope"
    exclusion: "1.0"
    effect: e
    reference: r
`, []string{
			`hazards[1] (bad name): package: "bad name" is not a valid distribution name`,
			`hazards[1] (bad name): affected: invalid specifier ">=1.0 <2.0"`,
			`hazards[1] (bad name): versions[0]: invalid version "x"`,
			`hazards[1] (bad name): fixed: invalid version "nope"`,
			`hazards[1] (bad name): exclusion: invalid specifier "1.0"`,
		}},
		{"no package", `
hazards:
  - affected: ">=1"
    exclusion: "<1"
    effect: e
    reference: r
`, []string{"hazards[0]: package: required"}},
		{"inconsistent", `
hazards:
  - package: demo
    affected: ">=1.0,<1.1"
    versions: ["1.0.1", "1.1.0"]
    fixed: "1.0.5"
    exclusion: "!=1.0.1"
    effect: e
    reference: r
`, []string{
			`versions[1]: 1.1.0 is outside affected ">=1.0,<1.1"`,
			`fixed: 1.0.5 is inside affected`,
			`exclusion: "!=1.0.1" still allows affected version 1.0`,
		}},
		{"exclusion drops the fix", `
hazards:
  - package: demo
    affected: ">=1.0,<1.1"
    fixed: "1.1"
    exclusion: "<1.0"
    effect: e
    reference: r
`, []string{`exclusion: "<1.0" excludes the fixed version 1.1`}},
		{"empty range", `
hazards:
  - package: demo
    affected: ">=2,<1"
    exclusion: "<1"
    effect: e
    reference: r
`, []string{`affected: ">=2,<1" matches no release`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseHazards([]byte(tt.yaml), "user.yaml")
			if err == nil {
				t.Fatal("want error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not contain %q:\n%v", w, err)
				}
			}
		})
	}
}
