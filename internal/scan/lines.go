package scan

import (
	"bytes"
	"sort"
)

// lineIndex maps byte offsets of a file to 1-based line numbers.
type lineIndex []int // offset at which each line starts

func newLineIndex(data []byte) lineIndex {
	idx := lineIndex{0}
	for off := 0; ; {
		i := bytes.IndexByte(data[off:], '\n')
		if i < 0 {
			return idx
		}
		off += i + 1
		idx = append(idx, off)
	}
}

// line returns the line that holds offset off.
func (li lineIndex) line(off int) int {
	return sort.Search(len(li), func(i int) bool { return li[i] > off })
}

// stringFinder finds the line of each occurrence of a TOML string value,
// in order: the n-th lookup of the same value finds its n-th occurrence.
type stringFinder struct {
	data  []byte
	lines lineIndex
	next  map[string]int
}

func newStringFinder(data []byte) *stringFinder {
	return &stringFinder{data: data, lines: newLineIndex(data), next: make(map[string]int)}
}

// find returns the line of the next occurrence of s quoted with " or ', or 0.
func (f *stringFinder) find(s string) int {
	from := f.next[s]
	best := -1
	for _, q := range [...]string{`"`, `'`} {
		if i := bytes.Index(f.data[from:], []byte(q+s+q)); i >= 0 && (best < 0 || i < best) {
			best = i
		}
	}
	if best < 0 {
		return 0
	}
	off := from + best
	f.next[s] = off + len(s) + 2
	return f.lines.line(off)
}
