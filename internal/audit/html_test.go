package audit

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
)

func TestPromHTMLSelfContained(t *testing.T) {
	f := &fakeProm{series: []fakeSeries{
		{ls("rollouts_total", "job", `<script>alert(1)</script>`), every(60, 10*time.Second, interleavedValues)},
		{ls("rollouts_total", "job", "restart"), every(60, 10*time.Second, restartValues)},
		{ls("rollouts_total", "job", "clean"), every(60, 10*time.Second, func(i int) float64 { return float64(i) })},
	}, meta: map[string][]promv1.Metadata{}}
	rep, err := AuditPrometheus(context.Background(), f, PromOptions{End: testEnd, Range: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := WritePromHTML(&b, rep); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	// Self-contained: nothing fetched, nothing run.
	for _, banned := range []string{"<script", "src=", "href=", "@import", "url("} {
		if strings.Contains(page, banned) {
			t.Errorf("the page contains %q", banned)
		}
	}
	if !strings.Contains(page, `job=&#34;&lt;script&gt;alert(1)&lt;/script&gt;&#34;`) {
		t.Errorf("label values are not escaped")
	}
	if n := strings.Count(page, `<section class="chart"`); n != 2 {
		t.Errorf("%d charts, want 2", n)
	}
	// Every path has coordinates inside the drawing.
	re := regexp.MustCompile(`<path class="(stored|chain|other)" d="([^"]*)"`)
	paths := re.FindAllStringSubmatch(page, -1)
	if len(paths) != 6 { // stored, other, chain for each chart
		t.Errorf("%d paths, want 6", len(paths))
	}
	num := regexp.MustCompile(`-?[0-9]+\.[0-9]`)
	for _, p := range paths {
		for _, n := range num.FindAllString(p[2], -1) {
			if strings.HasPrefix(n, "-") {
				t.Errorf("%s path leaves the drawing: %s", p[1], n)
			}
		}
	}
	if n := strings.Count(page, `<circle class="dip"`); n != 30+1 {
		t.Errorf("%d dips drawn, want 31 (30 interleaved, 1 restart)", n)
	}
}

func TestNiceCeil(t *testing.T) {
	for in, want := range map[float64]float64{1: 1, 1.2: 2, 3: 5, 7: 10, 736: 1000, 0.03: 0.05, 250: 500} {
		if got := niceCeil(in); got != want {
			t.Errorf("niceCeil(%v) = %v, want %v", in, got, want)
		}
	}
}
