package main

import (
	"strings"
	"testing"
)

// TestFieldsAreNoArrows: a struct field named as another file's method or
// type, read or set as a literal's key, points at nothing; a call of the
// method and a use of the type do.
func TestFieldsAreNoArrows(t *testing.T) {
	var out strings.Builder
	if err := run(&out, "testdata/fields"); err != nil {
		t.Fatal(err)
	}
	want := `c.go -> a.go: signal start state
d.go -> a.go: Addr
4 files, 2 arrows, 0 run back up (0 mutual pairs), 0 files on a longer or shorter cycle
`
	if out.String() != want {
		t.Errorf("got\n%s\nwant\n%s", out.String(), want)
	}
}
