// Package readmetable checks a component README's config table against
// its Config struct, so that neither drifts from the other: every key the
// struct decodes (mapstructure tags; a nested section's keys as
// section::key, squashed structs inline) has a row, and every row a key.
package readmetable

import (
	"bufio"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
)

// Keys returns the config keys cfg (a struct or a pointer to one)
// decodes, sorted: a field of a struct type of this module with
// mapstructure-tagged fields of its own is a section, its keys prefixed with the field's and
// "::"; any other field is one key.
func Keys(cfg any) []string {
	var keys []string
	collect(reflect.TypeOf(cfg), "", &keys)
	slices.Sort(keys)
	return keys
}

func collect(t reflect.Type, prefix string, keys *[]string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	for i := range t.NumField() {
		f := t.Field(i)
		tag, ok := f.Tag.Lookup("mapstructure")
		if !ok || !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if opts == "squash" {
			collect(f.Type, prefix, keys)
			continue
		}
		if section(f.Type) {
			collect(f.Type, prefix+name+"::", keys)
			continue
		}
		*keys = append(*keys, prefix+name)
	}
}

// section says whether t is a struct of this module decoded key by key;
// another module's (a confighttp.ServerConfig) is one key, documented
// there.
func section(t reflect.Type) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || !strings.HasPrefix(t.PkgPath(), "github.com/doubletake/doubletake/") {
		return false
	}
	for i := range t.NumField() {
		if _, ok := t.Field(i).Tag.Lookup("mapstructure"); ok && t.Field(i).IsExported() {
			return true
		}
	}
	return false
}

// TableKeys returns the keys of the README's config table, sorted: the
// first cell, in backticks, of each row of the first table under the
// heading "## Configuration", a dotted path written as section::key.
func TableKeys(readme string) ([]string, error) {
	f, err := os.Open(readme)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var keys []string
	in, table := false, false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if !in {
			in = line == "## Configuration"
			continue
		}
		if !strings.HasPrefix(line, "|") {
			if table || strings.HasPrefix(line, "## ") {
				break // the table, or the section, ended
			}
			continue
		}
		table = true
		cells := strings.Split(line, "|")
		if len(cells) < 3 {
			continue
		}
		cell := strings.TrimSpace(cells[1])
		if k, ok := strings.CutPrefix(cell, "`"); ok && strings.HasSuffix(k, "`") {
			// A nested key may be written as the collector's path
			// (traces::window) or with dots (traces.window).
			keys = append(keys, strings.ReplaceAll(strings.TrimSuffix(k, "`"), ".", "::"))
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%s: no config table under ## Configuration", readme)
	}
	slices.Sort(keys)
	return keys, nil
}

// Diff compares the README's table with cfg's keys: the keys the table
// lacks and the rows no key stands behind.
func Diff(readme string, cfg any) (missing, extra []string, err error) {
	table, err := TableKeys(readme)
	if err != nil {
		return nil, nil, err
	}
	keys := Keys(cfg)
	for _, k := range keys {
		if !slices.Contains(table, k) {
			missing = append(missing, k)
		}
	}
	for _, k := range table {
		if !slices.Contains(keys, k) {
			extra = append(extra, k)
		}
	}
	return missing, extra, nil
}
