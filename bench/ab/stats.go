package main

import (
	"fmt"
	"slices"
	"strconv"
)

type scenarioKey struct {
	load    string
	rate    float64
	dup     float64
	senders int
	batch   int
}

func keyOf(r runResult) scenarioKey { return scenarioKey{r.Load, r.Rate, r.Dup, r.Senders, r.Batch} }

func scenarioKeys(results []runResult) []scenarioKey {
	var keys []scenarioKey
	for _, r := range results {
		k := keyOf(r)
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	return keys
}

func pick(results []runResult, k scenarioKey, variant string, f func(runResult) float64) []float64 {
	var v []float64
	for _, r := range results {
		if keyOf(r) == k && r.Variant == variant {
			v = append(v, f(r))
		}
	}
	return v
}

// pairedRatios is with/without per round.
func pairedRatios(results []runResult, k scenarioKey, f func(runResult) float64) []float64 {
	byRound := map[int][2]float64{}
	for _, r := range results {
		if keyOf(r) != k {
			continue
		}
		p := byRound[r.Round]
		if r.Variant == without {
			p[0] = f(r)
		} else {
			p[1] = f(r)
		}
		byRound[r.Round] = p
	}
	var out []float64
	for _, p := range byRound {
		if p[0] > 0 && p[1] > 0 {
			out = append(out, p[1]/p[0])
		}
	}
	return out
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func spread(v []float64) string {
	if len(v) == 0 {
		return "–"
	}
	return fmt.Sprintf("%.3f–%.3f", slices.Min(v), slices.Max(v))
}

func pct(d float64) string { return strconv.FormatFloat(d*100, 'f', -1, 64) + "%" }

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

func spreadPct(v []float64) string {
	if len(v) == 0 {
		return "–"
	}
	return fmt.Sprintf("%+.1f%% to %+.1f%%", slices.Min(v)*100, slices.Max(v)*100)
}
