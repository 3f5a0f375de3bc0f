package scan

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"
)

// allOutput renders a result every way the command prints it: text
// findings, the not-judged section, problems and JSON.
func allOutput(t *testing.T, r *Result) string {
	t.Helper()
	var b bytes.Buffer
	if err := WriteText(&b, r.Findings); err != nil {
		t.Fatal(err)
	}
	if err := WriteNotJudged(&b, r.NotJudged, true); err != nil {
		t.Fatal(err)
	}
	if err := WriteProblems(&b, r.Problems); err != nil {
		t.Fatal(err)
	}
	if err := WriteJSON(&b, r); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// scanDone runs ScanWith and fails the test if it does not return within a
// generous deadline (a FIFO or a device would block it forever).
func scanDone(t *testing.T, opts Options, paths ...string) *Result {
	t.Helper()
	done := make(chan *Result, 1)
	go func() { done <- ScanWith(context.Background(), builtinDB(t), opts, paths...) }()
	select {
	case r := <-done:
		return r
	case <-time.After(60 * time.Second):
		t.Fatal("the scan did not return: it blocked on a file")
		return nil
	}
}

func notJudgedReasons(dir string, r *Result) map[string]Reason {
	m := make(map[string]Reason)
	for _, nj := range r.NotJudged {
		rel, _ := filepath.Rel(dir, filepath.FromSlash(nj.Path))
		m[filepath.ToSlash(rel)] = nj.Reason
	}
	return m
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

func TestScanSymlinksOutOfTheRoot(t *testing.T) {
	base := t.TempDir()
	const secret = "dummy-not-real-123"
	write(t, filepath.Join(base, "secret.env"), "TOKEN="+secret+"\n=="+secret+"\n")
	tree := filepath.Join(base, "tree")
	symlink(t, "../secret.env", filepath.Join(tree, "requirements.txt"))
	symlink(t, filepath.Join(base, "secret.env"), filepath.Join(tree, "app", "uv.lock"))
	symlink(t, "../../secret.env", filepath.Join(tree, "app", "pyproject.toml"))
	symlink(t, "../../secret.env", filepath.Join(tree, "requirements", "prod.txt"))
	// A link that stays inside the root is followed.
	write(t, filepath.Join(tree, "pins", "real.txt"), "fastapi==0.142.1\n")
	symlink(t, "real.txt", filepath.Join(tree, "pins", "requirements.txt"))

	for _, paths := range [][]string{{tree}, {filepath.Join(tree, "requirements.txt"), filepath.Join(tree, "app", "uv.lock")}} {
		r := scanDone(t, Options{}, paths...)
		out := allOutput(t, r)
		if strings.Contains(out, secret) || strings.Contains(out, "TOKEN") {
			t.Fatalf("the secret reached the output:\n%s", out)
		}
		got := notJudgedReasons(tree, r)
		for _, p := range []string{"requirements.txt", "app/uv.lock", "app/pyproject.toml", "requirements/prod.txt"} {
			if len(paths) == 2 && p != "requirements.txt" && p != "app/uv.lock" {
				continue
			}
			if got[p] != SkipOutsideRoot {
				t.Errorf("%v: %s not reported as %s: %v", paths, p, SkipOutsideRoot, got)
			}
		}
		if len(r.Problems) != 0 {
			t.Errorf("problems: %+v", r.Problems)
		}
		if len(paths) == 1 && (len(r.Findings) != 1 || r.Findings[0].Version != "0.142.1") {
			t.Errorf("the link inside the root was not followed: %+v", r.Findings)
		}
	}
}

func TestScanProcEnviron(t *testing.T) {
	const secret = "dt-secret-value-4f1c9a"
	t.Setenv("DOUBLETAKE_TEST_SECRET", secret)
	dir := t.TempDir()
	for _, name := range []string{"requirements.txt", "uv.lock", "pyproject.toml", "poetry.lock", "requirements/base.txt"} {
		symlink(t, "/proc/self/environ", filepath.Join(dir, name))
	}
	write(t, filepath.Join(dir, "dev-requirements.txt"), "-r /proc/self/environ\n-c ../../../../proc/self/environ\n")
	r := scanDone(t, Options{}, dir)
	out := allOutput(t, r)
	for _, kv := range os.Environ() {
		_, v, _ := strings.Cut(kv, "=")
		if len(v) >= 8 && !strings.Contains(dir, v) && strings.Contains(out, v) {
			t.Errorf("the value of %s reached the output", strings.SplitN(kv, "=", 2)[0])
		}
	}
	if strings.Contains(out, secret) {
		t.Fatalf("the environment reached the output:\n%s", out)
	}
	if len(r.NotJudged) != 7 {
		t.Errorf("not judged: %+v, want 5 links and 2 includes", r.NotJudged)
	}
}

func TestScanSpecialFiles(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"requirements.txt", "uv.lock", "pyproject.toml", "env/site-packages/x-1.dist-info/METADATA"} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mkfifo(p, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A socket.
	if err := os.Mkdir(filepath.Join(dir, "sock"), 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", filepath.Join(dir, "sock", "requirements.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	// A link inside the root to a FIFO, and links to devices outside it.
	symlink(t, "../requirements.txt", filepath.Join(dir, "a", "requirements-dev.txt"))
	symlink(t, "/dev/zero", filepath.Join(dir, "zero", "requirements.txt"))
	symlink(t, "/dev/urandom", filepath.Join(dir, "zero", "uv.lock"))
	// A device node inside the root, where the test may create one.
	devNote := ""
	if err := os.MkdirAll(filepath.Join(dir, "dev"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mknod(filepath.Join(dir, "dev", "requirements.txt"), syscall.S_IFCHR|0o644, 1<<8|5); err != nil {
		devNote = err.Error()
	}

	r := scanDone(t, Options{}, dir)
	got := notJudgedReasons(dir, r)
	want := map[string]Reason{
		"requirements.txt": SkipSpecialFile,
		"uv.lock":          SkipSpecialFile,
		"pyproject.toml":   SkipSpecialFile,
		"env/site-packages/x-1.dist-info/METADATA": SkipSpecialFile,
		"a/requirements-dev.txt":                   SkipSpecialFile,
		"sock/requirements.txt":                    SkipSpecialFile,
		"zero/requirements.txt":                    SkipOutsideRoot,
		"zero/uv.lock":                             SkipOutsideRoot,
	}
	if devNote == "" {
		want["dev/requirements.txt"] = SkipSpecialFile
	} else {
		t.Logf("no device node inside the root (%s): that case is covered by the /dev/zero link only", devNote)
	}
	for p, reason := range want {
		if got[p] != reason {
			t.Errorf("%s: reason %q, want %q", p, got[p], reason)
		}
	}
	if r.FilesRead != 0 || len(r.Problems) != 0 {
		t.Errorf("read %d files, problems %+v", r.FilesRead, r.Problems)
	}
	// Named on the command line, a FIFO is not opened either.
	r = scanDone(t, Options{}, filepath.Join(dir, "requirements.txt"))
	if len(r.NotJudged) != 1 || r.NotJudged[0].Reason != SkipSpecialFile {
		t.Errorf("explicit FIFO: %+v", r)
	}
}

// writeBig writes a requirements file of about size bytes in pip-compile's
// style, with a hazard pin every 1,000 requirements.
func writeBig(tb testing.TB, path string, size int64) {
	tb.Helper()
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	var n int64
	for i := 0; n < size; i++ {
		var k int
		if i%1000 == 999 {
			k, _ = fmt.Fprintf(w, "fastapi==0.142.%d \\\n    --hash=sha256:%064x\n    # via app\n", i%5, i)
		} else {
			k, _ = fmt.Fprintf(w, "package-%d==1.%d.%d \\\n    --hash=sha256:%064x\n    # via app\n", i, i%100, i%7, i)
		}
		n += int64(k)
	}
	if err := w.Flush(); err != nil {
		tb.Fatal(err)
	}
	if err := f.Close(); err != nil {
		tb.Fatal(err)
	}
}

// heapPeak runs f while sampling the live heap, and returns the highest
// sample above the heap before it.
func heapPeak(f func()) uint64 {
	runtime.GC()
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() uint64 { metrics.Read(sample); return sample[0].Value.Uint64() }
	base := read()
	done := make(chan struct{})
	go func() { f(); close(done) }()
	var peak uint64
	for {
		if v := read(); v > peak {
			peak = v
		}
		select {
		case <-done:
			if peak < base {
				return 0
			}
			return peak - base
		case <-time.After(time.Millisecond):
		}
	}
}

func TestScanLargeFileMemory(t *testing.T) {
	dir := t.TempDir()
	const size = 24 << 20
	writeBig(t, filepath.Join(dir, "requirements.txt"), size)
	// The bound stated in docs/scan.md: memory follows the longest line
	// and the reported entries, not the file.
	const bound = 16 << 20
	var r *Result
	peak := heapPeak(func() { r = ScanWith(context.Background(), builtinDB(t), Options{MaxFileBytes: 32 << 20}, dir) })
	t.Logf("whole %d-byte file: heap peak %d bytes above the start", size, peak)
	if peak > bound {
		t.Errorf("heap peak %d bytes reading a %d-byte file, want <= %d", peak, size, bound)
	}
	if len(r.Findings) != DefaultMaxPerFile || len(r.Problems) != 1 || !strings.Contains(r.Problems[0].Message, "not listed (--max-per-file") {
		t.Errorf("findings %d, problems %+v: want %d findings and the count of the rest", len(r.Findings), r.Problems, DefaultMaxPerFile)
	}

	// With the default cap (16 MiB) the file is read up to the cap and the
	// cut is reported.
	r = scanDone(t, Options{}, dir)
	cut := false
	for _, p := range r.Problems {
		cut = cut || strings.Contains(p.Message, fmt.Sprintf("read only the first %d bytes", DefaultMaxFileBytes))
	}
	if !cut {
		t.Errorf("the cut at %d bytes was not reported: %+v", DefaultMaxFileBytes, r.Problems)
	}
	// A TOML file over the cap is not read at all.
	if err := os.Mkdir(filepath.Join(dir, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeBig(t, filepath.Join(dir, "x", "uv.lock"), 2<<20)
	r = scanDone(t, Options{MaxFileBytes: 1 << 20}, filepath.Join(dir, "x"))
	if len(r.Problems) != 1 || !strings.Contains(r.Problems[0].Message, "over the 1048576-byte cap") {
		t.Errorf("TOML over the cap: %+v", r.Problems)
	}
}

func TestScanLongLine(t *testing.T) {
	dir := t.TempDir()
	long := "fastapi==" + strings.Repeat("1.", 1<<19) + "0"
	write(t, filepath.Join(dir, "requirements.txt"), "fastapi==0.142.1\n"+long+"\nfastapi==0.142.2 \\\n"+long+"\nfastapi==0.142.3\n")
	r := scanDone(t, Options{MaxLineBytes: 4096}, dir)
	var lines []int
	for _, p := range r.Problems {
		lines = append(lines, p.Line)
		if len(p.Message) > 200 {
			t.Errorf("problem message of %d bytes", len(p.Message))
		}
	}
	if fmt.Sprint(lines) != "[2 3]" {
		t.Errorf("problems at lines %v, want [2 3]: %+v", lines, r.Problems)
	}
	if len(r.Findings) != 2 || r.Findings[0].Line != 1 || r.Findings[1].Line != 5 {
		t.Errorf("findings: %+v", r.Findings)
	}
}

func TestScanBinaryFiles(t *testing.T) {
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(7, 7))
	random := make([]byte, 1<<20)
	for i := range random {
		random[i] = byte(rng.UintN(256))
	}
	// No NUL byte: read up to the first line that is not UTF-8, where pip
	// fails too.
	noNUL := make([]byte, 1<<20)
	for i := range noNUL {
		noNUL[i] = byte(1 + rng.UintN(255))
	}
	// Text, but every line fails: 20 problems and a count of the rest.
	var junk strings.Builder
	for i := range 30000 {
		fmt.Fprintf(&junk, "%%junk\x1b[%d\n", i)
	}
	write(t, filepath.Join(dir, "a", "requirements.txt"), string(random))
	write(t, filepath.Join(dir, "b", "requirements.txt"), string(noNUL))
	write(t, filepath.Join(dir, "c", "requirements.txt"), junk.String())
	r := scanDone(t, Options{}, dir)
	perFile := map[string]int{}
	for _, p := range r.Problems {
		perFile[filepath.Base(filepath.Dir(p.Path))]++
	}
	if perFile["a"] != 1 || perFile["b"] != 1 || perFile["c"] != DefaultMaxPerFile+1 || len(r.NotJudged) > 2*DefaultMaxPerFile {
		t.Errorf("problems per file %v, %d not judged: want a: 1 (binary), b: 1 (not UTF-8), c: %d with the count", perFile, len(r.NotJudged), DefaultMaxPerFile+1)
	}
	// Sorted by path, then line: c's first problem (line 0) is the count.
	if count := r.Problems[perFile["a"]+perFile["b"]]; !strings.Contains(count.Message, "29980 more problems") {
		t.Errorf("no count of the problems not listed: %+v", count)
	}
	var text bytes.Buffer
	if err := WriteProblems(&text, r.Problems); err != nil {
		t.Fatal(err)
	}
	if text.Len() > 16<<10 {
		t.Errorf("%d bytes of problems for two 1 MB files", text.Len())
	}
	assertPrintable(t, text.String())
}

// assertPrintable fails if s holds a control character other than a
// newline, or invalid UTF-8.
func assertPrintable(t *testing.T, s string) {
	t.Helper()
	if !utf8.ValidString(s) {
		t.Errorf("output is not valid UTF-8")
	}
	for i, c := range s {
		if c != '\n' && (c < 0x20 || c == 0x7f || c >= 0x80 && c < 0xa0) {
			t.Fatalf("control character %U at byte %d of the output: %q", c, i, s[max(0, i-40):min(len(s), i+40)])
		}
	}
}

func TestScanEscapesNames(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "evil\x1b[2J\x07", "requirements.txt"), "fastapi==0.142.1 ; os_name == \"\x1b]0;pwned\x07\"\nfastapi>=0.140,<0.142.1\x1b[31m\nfastapi @ https://example.invalid/\x1b[2Jx\n")
	r := scanDone(t, Options{}, dir)
	var b bytes.Buffer
	if err := WriteText(&b, r.Findings); err != nil {
		t.Fatal(err)
	}
	if err := WriteNotJudged(&b, r.NotJudged, true); err != nil {
		t.Fatal(err)
	}
	if err := WriteProblems(&b, r.Problems); err != nil {
		t.Fatal(err)
	}
	if len(r.Findings) == 0 || len(r.Problems) == 0 {
		t.Fatalf("fixture did not produce findings and problems: %+v", r)
	}
	assertPrintable(t, b.String())
	if !strings.Contains(b.String(), `evil\x1b[2J\a`) && !strings.Contains(b.String(), `evil\x1b[2J\x07`) {
		t.Errorf("the directory name is not shown escaped:\n%s", b.String())
	}
}

// TestScanFileSwappedAfterStat replaces a regular requirements.txt with a
// FIFO between the stat and the open: the open must not block, and the
// fstat of the opened file must catch the swap.
func TestScanFileSwappedAfterStat(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "requirements.txt")
	write(t, path, "fastapi==0.142.1\n")
	afterStat = func(string) {
		if err := os.Remove(path); err != nil {
			t.Error(err)
		}
		if err := syscall.Mkfifo(path, 0o644); err != nil {
			t.Error(err)
		}
	}
	t.Cleanup(func() { afterStat = nil })
	r := scanDone(t, Options{}, dir)
	if len(r.NotJudged) != 1 || r.NotJudged[0].Reason != SkipSpecialFile || !strings.Contains(r.NotJudged[0].Detail, "changed while being opened") {
		t.Errorf("not judged: %+v", r.NotJudged)
	}
	if r.FilesRead != 0 || len(r.Findings) != 0 || len(r.Problems) != 0 {
		t.Errorf("read %d files, findings %+v, problems %+v", r.FilesRead, r.Findings, r.Problems)
	}
}

// TestScanDeepTOML gives the TOML readers documents nested two million
// levels deep: each is one problem, and the scan goes on.
func TestScanDeepTOML(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "pyproject.toml"), "x = "+strings.Repeat("[", 2_000_000)+strings.Repeat("]", 2_000_000)+"\n")
	write(t, filepath.Join(dir, "a", "uv.lock"), "version = 1\nx = "+strings.Repeat("{a=", 500_000)+"1"+strings.Repeat("}", 500_000)+"\n")
	write(t, filepath.Join(dir, "b", "requirements.txt"), "fastapi==0.142.1\n")
	r := scanDone(t, Options{}, dir)
	if len(r.Problems) != 2 || len(r.Findings) != 1 {
		t.Errorf("problems %+v, findings %+v", r.Problems, r.Findings)
	}
	for _, p := range r.Problems {
		if len(p.Message) > 200 {
			t.Errorf("a %d-byte message", len(p.Message))
		}
	}
}

// TestScanCutLine: the cap may cut a line; its head must not be judged
// ("fastapi==0.142.1" of "fastapi==0.142.12"), nor a continued line.
func TestScanCutLine(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a", "requirements.txt"), "uvicorn\nfastapi==0.142.12\n")
	write(t, filepath.Join(dir, "b", "requirements.txt"), "fastapi==0.142.1 \\\n  --hash=sha256:00\n") // cut after "  --h"
	write(t, filepath.Join(dir, "c", "requirements.txt"), "fastapi==0.142.1\n")
	r := scanDone(t, Options{MaxFileBytes: 24}, dir)
	if len(r.Findings) != 1 || !strings.HasSuffix(r.Findings[0].Path, "c/requirements.txt") {
		t.Errorf("findings: %+v", r.Findings)
	}
	if len(r.Problems) != 2 {
		t.Errorf("problems: %+v, want the cut of a and b", r.Problems)
	}
}
