package scan

import (
	"bufio"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// splitLinesReference is Python's str.splitlines on a whole text: the
// reference physicalLines must match whatever its buffer size.
func splitLinesReference(s string) []string {
	var out []string
	for len(s) > 0 {
		i, n := -1, 0
		for j, r := range s {
			switch r {
			case '\n', '\v', '\f', 0x1c, 0x1d, 0x1e, 0x85, 0x2028, 0x2029:
				i, n = j, len(string(r))
			case '\r':
				i, n = j, 1
				if strings.HasPrefix(s[j:], "\r\n") {
					n = 2
				}
			}
			if i >= 0 {
				break
			}
		}
		if i < 0 {
			out = append(out, s)
			break
		}
		out = append(out, s[:i])
		s = s[i+n:]
	}
	return out
}

// TestPhysicalLinesAnyBuffer splits random texts full of line boundaries
// (multi-byte ones and \r\n included) through the smallest buffer bufio
// allows, so that boundaries fall across reads, and compares with the
// reference.
func TestPhysicalLinesAnyBuffer(t *testing.T) {
	pieces := []string{"a", "fastapi==0.142.1", "\n", "\r", "\r\n", "\v", "\f", "\x1c", "\u0085", "\u2028", "\u2029", "é", "\xe2\x80", "\xc2", "  ", "\\"}
	rng := rand.New(rand.NewPCG(3, 3))
	for range 3000 {
		var b strings.Builder
		for range rng.IntN(40) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		text := b.String()
		want := splitLinesReference(text)
		// With a cap of 6 bytes, longer lines come as tooLong.
		wantCapped := make([]string, len(want))
		for i, l := range want {
			wantCapped[i] = l
			if len(l) > 6 {
				wantCapped[i] = "<too long>"
			}
		}
		for _, size := range []int{16, 17, 19, 64} {
			for _, limit := range []int{1 << 20, 6} {
				var got []string
				err := physicalLines(bufio.NewReaderSize(strings.NewReader(text), size), limit, nil, func(line []byte, tooLong bool) error {
					if tooLong {
						got = append(got, "<too long>")
					} else {
						got = append(got, string(line))
					}
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				w := want
				if limit == 6 {
					w = wantCapped
				}
				if !slices.Equal(got, w) {
					t.Fatalf("buffer %d, cap %d, %q:\n got %q\nwant %q", size, limit, text, got, w)
				}
			}
		}
	}
}
