// Command filegraph prints the arrows between the non-test files of one Go
// package: file A points at file B when A names a package-level type,
// function, variable or constant that B declares, or a method only B
// declares (unexported methods only). An arrow "runs back up" when B also
// points at A. It reads the sources only (go/parser, and go/types without
// the imported packages), so it needs no build. The type check drops the
// names that only look like another file's: a struct field named as a
// method (f.start beside state.start) or as a package-level name (a
// literal's key, signal: beside the type signal). Where it cannot tell (a
// value of an imported type), the name counts.
//
//	go run ./scripts/filegraph processor/dedupprocessor
package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: filegraph DIR")
		os.Exit(2)
	}
	if err := run(os.Stdout, os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// run prints the graph of the package in dir to w.
func run(w io.Writer, dir string) error {
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return err
	}
	fset := token.NewFileSet()
	files := map[string]*ast.File{}
	decls := map[string]string{}     // package-level name -> file
	methods := map[string][]string{} // method name -> files declaring it
	for _, n := range names {
		if strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, n, nil, 0)
		if err != nil {
			return err
		}
		base := filepath.Base(n)
		files[base] = f
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv != nil {
					methods[d.Name.Name] = append(methods[d.Name.Name], base)
				} else {
					decls[d.Name.Name] = base
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						decls[s.Name.Name] = base
					case *ast.ValueSpec:
						for _, id := range s.Names {
							if id.Name != "_" { // a blank declares nothing to point at
								decls[id.Name] = base
							}
						}
					}
				}
			}
		}
	}
	// Imports are not loaded: their names are left unknown, and the
	// type errors that follow are ignored.
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}}
	var parsed []*ast.File
	for _, n := range names {
		if f, ok := files[filepath.Base(n)]; ok {
			parsed = append(parsed, f)
		}
	}
	conf := types.Config{Importer: noImports{}, Error: func(error) {}}
	pkg, _ := conf.Check(dir, fset, parsed, info)
	// field reports whether the type check resolved id to something other
	// than a package-level object or a method: a field, for one.
	field := func(id *ast.Ident) bool {
		obj, ok := info.Uses[id]
		if !ok || pkg == nil {
			return false
		}
		if fn, ok := obj.(*types.Func); ok && fn.Type().(*types.Signature).Recv() != nil {
			return false // a method
		}
		return obj.Parent() != pkg.Scope()
	}
	edges := map[[2]string]bool{}
	via := map[[2]string]map[string]bool{}
	add := func(a, b, name string) {
		e := [2]string{a, b}
		edges[e] = true
		if via[e] == nil {
			via[e] = map[string]bool{}
		}
		via[e][name] = true
	}
	for base, f := range files {
		sels := map[*ast.Ident]bool{}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.SelectorExpr:
				sels[n.Sel] = true
				// Unexported methods only: an exported name after a dot may
				// as well be another package's (td.Len(), set.Stats()).
				if !ast.IsExported(n.Sel.Name) && !field(n.Sel) {
					if ds := methods[n.Sel.Name]; len(ds) == 1 && ds[0] != base {
						add(base, ds[0], n.Sel.Name)
					}
				}
			case *ast.Ident:
				// Names this file resolves itself (locals, its own
				// declarations) have an object; the others are
				// package-level names of other files or universe names.
				if sels[n] || n.Obj != nil || field(n) {
					return true
				}
				if d, ok := decls[n.Name]; ok && d != base {
					add(base, d, n.Name)
				}
			}
			return true
		})
	}
	var list [][2]string
	for e := range edges {
		list = append(list, e)
	}
	sort.Slice(list, func(i, j int) bool {
		if list[i][0] != list[j][0] {
			return list[i][0] < list[j][0]
		}
		return list[i][1] < list[j][1]
	})
	back := 0
	for _, e := range list {
		mark := ""
		if edges[[2]string{e[1], e[0]}] {
			mark = "  (runs back up)"
			back++
		}
		var ns []string
		for n := range via[e] {
			ns = append(ns, n)
		}
		sort.Strings(ns)
		fmt.Fprintf(w, "%s -> %s%s: %s\n", e[0], e[1], mark, strings.Join(ns, " "))
	}
	cyc := cycles(files, edges)
	_, err = fmt.Fprintf(w, "%d files, %d arrows, %d run back up (%d mutual pairs), %d files on a longer or shorter cycle\n", len(files), len(list), back, back/2, cyc)
	return err
}

// noImports loads no package: the type check needs only this package's
// own declarations.
type noImports struct{}

func (noImports) Import(path string) (*types.Package, error) {
	return nil, fmt.Errorf("not loaded: %s", path)
}

// cycles is how many files lie on a cycle of arrows of any length: the
// files of the graph's strongly connected components of more than one
// file (Tarjan's algorithm).
func cycles(files map[string]*ast.File, edges map[[2]string]bool) int {
	out := map[string][]string{}
	for e := range edges {
		out[e[0]] = append(out[e[0]], e[1])
	}
	index, low, on := map[string]int{}, map[string]int{}, map[string]bool{}
	var stack []string
	n, total := 0, 0
	var visit func(v string)
	visit = func(v string) {
		index[v], low[v] = n, n
		n++
		stack = append(stack, v)
		on[v] = true
		for _, w := range out[v] {
			if _, seen := index[w]; !seen {
				visit(w)
				low[v] = min(low[v], low[w])
			} else if on[w] {
				low[v] = min(low[v], index[w])
			}
		}
		if low[v] == index[v] {
			size := 0
			for {
				w := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				on[w] = false
				size++
				if w == v {
					break
				}
			}
			if size > 1 {
				total += size
			}
		}
	}
	for f := range files {
		if _, seen := index[f]; !seen {
			visit(f)
		}
	}
	return total
}
