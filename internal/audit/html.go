package audit

import (
	"fmt"
	"html/template"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// An HTML report is one self-contained page: inline CSS, inline SVG, no
// scripts, no external assets. It opens from a file, a mail attachment or
// an artifact store as it is.

type htmlPage struct {
	Title     string
	Generated string
	Meta      []string
	Summary   []string
	Tables    []htmlTable
	Charts    []htmlChart
	Notes     []string
}

type htmlTable struct {
	Caption string
	Head    []string
	Rows    [][]string
	More    string
}

type htmlChart struct {
	ID       string
	Title    string
	Caption  string
	W, H     int
	X0, X1   float64
	Y0, Y1   float64
	StoredD  string
	ChainD   string
	OthersD  string
	Dips     []htmlPoint
	MoreDips int
	XTicks   []htmlTick
	YTicks   []htmlTick
}

type htmlPoint struct{ X, Y string }

type htmlTick struct {
	Pos    string
	Label  string
	Anchor string
}

const (
	chartW = 960
	chartH = 280
)

const pageSource = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
<style>
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px;color:#1b1f24;max-width:1100px}
h1{font-size:22px;margin:0 0 8px}
h2{font-size:16px;margin:28px 0 4px;word-break:break-all}
p.meta{color:#57606a;margin:2px 0}
table{border-collapse:collapse;margin:12px 0;font-size:13px}
th,td{border-bottom:1px solid #d0d7de;padding:4px 10px;text-align:left;vertical-align:top}
th{background:#f6f8fa}
td.series{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;word-break:break-all}
.class-interleaved{color:#b42318;font-weight:600}
.class-drop{color:#b54708}
.class-restart{color:#175cd3}
svg{background:#fff;border:1px solid #d0d7de;max-width:100%;height:auto}
svg .axis{stroke:#57606a;stroke-width:1}
svg .grid{stroke:#eaeef2;stroke-width:1}
svg text{font:11px system-ui,sans-serif;fill:#57606a}
svg .stored{fill:none;stroke:#8c959f;stroke-width:1.2}
svg .chain{fill:none;stroke:#0969da;stroke-width:2.5}
svg .other{fill:none;stroke:#0969da;stroke-width:1.5;stroke-dasharray:6 4;opacity:.7}
svg .dip{fill:#d1242f;stroke:none}
.legend span{display:inline-block;margin-right:18px}
.swatch{display:inline-block;width:18px;height:4px;vertical-align:middle;margin-right:6px}
ul.notes{color:#57606a}
</style>
</head>
<body>
<h1>{{.Title}}</h1>
{{range .Meta}}<p class="meta">{{.}}</p>
{{end}}<p class="meta">generated {{.Generated}} by doubletake audit</p>
{{range .Summary}}<p>{{.}}</p>
{{end}}
{{range .Tables}}<table>
<caption>{{.Caption}}</caption>
<thead><tr>{{range .Head}}<th>{{.}}</th>{{end}}</tr></thead>
<tbody>
{{range .Rows}}<tr>{{range $i, $c := .}}{{if eq $i 0}}<td>{{$c}}</td>{{else}}<td{{if classCell $c}} class="class-{{$c}}"{{end}}{{if seriesCell $c}} class="series"{{end}}>{{$c}}</td>{{end}}{{end}}</tr>
{{end}}</tbody>
</table>
{{if .More}}<p class="meta">{{.More}}</p>{{end}}
{{end}}
{{if .Charts}}<p class="legend"><span><i class="swatch" style="background:#8c959f"></i>stored samples</span><span><i class="swatch" style="background:#d1242f;height:8px;width:8px;border-radius:4px"></i>dips (what resets() counts)</span><span><i class="swatch" style="background:#0969da"></i>dominant de-interleaved chain</span><span><i class="swatch" style="background:repeating-linear-gradient(90deg,#0969da 0 6px,transparent 6px 10px);opacity:.7"></i>other chains</span></p>{{end}}
{{range .Charts}}{{$c := .}}<section class="chart" id="{{.ID}}">
<h2>{{.Title}}</h2>
<p class="meta">{{.Caption}}</p>
<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {{.W}} {{.H}}" width="{{.W}}" height="{{.H}}" role="img" aria-label="{{.Title}}">
{{range .YTicks}}<line class="grid" x1="{{$c.X0 | num}}" x2="{{$c.X1 | num}}" y1="{{.Pos}}" y2="{{.Pos}}"/>
<text x="{{$c.X0 | minus4 | num}}" y="{{.Pos}}" text-anchor="{{.Anchor}}" dominant-baseline="middle">{{.Label}}</text>
{{end}}{{range .XTicks}}<text x="{{.Pos}}" y="{{$c.Y1 | plus16 | num}}" text-anchor="{{.Anchor}}">{{.Label}}</text>
{{end}}<line class="axis" x1="{{.X0 | num}}" x2="{{.X0 | num}}" y1="{{.Y0 | num}}" y2="{{.Y1 | num}}"/>
<line class="axis" x1="{{.X0 | num}}" x2="{{.X1 | num}}" y1="{{.Y1 | num}}" y2="{{.Y1 | num}}"/>
{{if .StoredD}}<path class="stored" d="{{.StoredD}}"/>{{end}}
{{if .OthersD}}<path class="other" d="{{.OthersD}}"/>{{end}}
{{if .ChainD}}<path class="chain" d="{{.ChainD}}"/>{{end}}
<g class="dips">{{range .Dips}}<circle class="dip" cx="{{.X}}" cy="{{.Y}}" r="3.5"/>{{end}}</g>
</svg>
{{if .MoreDips}}<p class="meta">{{.MoreDips}} more dips not drawn</p>{{end}}
</section>
{{end}}
{{if .Notes}}<ul class="notes">{{range .Notes}}<li>{{.}}</li>{{end}}</ul>{{end}}
</body>
</html>
`

var pageTemplate = template.Must(template.New("page").Funcs(pageFuncs).Parse(pageSource))

var pageFuncs = template.FuncMap{
	"num":    func(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) },
	"minus4": func(v float64) float64 { return v - 4 },
	"plus16": func(v float64) float64 { return v + 16 },
	"classCell": func(s string) bool {
		return s == string(ClassInterleaved) || s == string(ClassDrop) || s == string(ClassRestart)
	},
	"seriesCell": func(s string) bool { return strings.ContainsAny(s, "{}") },
}

func writePage(w io.Writer, p htmlPage) error {
	p.Generated = time.Now().UTC().Format(time.RFC3339)
	return pageTemplate.Execute(w, p)
}

// chartOf lays one chart out.
func chartOf(id, title string, c *Chart) htmlChart {
	h := htmlChart{ID: id, Title: title, W: chartW, H: chartH, X0: 70, X1: chartW - 16, Y0: 12, Y1: chartH - 34, MoreDips: c.MoreDips}
	h.Caption = fmt.Sprintf("%s; %d dips", c.Class, len(c.Dips)+c.MoreDips)
	span := float64(c.End - c.Start)
	if span <= 0 {
		span = 1
	}
	top := c.Max
	if top <= 0 || math.IsInf(top, 0) {
		top = 1
	}
	top = niceCeil(top)
	x := func(t int64) float64 { return h.X0 + float64(t-c.Start)/span*(h.X1-h.X0) }
	y := func(v float64) float64 {
		if math.IsInf(v, 1) || v > top {
			v = top
		}
		if v < 0 || math.IsInf(v, -1) {
			v = 0
		}
		return h.Y1 - v/top*(h.Y1-h.Y0)
	}
	h.StoredD = pathOf(c.Stored, x, y)
	h.ChainD = pathOf(c.Chain, x, y)
	var others []string
	for _, o := range c.Others {
		others = append(others, pathOf(o, x, y))
	}
	h.OthersD = strings.Join(others, " ")
	for _, d := range c.Dips {
		h.Dips = append(h.Dips, htmlPoint{X: fmt1(x(d.T)), Y: fmt1(y(d.V))})
	}
	for i := 0; i <= 4; i++ {
		v := top * float64(i) / 4
		h.YTicks = append(h.YTicks, htmlTick{Pos: fmt1(y(v)), Label: strconv.FormatFloat(v, 'g', 4, 64), Anchor: "end"})
	}
	for i := 0; i <= 4; i++ {
		t := c.Start + int64(float64(c.End-c.Start)*float64(i)/4)
		anchor := "middle"
		switch i {
		case 0:
			anchor = "start"
		case 4:
			anchor = "end"
		}
		h.XTicks = append(h.XTicks, htmlTick{Pos: fmt1(x(t)), Label: time.UnixMilli(t).UTC().Format("01-02 15:04:05"), Anchor: anchor})
	}
	return h
}

func pathOf(ss []Sample, x func(int64) float64, y func(float64) float64) string {
	if len(ss) == 0 {
		return ""
	}
	var b strings.Builder
	for i, s := range ss {
		if i == 0 {
			b.WriteByte('M')
		} else {
			b.WriteString(" L")
		}
		b.WriteString(fmt1(x(s.T)))
		b.WriteByte(',')
		b.WriteString(fmt1(y(s.V)))
	}
	if len(ss) == 1 {
		// A lone point: a short stroke so that it shows.
		b.WriteString(" h1")
	}
	return b.String()
}

func fmt1(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

// niceCeil rounds v up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

// addSeries adds a table of series results and their charts to a page; it
// reports whether there was anything to add.
func addSeries(p *htmlPage, caption string, list []*SeriesResult, charts []*Chart) bool {
	if len(list) == 0 {
		return false
	}
	t := htmlTable{Caption: caption,
		Head: []string{"#", "class", "resets()", "samples", "chains", "increase()", "dominant chain", "factor", "series"}}
	for i, s := range list {
		t.Rows = append(t.Rows, []string{strconv.Itoa(i + 1), string(s.Class), strconv.Itoa(s.Resets), strconv.Itoa(s.Samples),
			strconv.Itoa(s.Chains), fmtNum(float64(s.Increase)), dominantCell(s), fmtFactor(float64(s.Factor)), s.Series})
	}
	p.Tables = append(p.Tables, t)
	for _, c := range charts {
		hc := chartOf(fmt.Sprintf("chart-%d", len(p.Charts)+1), c.Series, c)
		for _, s := range list {
			if s.chart == c {
				hc.Caption = fmt.Sprintf("%s: resets() %d, %d chains; increase() %s", s.Class, s.Resets, s.Chains, fmtNum(float64(s.Increase)))
				if s.Class == ClassInterleaved || s.Class == ClassDrop {
					hc.Caption += fmt.Sprintf(", dominant chain %s (%s)", fmtNum(float64(s.DominantIncrease)), fmtFactor(float64(s.Factor)))
				}
			}
		}
		p.Charts = append(p.Charts, hc)
	}
	return true
}

// WritePromHTML writes a Prometheus audit as a self-contained HTML page with
// one chart per charted series.
func WritePromHTML(w io.Writer, r *PromReport) error {
	p := htmlPage{Title: "doubletake audit: Prometheus"}
	p.Meta = append(p.Meta,
		fmt.Sprintf("server %s; selectors %s", orDash(r.URL), strings.Join(r.Matchers, " ")),
		fmt.Sprintf("range %s, %s to %s", r.Range, r.Start.Format(time.RFC3339), r.End.Format(time.RFC3339)))
	p.Summary = append(p.Summary,
		fmt.Sprintf("%s read from %s (%s skipped as not counter-like): %d interleaved, %d drop, %d restart, %d clean.",
			plural(r.Series, "series", "series"), plural(r.CounterNames, "counter-like metric name", "counter-like metric names"),
			plural(r.SkippedNames, "name", "names"),
			r.Classes[ClassInterleaved], r.Classes[ClassDrop], r.Classes[ClassRestart], r.Classes[ClassClean]))
	if !addSeries(&p, "Series with resets, worst first", r.Affected, r.Charts) {
		p.Summary = append(p.Summary, "No series with resets.")
	}
	if n := len(r.Affected) - len(r.Charts); n > 0 && len(r.Charts) > 0 {
		p.Notes = append(p.Notes, fmt.Sprintf("%d more affected series are listed but not charted (--max-charts).", n))
	}
	for _, wn := range r.Warnings {
		p.Notes = append(p.Notes, "warning: "+wn)
	}
	for _, pr := range r.Problems {
		p.Notes = append(p.Notes, "problem: "+pr)
	}
	return writePage(w, p)
}
