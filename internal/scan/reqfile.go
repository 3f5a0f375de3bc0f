package scan

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/encoding/htmlindex"
	"golang.org/x/text/encoding/unicode"
	"golang.org/x/text/encoding/unicode/utf32"
	"golang.org/x/text/transform"
)

// This file reads a pip requirements file the way pip does (pip's
// src/pip/_internal/req/req_file.py: _decode_req_file, preprocess,
// join_lines, ignore_comments, break_args_options), streaming: it holds one
// logical line at a time, never the file.
//
//   - Encoding: a UTF-8, UTF-32 or UTF-16 byte order mark picks the encoding
//     (UTF-32's first: its little-endian mark starts with UTF-16's); else a
//     PEP 263 "coding: NAME" in a # comment on the first two lines; else
//     UTF-8. (pip falls back to the locale's encoding when UTF-8 fails;
//     the scan reports the lines that are not UTF-8 instead.)
//   - Lines end at every line boundary of Python's str.splitlines: \n, \r,
//     \r\n, \v, \f, \x1c, \x1d, \x1e, U+0085, U+2028, U+2029.
//   - A line ending in \ is joined to the next without a space, after
//     stripping the backslashes at both of its ends; a comment line (# after
//     optional whitespace) never continues, even if it ends in \.
//   - Comments are # at the start of a line or after whitespace, to the end.

// pep263 matches a PEP 263 encoding declaration, as pip's
// PEP263_ENCODING_RE does.
var pep263 = regexp.MustCompile(`coding[:=]\s*([-\w.]+)`)

// maxPeekDeclaration is how much of the file is searched for a PEP 263
// declaration on its first two lines.
const maxPeekDeclaration = 4096

// decodeRequirements returns a reader of the UTF-8 text of a requirements
// file, and whether that text comes out of a decoder (so is valid UTF-8).
func decodeRequirements(br *bufio.Reader) (io.Reader, bool, error) {
	head, _ := br.Peek(4)
	for _, b := range []struct {
		bom []byte
		enc encoding.Encoding
	}{
		{[]byte{0xef, 0xbb, 0xbf}, nil},
		{[]byte{0xff, 0xfe, 0, 0}, utf32.UTF32(utf32.LittleEndian, utf32.IgnoreBOM)},
		{[]byte{0, 0, 0xfe, 0xff}, utf32.UTF32(utf32.BigEndian, utf32.IgnoreBOM)},
		{[]byte{0xfe, 0xff}, unicode.UTF16(unicode.BigEndian, unicode.IgnoreBOM)},
		{[]byte{0xff, 0xfe}, unicode.UTF16(unicode.LittleEndian, unicode.IgnoreBOM)},
	} {
		if bytes.HasPrefix(head, b.bom) {
			if _, err := br.Discard(len(b.bom)); err != nil {
				return nil, false, err
			}
			if b.enc == nil {
				return br, false, nil
			}
			return transform.NewReader(br, b.enc.NewDecoder()), true, nil
		}
	}
	peek, _ := br.Peek(maxPeekDeclaration)
	for i, line := range bytes.SplitN(peek, []byte("\n"), 3) {
		if i == 2 {
			break
		}
		if len(line) == 0 || line[0] != '#' {
			continue
		}
		m := pep263.FindSubmatch(line)
		if m == nil {
			continue
		}
		enc, err := lookupEncoding(string(m[1]))
		if err != nil {
			return nil, false, err
		}
		if enc == nil {
			return br, false, nil
		}
		return transform.NewReader(br, enc.NewDecoder()), true, nil
	}
	return br, false, nil
}

// lookupEncoding finds a decoder for a PEP 263 encoding name; nil means
// UTF-8 (or ASCII, its subset).
func lookupEncoding(name string) (encoding.Encoding, error) {
	n := strings.ReplaceAll(strings.ToLower(name), "_", "-")
	switch n {
	case "utf-8", "utf8", "u8", "utf", "ascii", "us-ascii", "646", "utf-8-sig":
		return nil, nil
	case "latin-1", "latin1", "l1", "iso-8859-1", "iso8859-1", "8859", "cp819", "iso-ir-100":
		return charmap.ISO8859_1, nil
	case "utf-16", "utf16":
		return unicode.UTF16(unicode.LittleEndian, unicode.ExpectBOM), nil
	case "utf-16-le", "utf-16le":
		return unicode.UTF16(unicode.LittleEndian, unicode.IgnoreBOM), nil
	case "utf-16-be", "utf-16be":
		return unicode.UTF16(unicode.BigEndian, unicode.IgnoreBOM), nil
	case "cp1252", "windows-1252":
		return charmap.Windows1252, nil
	}
	if enc, err := htmlindex.Get(n); err == nil {
		return enc, nil
	}
	return nil, fmt.Errorf("unknown encoding %s in the coding declaration", excerpt(name))
}

// errBinary stops reading a file that holds a NUL byte.
var errBinary = errors.New("binary data (a NUL byte); not a requirements file, the rest is not read")

// physicalLines splits text at Python's str.splitlines boundaries. A line
// longer than max is not returned: fn gets tooLong instead, once, and the
// rest of the line is skipped. An unterminated last line is dropped if cut
// reports true. fn returning an error stops the split.
func physicalLines(br *bufio.Reader, max int, cut func() bool, fn func(line []byte, tooLong bool) error) error {
	sc := bufio.NewScanner(br)
	sc.Buffer(make([]byte, 0, min(br.Size(), max+8)), max+8)
	skipping, tooLong := false, false
	sc.Split(func(data []byte, atEOF bool) (int, []byte, error) {
		tooLong = false
		i, n := lineBreak(data, atEOF)
		switch {
		case i >= 0 && n > 0: // a whole boundary at i
			if skipping || i > max {
				skipping, tooLong = false, true
				return i + n, []byte{}, nil
			}
			return i + n, data[:i], nil
		case i >= 0: // what may start a boundary, at i: need more data
			if i > max {
				skipping = true
				return i, nil, nil
			}
			return 0, nil, nil
		case atEOF:
			if len(data) == 0 && !skipping || cut != nil && cut() {
				return len(data), nil, nil // nothing left, or a line cut short
			}
			if skipping || len(data) > max {
				skipping, tooLong = false, true
				return len(data), []byte{}, nil
			}
			return len(data), data, nil
		case len(data) > max:
			skipping = true
			return len(data), nil, nil
		}
		return 0, nil, nil
	})
	for sc.Scan() {
		if err := fn(sc.Bytes(), tooLong); err != nil {
			return err
		}
	}
	return sc.Err()
}

// mayBreak marks the bytes that start a line boundary.
var mayBreak = [256]bool{'\n': true, '\v': true, '\f': true, '\r': true, 0x1c: true, 0x1d: true, 0x1e: true, 0xc2: true, 0xe2: true}

// lineBreak returns the index and length of the first line boundary in b.
// When b ends in what may start a boundary (a \r, or the first bytes of
// U+0085, U+2028 or U+2029) before any whole one, and more data may come,
// it returns that index with length 0.
func lineBreak(b []byte, atEOF bool) (int, int) {
	for i := 0; i < len(b); i++ {
		if !mayBreak[b[i]] {
			continue
		}
		rest := len(b) - i
		switch c := b[i]; c {
		case '\n', '\v', '\f', 0x1c, 0x1d, 0x1e:
			return i, 1
		case '\r':
			switch {
			case rest >= 2 && b[i+1] == '\n':
				return i, 2
			case rest == 1 && !atEOF:
				return i, 0
			}
			return i, 1
		case 0xc2:
			switch {
			case rest >= 2 && b[i+1] == 0x85:
				return i, 2
			case rest == 1 && !atEOF:
				return i, 0
			}
		case 0xe2:
			switch {
			case rest >= 3 && b[i+1] == 0x80 && (b[i+2] == 0xa8 || b[i+2] == 0xa9):
				return i, 3
			case !atEOF && (rest == 1 || rest == 2 && b[i+1] == 0x80):
				return i, 0
			}
		}
	}
	return -1, 0
}

// lineJoiner joins physical lines as pip's join_lines does and calls fn
// with each logical line and the number of its first physical line.
// tooLong lines (and the logical line they belong to) are reported with
// text "" and tooLong set.
type lineJoiner struct {
	max     int
	pending []byte
	first   int // first physical line of pending
	n       int // current physical line
	cont    bool
	fn      func(n int, text []byte, tooLong bool) error
}

func (j *lineJoiner) add(line []byte, tooLong bool) error {
	j.n++
	if tooLong {
		first := j.n
		if j.cont {
			first = j.first
		}
		j.pending, j.cont = j.pending[:0], false
		return j.fn(first, nil, true)
	}
	comment := isCommentLine(line)
	if !bytes.HasSuffix(line, []byte{'\\'}) || comment {
		if !j.cont {
			if comment {
				return nil // pip strips it to nothing
			}
			return j.fn(j.n, line, false)
		}
		if comment {
			j.pending = append(j.pending, ' ')
		}
		j.pending = append(j.pending, line...)
		j.cont = false
		return j.flush(j.first)
	}
	if !j.cont {
		j.cont, j.first = true, j.n
		j.pending = j.pending[:0]
	}
	j.pending = append(j.pending, bytes.Trim(line, `\`)...)
	if len(j.pending) > j.max {
		j.pending, j.cont = j.pending[:0], false
		return j.fn(j.first, nil, true)
	}
	return nil
}

func (j *lineJoiner) flush(first int) error {
	if len(j.pending) > j.max {
		j.pending = j.pending[:0]
		return j.fn(first, nil, true)
	}
	err := j.fn(first, j.pending, false)
	j.pending = j.pending[:0]
	return err
}

// end yields a last line that ended in a backslash.
func (j *lineJoiner) end() error {
	if j.cont {
		j.cont = false
		return j.flush(j.first)
	}
	return nil
}

// isCommentLine reports whether pip's COMMENT_RE, (^|\s+)#.*$, matches at
// the start of line: # after optional whitespace.
func isCommentLine(line []byte) bool {
	for _, c := range line {
		switch {
		case c == '#':
			return true
		case isPySpace(c):
			continue
		default:
			return false
		}
	}
	return false
}

// stripComment removes what pip's COMMENT_RE removes: from the first #
// that starts the line or follows whitespace, to the end.
func stripComment(line string) string {
	for i := 0; i < len(line); i++ {
		if line[i] == '#' && (i == 0 || isPySpace(line[i-1])) {
			return line[:i]
		}
	}
	return line
}

// isPySpace reports whether c is an ASCII character Python's \s matches in
// a str pattern.
func isPySpace(c byte) bool {
	return isSpace(c) || c >= 0x1c && c <= 0x1f
}

// readRequirementLines streams the logical lines of a requirements file
// read from r to fn. It returns errBinary at a NUL byte. Lines that are not
// valid UTF-8 are passed with valid false. When cut (if not nil) reports,
// at the end of r, that r was cut short, the last, unterminated line is
// dropped: it may be the head of a longer line ("fastapi==0.142.1" of
// "fastapi==0.142.12").
func readRequirementLines(r io.Reader, maxLine, sizeHint int, cut func() bool, fn func(n int, text string, valid, tooLong bool) error) error {
	bufSize := min(max(sizeHint+16, 8192), 64<<10)
	br := bufio.NewReaderSize(r, bufSize)
	text, decoded, err := decodeRequirements(br)
	if err != nil {
		return err
	}
	j := &lineJoiner{max: maxLine, fn: func(n int, line []byte, tooLong bool) error {
		if tooLong {
			return fn(n, "", true, true)
		}
		if bytes.IndexByte(line, 0) >= 0 {
			return fmt.Errorf("line %d: %w", n, errBinary)
		}
		valid := decoded || utf8.Valid(line)
		return fn(n, string(line), valid, false)
	}}
	// As git does, a NUL byte in the first 8,000 bytes marks a binary file.
	tb, ok := text.(*bufio.Reader)
	if !ok {
		tb = bufio.NewReaderSize(text, 64<<10)
	}
	if head, _ := tb.Peek(8000); bytes.IndexByte(head, 0) >= 0 {
		return errBinary
	}
	if err := physicalLines(tb, maxLine, cut, j.add); err != nil {
		return err
	}
	if cut != nil && cut() {
		return nil // a continued line may go on after the cut
	}
	return j.end()
}
