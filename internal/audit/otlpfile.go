package audit

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"

	"github.com/klauspost/compress/zstd"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/doubletake/doubletake/internal/analyze"
	"github.com/doubletake/doubletake/internal/streams"
)

// maxLineBytes bounds one OTLP-JSON line (one export request).
const maxLineBytes = 256 << 20

// Compression is how an OTLP file is compressed.
type Compression string

// The compressions ReadOTLP recognises by their magic bytes.
const (
	CompressionNone Compression = "none"
	CompressionGzip Compression = "gzip"
	// CompressionZstd: a zstd stream of JSON lines (the file exporter's
	// compression: zstd with its native compression).
	CompressionZstd Compression = "zstd"
	// CompressionZstdFramed: the file exporter's older zstd format, each
	// request a zstd frame behind a 4-byte big-endian length.
	CompressionZstdFramed Compression = "zstd-length-prefixed"
)

var (
	gzipMagic = []byte{0x1f, 0x8b}
	zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}
)

// OTLPRequest is one export request read from a file.
type OTLPRequest struct {
	Line    int // 1-based line (or frame) number
	Signal  analyze.Signal
	Traces  ptrace.Traces
	Metrics pmetric.Metrics
	Logs    plog.Logs
}

// LineError is a line that is not an OTLP-JSON export request.
type LineError struct {
	Path string
	Line int
	Err  error
}

func (e *LineError) Error() string { return fmt.Sprintf("%s:%d: %v", e.Path, e.Line, e.Err) }
func (e *LineError) Unwrap() error { return e.Err }

// ReadOTLP reads an OTLP-JSON-lines file (one ExportTraceServiceRequest,
// ExportMetricsServiceRequest or ExportLogsServiceRequest per line, as the
// collector's file exporter with format: json writes them) and calls fn for
// each request. Plain, gzip and zstd files are recognised by their first
// bytes. A line that does not decode is passed to bad and skipped; empty
// lines and other signals (profiles) are skipped.
func ReadOTLP(r io.Reader, path string, fn func(OTLPRequest) error, bad func(*LineError)) (Compression, error) {
	br := bufio.NewReaderSize(r, 1<<16)
	head, _ := br.Peek(8)
	switch {
	case bytes.HasPrefix(head, gzipMagic):
		gz, err := gzip.NewReader(br)
		if err != nil {
			return CompressionGzip, fmt.Errorf("%s: %w", path, err)
		}
		defer gz.Close()
		return CompressionGzip, readLines(gz, path, fn, bad)
	case bytes.HasPrefix(head, zstdMagic):
		zr, err := zstd.NewReader(br, zstd.WithDecoderConcurrency(1))
		if err != nil {
			return CompressionZstd, fmt.Errorf("%s: %w", path, err)
		}
		defer zr.Close()
		return CompressionZstd, readLines(zr, path, fn, bad)
	case len(head) == 8 && bytes.Equal(head[4:8], zstdMagic):
		return CompressionZstdFramed, readFrames(br, path, fn, bad)
	}
	return CompressionNone, readLines(br, path, fn, bad)
}

func readLines(r io.Reader, path string, fn func(OTLPRequest) error, bad func(*LineError)) error {
	br := bufio.NewReaderSize(r, 1<<16)
	var buf []byte
	for line := 1; ; line++ {
		buf = buf[:0]
		tooLong := false
		var err error
		for {
			var frag []byte
			frag, err = br.ReadSlice('\n')
			if len(buf)+len(frag) > maxLineBytes {
				tooLong = true
			} else {
				buf = append(buf, frag...)
			}
			if !errors.Is(err, bufio.ErrBufferFull) {
				break
			}
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("%s:%d: %w", path, line, err)
		}
		if tooLong {
			bad(&LineError{Path: path, Line: line, Err: fmt.Errorf("line longer than %d MiB", maxLineBytes>>20)})
		} else if trimmed := bytes.TrimSpace(buf); len(trimmed) > 0 {
			if ferr := decodeRequest(trimmed, path, line, fn, bad); ferr != nil {
				return ferr
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
	}
}

func readFrames(r io.Reader, path string, fn func(OTLPRequest) error, bad func(*LineError)) error {
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1))
	if err != nil {
		return err
	}
	defer dec.Close()
	var size [4]byte
	for frame := 1; ; frame++ {
		if _, err := io.ReadFull(r, size[:]); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("%s: frame %d: %w", path, frame, err)
		}
		n := binary.BigEndian.Uint32(size[:])
		if n > maxLineBytes {
			return fmt.Errorf("%s: frame %d: %d bytes, more than %d MiB", path, frame, n, maxLineBytes>>20)
		}
		compressed := make([]byte, n)
		if _, err := io.ReadFull(r, compressed); err != nil {
			return fmt.Errorf("%s: frame %d: %w", path, frame, err)
		}
		msg, err := dec.DecodeAll(compressed, nil)
		if err != nil {
			bad(&LineError{Path: path, Line: frame, Err: err})
			continue
		}
		if err := decodeRequest(bytes.TrimSpace(msg), path, frame, fn, bad); err != nil {
			return err
		}
	}
}

// decodeRequest decodes one line; only fn's error stops the reading.
func decodeRequest(b []byte, path string, line int, fn func(OTLPRequest) error, bad func(*LineError)) error {
	if b[len(b)-1] != '}' {
		// Cut short (a crash mid-write) or followed by something else:
		// the JSON decoder would forgive trailing bytes.
		bad(&LineError{Path: path, Line: line, Err: errors.New("does not end with }: a truncated or corrupted line")})
		return nil
	}
	sig, err := requestSignal(b)
	if err != nil {
		bad(&LineError{Path: path, Line: line, Err: err})
		return nil
	}
	req := OTLPRequest{Line: line, Signal: sig}
	switch sig {
	case analyze.SignalSpans:
		req.Traces, err = (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(b)
	case analyze.SignalMetrics:
		req.Metrics, err = (&pmetric.JSONUnmarshaler{}).UnmarshalMetrics(b)
	case analyze.SignalLogs:
		req.Logs, err = (&plog.JSONUnmarshaler{}).UnmarshalLogs(b)
	default:
		return nil
	}
	if err != nil {
		bad(&LineError{Path: path, Line: line, Err: err})
		return nil
	}
	return fn(req)
}

// errNotOTLP: a line that is JSON but no OTLP export request.
var errNotOTLP = errors.New("not an OTLP export request: want an object with resourceSpans, resourceMetrics or resourceLogs")

// requestSignal reads a line's top-level keys and names its signal; ""
// for an empty request or one of another signal.
func requestSignal(b []byte) (analyze.Signal, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	tok, err := dec.Token()
	if err != nil {
		return "", err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return "", errNotOTLP
	}
	keys := 0
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return "", err
		}
		keys++
		switch key, _ := tok.(string); key {
		case "resourceSpans", "resource_spans":
			return analyze.SignalSpans, nil
		case "resourceMetrics", "resource_metrics":
			return analyze.SignalMetrics, nil
		case "resourceLogs", "resource_logs":
			return analyze.SignalLogs, nil
		case "resourceProfiles", "resource_profiles", "dictionary":
			return "", nil // profiles: not audited
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return "", err
		}
	}
	if keys > 0 {
		return "", errNotOTLP
	}
	return "", nil // {}: an empty request
}

// OTLPFileStat says what one file held.
type OTLPFileStat struct {
	Path        string      `json:"path"`
	Compression Compression `json:"compression"`
	Requests    int         `json:"requests"`
	Malformed   int         `json:"malformed"`
}

// OTLPReport is the outcome of an OTLP file audit: internal/analyze's
// report over every request, in file order, and the cumulative streams with
// resets read as the series Prometheus would store (classed and charted as
// a Prometheus audit's).
type OTLPReport struct {
	Files    []OTLPFileStat  `json:"files"`
	Analysis *analyze.Report `json:"analysis"`
	Series   []*SeriesResult `json:"series"`
	Problems []string        `json:"problems"`
	Charts   []*Chart        `json:"-"`
}

// maxStoredPoints bounds the cumulative points kept to class and chart the
// streams of OTLP files (16 bytes each); streams met after the bound are
// counted by internal/analyze but not charted.
const maxStoredPoints = 4_000_000

// promSeriesOf keeps, per cumulative monotonic stream, the samples
// Prometheus would store from it: in arrival order, at millisecond
// precision, a sample not after the previous one refused, a point flagged
// no-value as NaN (internal/analyze applies the same rule).
type promSeriesOf struct {
	h      *streams.Hasher
	series map[streams.ID]*storedSeries
	points int
	full   bool
}

type storedSeries struct {
	samples []Sample
	lastMS  int64
}

func (p *promSeriesOf) add(md pmetric.Metrics) {
	streams.Walk(md, p.h, func(v *streams.Visit) {
		if !v.Shape.Cumulative() || !v.Shape.Monotonic() || v.Point.Time == 0 {
			return
		}
		s, ok := p.series[v.ID]
		if !ok {
			if p.full {
				return
			}
			s = &storedSeries{lastMS: math.MinInt64}
			p.series[v.ID] = s
		}
		ms := int64(v.Point.Time / 1e6)
		if ms <= s.lastMS {
			return
		}
		if p.points >= maxStoredPoints {
			p.full = true
			return
		}
		val := v.Point.Value
		if v.Point.NoValue {
			val = math.NaN()
		}
		s.samples = append(s.samples, Sample{T: ms, V: val})
		s.lastMS = ms
		p.points++
	})
}

// Findings counts analyze's findings.
func (r *OTLPReport) Findings() int { return len(r.Analysis.Findings) }

// AuditOTLPFiles reads the files in order into one analysis. Files record
// no arrival times and no connections: the analysis tells copies apart by
// how they were batched and cites files and lines.
func AuditOTLPFiles(paths []string) (*OTLPReport, error) {
	an := analyze.New(analyze.Options{NoArrival: true})
	rep := &OTLPReport{Series: []*SeriesResult{}}
	stored := &promSeriesOf{h: streams.NewHasher(0), series: map[streams.ID]*storedSeries{}}
	seq := uint64(0)
	total := 0
	for _, p := range paths {
		st := OTLPFileStat{Path: p}
		f, err := os.Open(p)
		if err != nil {
			return nil, err
		}
		st.Compression, err = ReadOTLP(f, p, func(r OTLPRequest) error {
			seq++
			st.Requests++
			at := analyze.Arrival{Seq: seq, File: p, Line: r.Line}
			switch r.Signal {
			case analyze.SignalSpans:
				an.AddTraces(at, r.Traces)
			case analyze.SignalMetrics:
				stored.add(r.Metrics)
				an.AddMetrics(at, r.Metrics)
			case analyze.SignalLogs:
				an.AddLogs(at, r.Logs)
			}
			return nil
		}, func(le *LineError) {
			st.Malformed++
			if len(rep.Problems) < maxProblems {
				rep.Problems = append(rep.Problems, le.Error())
			}
		})
		f.Close()
		if err != nil {
			return nil, err
		}
		total += st.Requests
		rep.Files = append(rep.Files, st)
	}
	if total == 0 {
		return nil, fmt.Errorf("%w: no OTLP export requests in %d file(s)", ErrNoData, len(paths))
	}
	rep.Analysis = an.Report()
	for _, st := range rep.Files {
		rep.Analysis.Malformed += uint64(st.Malformed)
	}
	rep.classStreams(stored)
	return rep, nil
}

// classStreams classes and charts the streams with resets as a Prometheus
// audit classes its series.
func (r *OTLPReport) classStreams(stored *promSeriesOf) {
	byID := map[string]*storedSeries{}
	for id, s := range stored.series {
		byID[id.String()] = s
	}
	type analysed struct {
		a       Analysis
		samples []Sample
	}
	of := map[*SeriesResult]analysed{}
	for _, m := range r.Analysis.Metrics.List {
		if m.Prometheus == nil || m.Prometheus.Resets == 0 {
			continue
		}
		s := byID[m.ID]
		if s == nil || len(s.samples) == 0 {
			continue
		}
		start, end := s.samples[0].T, s.samples[len(s.samples)-1].T
		a := Analyze(s.samples, start, end, DeinterleaveOptions{})
		name := m.Name + "{" + m.Attributes + "}"
		if m.Service != "" {
			name += " of " + m.Service
		}
		res := resultOf(name, nil, a)
		of[res] = analysed{a, s.samples}
		r.Series = append(r.Series, res)
	}
	slices.SortFunc(r.Series, worse)
	for i, res := range r.Series {
		if i == DefaultMaxCharts {
			break
		}
		x := of[res]
		res.chart = newChart(res.Series, x.a, x.samples, x.samples[0].T, x.samples[len(x.samples)-1].T, DefaultChartPoints)
		r.Charts = append(r.Charts, res.chart)
	}
	if stored.full {
		r.Problems = append(r.Problems, fmt.Sprintf("more than %d cumulative points: streams met after that are analysed but not charted", maxStoredPoints))
	}
}
