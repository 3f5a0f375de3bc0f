package reportjson

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/doubletake/doubletake/internal/reportjson/reportjsontest"
)

type inner struct {
	Names []string `json:"names"`
	Bytes []byte   `json:"bytes"`
}

type embedded struct {
	Notes []string `json:"notes"`
}

type report struct {
	*embedded
	List     []int             `json:"list"`
	Omitted  []int             `json:"omitted,omitempty"`
	Inner    *inner            `json:"inner"`
	Nil      *inner            `json:"nil"`
	Items    []inner           `json:"items"`
	ByName   map[string]inner  `json:"by_name"`
	Counts   map[string]int    `json:"counts"`
	Any      any               `json:"any"`
	Array    [2]inner          `json:"array"`
	Hidden   []int             `json:"-"`
	Self     *report           `json:"self,omitempty"`
	Pointers map[string]*inner `json:"pointers"`
}

func write(t *testing.T, v any) string {
	t.Helper()
	var b bytes.Buffer
	if err := Write(&b, v); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestWriteNoNullList: every nil slice a report reaches is written as [],
// however it is reached; []byte stays base64 (null when nil), omitempty
// still leaves an empty list out, and "-" fields are not touched.
func TestWriteNoNullList(t *testing.T) {
	r := &report{
		embedded: &embedded{},
		Inner:    &inner{},
		Items:    []inner{{}, {Names: []string{"a"}}},
		ByName:   map[string]inner{"x": {}},
		Any:      inner{},
		Pointers: map[string]*inner{"p": {}},
	}
	out := write(t, r)
	for _, want := range []string{`"notes": []`, `"list": []`, `"names": []`, `"bytes": null`, `"nil": null`, `"counts": null`} {
		if !strings.Contains(out, want) {
			t.Errorf("lacks %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, `"omitted"`) || r.Hidden != nil {
		t.Errorf("omitempty or - fields changed:\n%s", out)
	}
	problems, err := reportjsontest.ListProblems(reflect.TypeFor[report](), []byte(out))
	if err != nil {
		t.Fatal(err)
	}
	// The only list left out is the omitempty one.
	if len(problems) != 1 || problems[0] != "$.omitted: left out, want a list" {
		t.Errorf("problems: %q\n%s", problems, out)
	}
}

// TestFillEndsOnCycle: a value that reaches itself is filled once.
func TestFillEndsOnCycle(t *testing.T) {
	r := &report{}
	r.Self = r
	fill(reflect.ValueOf(r), map[uintptr]bool{})
	if r.List == nil || r.Items == nil {
		t.Errorf("not filled: %+v", r)
	}
}

// TestWriteValue: a report given by value is copied, not changed; a nil
// slice at the top is [].
func TestWriteValue(t *testing.T) {
	v := inner{}
	if out := write(t, v); !strings.Contains(out, `"names": []`) || v.Names != nil {
		t.Errorf("%s (names %v)", out, v.Names)
	}
	if out := write(t, []string(nil)); out != "[]\n" {
		t.Errorf("nil slice: %q", out)
	}
	if out := write(t, nil); out != "null\n" {
		t.Errorf("nil: %q", out)
	}
}

// TestListProblems: the checker finds a null list and a list left out,
// in fields, elements, map values and embedded structs, and passes arrays.
func TestListProblems(t *testing.T) {
	data := `{"notes": null, "list": [], "inner": {"names": null, "bytes": null}, "nil": null,
		"items": [{"names": ["a"]}], "by_name": {"x": {"names": []}}, "counts": null, "any": null,
		"array": [{"names": []}, {"names": []}], "pointers": null}`
	problems, err := reportjsontest.ListProblems(reflect.TypeFor[report](), []byte(data))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"$.notes: null, want a list",
		"$.omitted: left out, want a list",
		"$.inner.names: null, want a list",
	}
	if !reflect.DeepEqual(problems, want) {
		t.Errorf("problems\n%q\nwant\n%q", problems, want)
	}
	if _, err := reportjsontest.ListProblems(reflect.TypeFor[report](), []byte("{")); err == nil {
		t.Error("no error for a document that is not JSON")
	}
}
