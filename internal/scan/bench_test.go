package scan

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// benchTree builds a tree of exactly 10,000 files under dir: 40 projects of
// 4 manifests and 150 source and doc files each, 4 virtual environments of
// 50 installed distributions (METADATA, RECORD, WHEEL and 5 module files
// each), and 1,000 files under .git and 1,240 under node_modules, which the
// scan skips. 360 of the files are candidates the scan reads. It returns the
// number of files written.
func benchTree(tb testing.TB, dir string) int {
	n := 0
	put := func(path, data string) {
		path = filepath.Join(dir, path)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			tb.Fatal(err)
		}
		n++
	}
	var lock strings.Builder
	lock.WriteString("version = 1\nrevision = 3\nrequires-python = \">=3.12\"\n")
	for i := range 120 {
		fmt.Fprintf(&lock, "\n[[package]]\nname = \"pkg-%03d\"\nversion = \"1.%d.0\"\nsource = { registry = \"https://example.invalid/simple\" }\nwheels = [\n    { url = \"https://example.invalid/pkg_%03d-1.%d.0-py3-none-any.whl\", hash = \"sha256:%064d\", size = %d },\n]\n", i, i, i, i, i, 1000+i)
	}
	for p := range 40 {
		root := fmt.Sprintf("projects/p%02d", p)
		fastapi := fmt.Sprintf("0.14%d.%d", 1+p%3, p%5) // some 0.142.x
		put(root+"/pyproject.toml", fmt.Sprintf("[project]\nname = \"p%02d\"\nversion = \"1.0\"\ndependencies = [\n    \"fastapi>=0.135\",\n    \"uvicorn>=0.30\",\n    \"opentelemetry-sdk>=1.30\",\n]\n\n[dependency-groups]\ndev = [\"pytest>=8\", \"ruff\"]\n", p))
		put(root+"/uv.lock", lock.String()+fmt.Sprintf("\n[[package]]\nname = \"fastapi\"\nversion = %q\n", fastapi))
		put(root+"/requirements.txt", fmt.Sprintf("# pins\nfastapi==%s\nuvicorn==0.30.6\nstarlette==0.47.0 \\\n    --hash=sha256:00\n", fastapi))
		put(root+"/requirements-dev.txt", "-r requirements.txt\npytest>=8\nhttpx>=0.27\n")
		for f := range 150 {
			switch f % 10 {
			case 0:
				put(fmt.Sprintf("%s/docs/page%03d.md", root, f), "# docs\n")
			case 1:
				put(fmt.Sprintf("%s/tests/test_%03d.py", root, f), "def test(): pass\n")
			default:
				put(fmt.Sprintf("%s/src/p%02d/mod%d/file%03d.py", root, p, f%4, f), "import fastapi\n")
			}
		}
	}
	for v := range 4 {
		sp := fmt.Sprintf("envs/venv%d/lib/python3.12/site-packages", v)
		for d := range 50 {
			name, version := fmt.Sprintf("dist%02d", d), fmt.Sprintf("2.%d.0", d)
			if d == 0 {
				name, version = "fastapi", fmt.Sprintf("0.14%d.2", 2+v%2)
			}
			info := fmt.Sprintf("%s/%s-%s.dist-info", sp, name, version)
			put(info+"/METADATA", fmt.Sprintf("Metadata-Version: 2.4\nName: %s\nVersion: %s\nSummary: s\n\n%s\n", name, version, strings.Repeat("Long description. ", 200)))
			put(info+"/RECORD", "x.py,sha256=00,1\n")
			put(info+"/WHEEL", "Wheel-Version: 1.0\n")
			for f := range 5 {
				put(fmt.Sprintf("%s/%s/m%d.py", sp, name, f), "x = 1\n")
			}
		}
	}
	for f := range 1000 {
		put(fmt.Sprintf(".git/objects/%02x/%04d", f%256, f), "blob")
	}
	for f := range 1240 {
		put(fmt.Sprintf("web/node_modules/pkg%02d/file%04d.js", f%40, f), "module.exports = 1\n")
	}
	return n
}

func BenchmarkScan10kFiles(b *testing.B) {
	dir := b.TempDir()
	if n := benchTree(b, dir); n != 10000 {
		b.Fatalf("built %d files, want 10000", n)
	}
	db := builtinDB(b)
	ctx := context.Background()
	var res *Result
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		res = Scan(ctx, db, dir)
	}
	b.StopTimer()
	if res.FilesRead != 360 || len(res.Problems) != 0 {
		b.Fatalf("read %d files, problems %v", res.FilesRead, res.Problems)
	}
	b.ReportMetric(float64(res.FilesRead), "files-read/op")
	b.ReportMetric(float64(len(res.Findings)), "findings/op")
}

// BenchmarkScan100MB scans one 100 MB requirements file in pip-compile's
// style (a requirement, its --hash continuation and a "# via" comment:
// 3 physical lines per requirement, a fastapi pin every 1,000), read whole
// (--max-file-bytes raised to 128 MiB). It reports the live heap's peak
// above its level before the scan, and the process's peak resident set.
func BenchmarkScan100MB(b *testing.B) {
	dir := b.TempDir()
	writeBig(b, filepath.Join(dir, "requirements.txt"), 100<<20)
	info, err := os.Stat(filepath.Join(dir, "requirements.txt"))
	if err != nil {
		b.Fatal(err)
	}
	db := builtinDB(b)
	opts := Options{MaxFileBytes: 128 << 20}
	var res *Result
	var peak uint64
	b.SetBytes(info.Size())
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		p := heapPeak(func() { res = ScanWith(context.Background(), db, opts, dir) })
		peak = max(peak, p)
	}
	b.StopTimer()
	if res.FilesRead != 1 || len(res.Findings) != DefaultMaxPerFile || len(res.Problems) != 1 {
		b.Fatalf("read %d files, %d findings, problems %v", res.FilesRead, len(res.Findings), res.Problems)
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
	b.ReportMetric(float64(ru.Maxrss)/1024, "maxrss-MiB")
}
