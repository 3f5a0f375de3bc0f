package main

import (
	"flag"
	"io"
	"strings"
	"testing"
	"time"
)

// TestMatrixPresetKeepsExplicitFlags: -matrix sets the matrix's cells and
// rounds, and a flag given as well wins over the preset.
func TestMatrixPresetKeepsExplicitFlags(t *testing.T) {
	fs := flag.NewFlagSet("ab", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var c abConfig
	f := c.register(fs)
	if err := fs.Parse([]string{"-rounds", "3"}); err != nil {
		t.Fatal(err)
	}
	if err := applyMatrix(fs, "full", map[string]bool{"rounds": true}); err != nil {
		t.Fatal(err)
	}
	if c.rounds != 3 || c.pair != "default" || c.order != "abba" || c.duration != 10*time.Second || c.ceiling {
		t.Fatalf("rounds %d pair %s order %s duration %s ceiling %v: want the preset, with -rounds 3 kept", c.rounds, c.pair, c.order, c.duration, c.ceiling)
	}
	c.gen.Target = "127.0.0.1:1"
	if err := c.parse(*f.loads, *f.dups, *f.senders, *f.batches); err != nil {
		t.Fatal(err)
	}
	if len(c.shapes()) != 12 || len(c.loads) != 3 || c.loads[0] != (loadSpec{name: "sat"}) || c.loads[2] != (loadSpec{name: "fixed", rate: 40000}) {
		t.Fatalf("shapes %v, loads %v: want 4 × 3 shapes, saturation then 10k and 40k spans/s", c.shapes(), c.loads)
	}
	if err := applyMatrix(fs, "huge", nil); err == nil {
		t.Fatal("an unknown matrix was taken")
	}
}

// TestMatrixTableVerdicts: each cell's paired median ratio decides its
// verdict; the cells above the target and those below 1 are named.
func TestMatrixTableVerdicts(t *testing.T) {
	var results []runResult
	add := func(senders, batch int, load string, rate float64, stock, def []float64) {
		for i := range stock {
			results = append(results,
				runResult{Load: load, Rate: rate, Senders: senders, Batch: batch, Variant: without, Round: i + 1, CPUPerM: stock[i], Accepted: 1000},
				runResult{Load: load, Rate: rate, Senders: senders, Batch: batch, Variant: with, Round: i + 1, CPUPerM: def[i], Accepted: 1000})
		}
	}
	add(1, 64, "sat", 0, []float64{10, 10, 10}, []float64{20, 11, 30})          // 2.0
	add(16, 512, "fixed", 10000, []float64{10, 10, 10}, []float64{9, 8, 12})    // 0.9
	add(64, 8192, "fixed", 40000, []float64{10, 10, 10}, []float64{10, 10, 11}) // 1.0
	out := matrixTable(results, scenarioKeys(results))
	for _, want := range []string{
		"| 1×64 | saturation | 10.00 | 20.00 | **2.000** (1.100–3.000) | **not met** |",
		"| 16×512 | fixed 10k/s | 10.00 | 9.00 | **0.900** (0.800–1.200) | met, below 1 |",
		"| 64×8192 | fixed 40k/s | 10.00 | 10.00 | **1.000** (1.000–1.100) | met |",
		"2 of 3 cells meet the target (≤ 1.05). Above it: 1×64 saturation (2.00). Below 1 (the default costs less than the stock collector): 16×512 fixed 10k/s (0.90).",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the table lacks %q:\n%s", want, out)
		}
	}
}

// TestMatrixBacklogCells: a cell where the default accepted more than it
// delivered is listed with its ratio per delivered span beside the one
// per accepted span; cells that delivered what they accepted are not.
func TestMatrixBacklogCells(t *testing.T) {
	var results []runResult
	for i := range 3 {
		results = append(results,
			// Stock delivers what it accepts: 1 core for 100k spans/s.
			runResult{Load: "sat", Senders: 64, Batch: 512, Variant: without, Round: i + 1, CPUPerM: 10, Accepted: 100000, Delivered: 100000, GatewayCores: 1},
			// The default accepts 200k/s on 1 core and delivers 50k/s.
			runResult{Load: "sat", Senders: 64, Batch: 512, Variant: with, Round: i + 1, CPUPerM: 5, Accepted: 200000, Delivered: 50000, GatewayCores: 1},
			runResult{Load: "fixed", Rate: 10000, Senders: 1, Batch: 64, Variant: without, Round: i + 1, CPUPerM: 10, Accepted: 10000, Delivered: 10000, GatewayCores: 0.1},
			runResult{Load: "fixed", Rate: 10000, Senders: 1, Batch: 64, Variant: with, Round: i + 1, CPUPerM: 10, Accepted: 10000, Delivered: 10020, GatewayCores: 0.1})
	}
	out := matrixTable(results, scenarioKeys(results))
	want := "| 64×512 saturation | 0.500 | 2.000 | 4.00 | 100000 | 50000 |"
	if !strings.Contains(out, want) {
		t.Fatalf("the backlog table lacks %q:\n%s", want, out)
	}
	if strings.Contains(out, "| 1×64 fixed 10k/s | 1.000 |") {
		t.Fatalf("a cell that delivered what it accepted is listed:\n%s", out)
	}
	if out := backlogTable(results[len(results)-2:], scenarioKeys(results[len(results)-2:])); out != "" {
		t.Fatalf("no backlog, yet a table:\n%s", out)
	}
}

// TestClosedAndFreshPresets: -matrix closed runs the closed-loop cells
// 1×64, 1×512 and 2×512 at saturation instead of -senders × -batches;
// -matrix fresh runs the dedup pair over a new process's first 1M spans.
func TestClosedAndFreshPresets(t *testing.T) {
	for _, tc := range []struct {
		preset string
		cells  [][2]int
		pair   string
		fresh  int
	}{
		{"closed", [][2]int{{1, 64}, {1, 512}, {2, 512}}, "default", 0},
		{"fresh", [][2]int{{16, 1000}}, "dedup", 1_000_000},
	} {
		fs := flag.NewFlagSet("ab", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		var c abConfig
		f := c.register(fs)
		if err := fs.Parse([]string{"-senders", "64"}); err != nil {
			t.Fatal(err)
		}
		if err := applyMatrix(fs, tc.preset, map[string]bool{"senders": true}); err != nil {
			t.Fatal(err)
		}
		c.gen.Target = "127.0.0.1:1"
		if err := c.parse(*f.loads, *f.dups, *f.senders, *f.batches); err != nil {
			t.Fatal(err)
		}
		got := c.shapes()
		if len(got) != len(tc.cells) || c.pair != tc.pair || c.x.fresh != tc.fresh || len(c.loads) != 1 || c.loads[0].name != "sat" {
			t.Fatalf("%s: shapes %v pair %s fresh %d loads %v: want %v, %s, %d, saturation only", tc.preset, got, c.pair, c.x.fresh, c.loads, tc.cells, tc.pair, tc.fresh)
		}
		for i := range got {
			if got[i] != tc.cells[i] {
				t.Fatalf("%s: shapes %v, want %v", tc.preset, got, tc.cells)
			}
		}
	}
	for _, bad := range []string{"1", "0x64", "1x", "ax2", "1x64,"} {
		if _, err := parseCells(bad); err == nil {
			t.Errorf("cells %q taken", bad)
		}
	}
}

// TestFreshTable: the fresh-process table gives each cell's paired median
// ratio against the target beside both sides' start figures.
func TestFreshTable(t *testing.T) {
	var results []runResult
	for i, pair := range [][2]float64{{2, 2.2}, {2, 2.0}, {2, 2.1}} {
		results = append(results,
			runResult{Load: "sat", Senders: 16, Batch: 1000, Variant: without, Round: i + 1, CPUPerM: pair[0], Start: &freshStart{HealthyS: 0.05, RSSMB: 60, MinFltPerM: 100_000}},
			runResult{Load: "sat", Senders: 16, Batch: 1000, Variant: with, Round: i + 1, CPUPerM: pair[1], Start: &freshStart{HealthyS: 0.08, RSSMB: 145, MinFltPerM: 120_000}})
	}
	out := freshTable(results, scenarioKeys(results), 1_000_000)
	want := "| 16×1000 | 2.00 | 2.10 | **1.050** (1.000–1.100) | met | 0.00 | 0.00 | 0.00 | 0.00 | 0.05 | 0.08 | 60 | 145 | 100.0 | 120.0 |"
	if !strings.Contains(out, want) {
		t.Fatalf("the fresh table lacks %q:\n%s", want, out)
	}
}
