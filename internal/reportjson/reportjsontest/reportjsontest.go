// Package reportjsontest checks a JSON report against the Go type it was
// written from: every list the type has must be in the JSON as an array,
// never null and never left out.
package reportjsontest // import "github.com/doubletake/doubletake/internal/reportjson/reportjsontest"

import (
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
)

// ListProblems returns, for data (a value of typ written as JSON), the
// path of every list (a slice or array field, element or map value of
// typ) that data holds as null or leaves out, e.g. "spans.groups: null".
// A nil pointer and what a type marshals by itself (json.Marshaler,
// encoding.TextMarshaler) are not looked into.
func ListProblems(typ reflect.Type, data []byte) ([]string, error) {
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	var out []string
	walk("$", typ, v, &out)
	return out, nil
}

var (
	jsonMarshaler = reflect.TypeFor[json.Marshaler]()
	textMarshaler = reflect.TypeFor[encoding.TextMarshaler]()
)

func marshalsItself(t reflect.Type) bool {
	return t.Implements(jsonMarshaler) || t.Implements(textMarshaler) ||
		reflect.PointerTo(t).Implements(jsonMarshaler) || reflect.PointerTo(t).Implements(textMarshaler)
}

func isList(t reflect.Type) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return (t.Kind() == reflect.Slice && t.Elem().Kind() != reflect.Uint8) || t.Kind() == reflect.Array
}

func walk(path string, t reflect.Type, v any, out *[]string) {
	for t.Kind() == reflect.Pointer {
		if v == nil {
			return // a nil pointer
		}
		t = t.Elem()
	}
	if marshalsItself(t) {
		return
	}
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		if t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8 {
			return // base64
		}
		l, ok := v.([]any)
		if !ok || l == nil {
			*out = append(*out, fmt.Sprintf("%s: %s, want a list", path, describe(v)))
			return
		}
		for i, e := range l {
			walk(fmt.Sprintf("%s[%d]", path, i), t.Elem(), e, out)
		}
	case reflect.Map:
		m, _ := v.(map[string]any)
		for k, e := range m {
			walk(path+"."+k, t.Elem(), e, out)
		}
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			return
		}
		walkFields(path, t, m, out)
	}
}

// walkFields walks the fields of struct type t in m, those of embedded
// structs as encoding/json flattens them.
func walkFields(path string, t reflect.Type, m map[string]any, out *[]string) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		ft := f.Type
		if f.Anonymous && name == "" {
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				walkFields(path, ft, m, out)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		v, present := m[name]
		if !present {
			if isList(f.Type) {
				*out = append(*out, fmt.Sprintf("%s.%s: left out, want a list", path, name))
			}
			continue
		}
		walk(path+"."+name, f.Type, v, out)
	}
}

func describe(v any) string {
	if v == nil {
		return "null"
	}
	b, _ := json.Marshal(v)
	if len(b) > 40 {
		b = append(b[:40], "..."...)
	}
	return string(b)
}
