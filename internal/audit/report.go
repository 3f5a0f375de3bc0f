package audit

import (
	"cmp"
	"math"
	"slices"
	"sync"
	"time"
)

// PromReport is the outcome of a Prometheus audit.
type PromReport struct {
	URL      string    `json:"url,omitempty"`
	Matchers []string  `json:"match"`
	Start    time.Time `json:"start"`
	End      time.Time `json:"end"`
	Range    string    `json:"range"`
	// Names counts the metric names matched; CounterNames those read as
	// counters, SkippedNames the others (gauges, info metrics, ...).
	Names        int `json:"metric_names"`
	CounterNames int `json:"counter_names"`
	SkippedNames int `json:"skipped_names"`
	// Series and Samples count what was read.
	Series  int   `json:"series"`
	Samples int64 `json:"samples"`
	// Classes counts the series read by class, clean ones included.
	Classes map[Class]int `json:"classes"`
	// Failed counts series or metric names that could not be read;
	// Problems says why (the first few).
	Failed   int      `json:"failed"`
	Problems []string `json:"problems"`
	Warnings []string `json:"warnings"`
	// Affected lists the series with resets, worst first.
	Affected []*SeriesResult `json:"affected"`
	// Charts are drawn for the worst affected series (PromOptions.MaxCharts).
	Charts []*Chart `json:"-"`
}

// Findings counts the series with interleaved writers: the ones whose
// increase() and rate() are wrong.
func (r *PromReport) Findings() int { return r.Classes[ClassInterleaved] }

// SeriesResult is what one series' samples say.
type SeriesResult struct {
	Series  string            `json:"series"`
	Labels  map[string]string `json:"labels"`
	Class   Class             `json:"class"`
	Samples int               `json:"samples"`
	// Resets is what resets() over the range returns for this series.
	Resets int `json:"resets"`
	// Chains is the number of monotonic chains the samples split into;
	// Returns the samples that went back to an earlier chain.
	Chains  int `json:"chains"`
	Returns int `json:"returns"`
	// RestartResets: resets that fell to near zero and started a new chain;
	// DropResets: other falls that started a new chain.
	RestartResets int `json:"restart_resets"`
	DropResets    int `json:"drop_resets"`
	// Increase is increase() over the range, as stored.
	Increase Float `json:"increase"`
	// DominantIncrease is increase() over the dominant chain alone (the one
	// with the most samples); DominantSamples its sample count.
	DominantIncrease Float `json:"dominant_chain_increase"`
	DominantSamples  int   `json:"dominant_chain_samples"`
	// Factor is Increase / DominantIncrease for interleaved series: how many
	// times too large increase() and rate() are. Null otherwise.
	Factor Float `json:"factor"`
	// Writers is, for interleaved series, what the other chains are,
	// judged from their values against the dominant one: "copy" (a second
	// metric reader in one process), "peer" (two processes share one
	// identity), "undecided"; Cause says it in words and Evidence why.
	Writers  string `json:"writers,omitempty"`
	Cause    string `json:"cause,omitempty"`
	Evidence string `json:"evidence,omitempty"`

	chart *Chart
}

func resultOf(series string, labels map[string]string, a Analysis) *SeriesResult {
	r := &SeriesResult{
		Series:           series,
		Labels:           labels,
		Class:            a.Class,
		Samples:          a.Samples,
		Resets:           a.Resets,
		Chains:           a.Chains,
		Returns:          a.Returns,
		RestartResets:    a.RestartResets,
		DropResets:       a.DropResets,
		Increase:         Float(a.NaiveIncrease),
		DominantIncrease: Float(a.DominantIncrease),
		DominantSamples:  a.DominantSamples,
		Factor:           Float(math.NaN()),
	}
	if a.Class == ClassInterleaved {
		r.Factor = Float(a.NaiveIncrease / a.DominantIncrease)
		r.Writers, r.Cause, r.Evidence = a.Writers.String(), a.Writers.Cause(), a.Evidence
	}
	return r
}

// worse orders results worst first: by class (interleaved, drop, restart,
// clean), then by factor (largest first; unknown last), then by resets,
// then by name.
func worse(a, b *SeriesResult) int {
	if c := cmp.Compare(a.Class.rank(), b.Class.rank()); c != 0 {
		return c
	}
	fa, fb := float64(a.Factor), float64(b.Factor)
	na, nb := math.IsNaN(fa), math.IsNaN(fb)
	switch {
	case na && !nb:
		return 1
	case !na && nb:
		return -1
	case !na && !nb && fa != fb:
		return -cmp.Compare(fa, fb)
	}
	if c := cmp.Compare(b.Resets, a.Resets); c != 0 {
		return c
	}
	return cmp.Compare(a.Series, b.Series)
}

// aggregator collects results from concurrent workers. It keeps every
// affected series' result (small) and the charts of the worst MaxCharts.
type aggregator struct {
	mu        sync.Mutex
	rep       *PromReport
	maxCharts int
	charted   []*SeriesResult
}

func newAggregator(rep *PromReport, maxCharts int) *aggregator {
	return &aggregator{rep: rep, maxCharts: maxCharts}
}

func (g *aggregator) add(r *SeriesResult) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.rep.Series++
	g.rep.Samples += int64(r.Samples)
	g.rep.Classes[r.Class]++
	if r.Resets == 0 {
		return
	}
	g.rep.Affected = append(g.rep.Affected, r)
	if r.chart == nil {
		return
	}
	if len(g.charted) < g.maxCharts {
		g.charted = append(g.charted, r)
		return
	}
	// Replace the least bad charted series if r is worse.
	least := 0
	for i := 1; i < len(g.charted); i++ {
		if worse(g.charted[i], g.charted[least]) > 0 {
			least = i
		}
	}
	if worse(r, g.charted[least]) < 0 {
		g.charted[least].chart = nil
		g.charted[least] = r
	} else {
		r.chart = nil
	}
}

func (g *aggregator) skipName() {
	g.mu.Lock()
	g.rep.SkippedNames++
	g.mu.Unlock()
}

func (g *aggregator) counterName() {
	g.mu.Lock()
	g.rep.CounterNames++
	g.mu.Unlock()
}

func (g *aggregator) problem(err error, n int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.rep.Failed += n
	if len(g.rep.Problems) < maxProblems {
		g.rep.Problems = append(g.rep.Problems, err.Error())
	}
}

func (g *aggregator) addWarnings(ws []string) {
	if len(ws) == 0 {
		return
	}
	g.mu.Lock()
	g.rep.addWarnings(ws)
	g.mu.Unlock()
}

func (r *PromReport) addWarnings(ws []string) {
	for _, w := range ws {
		if len(r.Warnings) >= maxProblems {
			return
		}
		if !slices.Contains(r.Warnings, w) {
			r.Warnings = append(r.Warnings, w)
		}
	}
}

// finish sorts the results and collects the charts in report order.
func (g *aggregator) finish() {
	g.mu.Lock()
	defer g.mu.Unlock()
	slices.SortFunc(g.rep.Affected, worse)
	for _, r := range g.rep.Affected {
		if r.chart != nil {
			g.rep.Charts = append(g.rep.Charts, r.chart)
		}
	}
}
