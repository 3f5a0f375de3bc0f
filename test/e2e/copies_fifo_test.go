package e2e

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"maps"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// fifoOut is the embedded default's local files, traces.jsonl and
// logs.jsonl, made FIFOs that the test reads line by line: a disk the test
// can stall. While held, the test reads nothing, so a write larger than
// the pipe's buffer (64 KiB) does not return: the request is in flight.
// The test holds each FIFO open for reading and writing, so that the
// gateway's opens never block and the reader sees no end of file between
// two gateways.
type fifoOut struct {
	mu     sync.Mutex
	open   chan struct{} // closed while the reader reads
	spans  map[[24]byte]int
	logs   map[string]int
	files  []*os.File
	done   []chan struct{}
	errs   []error
	torn   int // lines cut short by a kill
	closed bool
}

// endLine follows the gateway's last line (after a newline, in case that
// line was cut short): the reader stops there.
const endLine = "#end\n"

func newFifoOut(t *testing.T, dir string) *fifoOut {
	t.Helper()
	f := &fifoOut{open: make(chan struct{}), spans: map[[24]byte]int{}, logs: map[string]int{}}
	close(f.open)
	for _, name := range []string{"traces.jsonl", "logs.jsonl"} {
		path := filepath.Join(dir, name)
		if err := syscall.Mkfifo(path, 0o600); err != nil {
			t.Fatalf("mkfifo %s: %v", path, err)
		}
		file, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		f.files, f.done = append(f.files, file), append(f.done, done)
		go f.read(file, done)
	}
	t.Cleanup(f.close)
	return f
}

func (f *fifoOut) gate() chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.open
}

// read takes lines from file until endLine, waiting at each read while
// the reader is held.
func (f *fifoOut) read(file *os.File, done chan struct{}) {
	defer close(done)
	r := bufio.NewReaderSize(readerFunc(func(p []byte) (int, error) {
		<-f.gate()
		return file.Read(p[:min(len(p), 4096)])
	}), 64<<10)
	for {
		line, err := r.ReadBytes('\n')
		if string(line) == endLine {
			return
		}
		if string(line) == "\n" {
			continue
		}
		if err != nil {
			f.mu.Lock()
			if !f.closed || !errors.Is(err, os.ErrClosed) {
				f.errs = append(f.errs, err)
			}
			f.mu.Unlock()
			return
		}
		f.take(line)
	}
}

type readerFunc func([]byte) (int, error)

func (r readerFunc) Read(p []byte) (int, error) { return r(p) }

// take counts the items of one line. A gateway killed in the middle of a
// write leaves the start of a line, which the next gateway's first line
// follows: that start delivered nothing, and a line that does not decode
// (only ever one cut short) delivered nothing either.
func (f *fifoOut) take(line []byte) {
	start := max(bytes.LastIndex(line, []byte(`{"resourceSpans":`)), bytes.LastIndex(line, []byte(`{"resourceLogs":`)))
	f.mu.Lock()
	defer f.mu.Unlock()
	if start != 0 {
		f.torn++
	}
	if start < 0 {
		return
	}
	line = line[start:]
	if bytes.HasPrefix(line, []byte(`{"resourceSpans":`)) {
		td, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(line)
		if err != nil {
			f.torn++
			return
		}
		eachSpan(td, func(k [24]byte) { f.spans[k]++ })
		return
	}
	ld, err := (&plog.JSONUnmarshaler{}).UnmarshalLogs(line)
	if err != nil {
		f.torn++
		return
	}
	for _, rl := range ld.ResourceLogs().All() {
		for _, sl := range rl.ScopeLogs().All() {
			for _, r := range sl.LogRecords().All() {
				f.logs[r.Body().AsString()]++
			}
		}
	}
}

func (f *fifoOut) hold() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.open = make(chan struct{})
}

func (f *fifoOut) release() {
	f.mu.Lock()
	defer f.mu.Unlock()
	select {
	case <-f.open:
	default:
		close(f.open)
	}
}

// held is not known: a write in flight shows only as one that does not
// return.
func (f *fifoOut) held() int { return 0 }

// delivered reads every line written before the gateway stopped: call it
// once the gateway is stopped.
func (f *fifoOut) delivered(t *testing.T) (map[[24]byte]int, map[string]int, map[string]int) {
	t.Helper()
	f.release()
	for i, file := range f.files {
		if _, err := io.WriteString(file, "\n"+endLine); err != nil {
			t.Fatal(err)
		}
		select {
		case <-f.done[i]:
		case <-time.After(time.Minute):
			t.Fatalf("%s: the reader did not reach the end within a minute", file.Name())
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.errs) > 0 {
		t.Fatalf("reading the local files: %v", errors.Join(f.errs...))
	}
	t.Logf("local files: %d lines cut short (by the kill)", f.torn)
	return maps.Clone(f.spans), maps.Clone(f.logs), nil
}

func (f *fifoOut) close() {
	f.release()
	f.mu.Lock()
	f.closed = true
	f.mu.Unlock()
	for _, file := range f.files {
		_ = file.Close()
	}
}
