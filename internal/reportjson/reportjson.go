// Package reportjson writes the JSON reports of verify and audit: indented,
// and with every list an array. encoding/json writes a nil slice as null,
// so a report would say null for an empty list on some paths and [] on
// others; Write fills every nil slice the value reaches with an empty one
// before encoding, so that no list is ever null, whatever path built the
// report.
package reportjson // import "github.com/doubletake/doubletake/internal/reportjson"

import (
	"encoding/json"
	"io"
	"reflect"
)

// Write writes v as indented JSON, each nil slice as []. The nil slices v
// reaches through pointers, maps and interfaces are set to empty ones
// (their length and what omitempty does are unchanged); v itself, when not
// a pointer, is copied first. []byte, which encoding/json writes as a
// base64 string, is left as it is.
func Write(w io.Writer, v any) error {
	if v != nil {
		rv := reflect.ValueOf(v)
		if rv.Kind() != reflect.Pointer {
			cp := reflect.New(rv.Type()).Elem()
			cp.Set(rv)
			rv = cp
		}
		fill(rv, map[uintptr]bool{})
		v = rv.Interface()
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// fill sets the nil slices that v holds or reaches to empty ones. seen
// holds the pointers already followed, so that a cycle ends.
func fill(v reflect.Value, seen map[uintptr]bool) {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() || seen[v.Pointer()] {
			return
		}
		seen[v.Pointer()] = true
		fill(v.Elem(), seen)
	case reflect.Interface:
		if v.IsNil() {
			return
		}
		e := v.Elem()
		if e.Kind() == reflect.Pointer {
			fill(e, seen)
			return
		}
		if v.CanSet() {
			cp := reflect.New(e.Type()).Elem()
			cp.Set(e)
			fill(cp, seen)
			v.Set(cp)
		}
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			if (!f.IsExported() && !f.Anonymous) || f.Tag.Get("json") == "-" {
				continue
			}
			fill(v.Field(i), seen)
		}
	case reflect.Slice:
		if v.IsNil() {
			if v.CanSet() && v.Type().Elem().Kind() != reflect.Uint8 {
				v.Set(reflect.MakeSlice(v.Type(), 0, 0))
			}
			return
		}
		for i := range v.Len() {
			fill(v.Index(i), seen)
		}
	case reflect.Array:
		for i := range v.Len() {
			fill(v.Index(i), seen)
		}
	case reflect.Map:
		if v.IsNil() {
			return
		}
		switch v.Type().Elem().Kind() {
		case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
			reflect.Float32, reflect.Float64, reflect.String:
			return // no slice in such a value
		}
		iter := v.MapRange()
		for iter.Next() {
			cp := reflect.New(v.Type().Elem()).Elem()
			cp.Set(iter.Value())
			fill(cp, seen)
			v.SetMapIndex(iter.Key(), cp)
		}
	}
}
