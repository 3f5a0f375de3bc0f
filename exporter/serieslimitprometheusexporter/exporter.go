package serieslimitprometheusexporter

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"

	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/doubletake/doubletake/exporter/serieslimitprometheusexporter/internal/metadata"
	"github.com/doubletake/doubletake/internal/streams"
)

// limited is the exporter behind the limiter.
type limited struct {
	exporter.Metrics
	lim *limiter
}

func (l *limited) Capabilities() consumer.Capabilities {
	return consumer.Capabilities{MutatesData: true}
}

func (l *limited) ConsumeMetrics(ctx context.Context, md pmetric.Metrics) error {
	if refused := l.lim.filter(md, time.Now()); refused > 0 {
		l.lim.tel.ExporterPrometheusRefusedPoints.Add(ctx, int64(refused), l.lim.attrs)
	}
	if md.DataPointCount() == 0 {
		return nil
	}
	validUTF8(md)
	return l.Metrics.ConsumeMetrics(ctx, md)
}

func (l *limited) Shutdown(ctx context.Context) error {
	err := l.Metrics.Shutdown(ctx)
	l.lim.tel.Shutdown()
	return err
}

// limiter tracks the series given to the exporter.
type limiter struct {
	max     int
	horizon time.Duration // 0: never forget

	mu        sync.Mutex
	h         *streams.Hasher
	seen      map[streams.ID]int64 // last point, unix ns
	lastSweep int64

	// tel is the telemetry metadata.yaml declares: the points refused
	// and the series held, each with this exporter's ID (attrs).
	tel   *metadata.TelemetryBuilder
	attrs metric.MeasurementOption
}

func newLimiter(set exporter.Settings, c *Config) (*limiter, error) {
	l := &limiter{
		max:   c.MaxSeries,
		h:     streams.NewHasher(rand.Uint64()),
		seen:  make(map[streams.ID]int64),
		attrs: metric.WithAttributeSet(attribute.NewSet(attribute.String("exporter", set.ID.String()))),
	}
	if c.MetricExpiration > 0 {
		l.horizon = 2*c.MetricExpiration + time.Second
	}
	tel, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	l.tel = tel
	if err := tel.RegisterExporterPrometheusSeriesCallback(func(_ context.Context, o metric.Int64Observer) error {
		l.mu.Lock()
		n := len(l.seen)
		l.mu.Unlock()
		o.Observe(int64(n), l.attrs)
		return nil
	}); err != nil {
		tel.Shutdown()
		return nil, err
	}
	return l, nil
}

// filter removes the points of series past the bound from md and returns
// how many it removed.
func (l *limiter) filter(md pmetric.Metrics, now time.Time) int {
	ns := now.UnixNano()
	l.mu.Lock()
	defer l.mu.Unlock()
	refused := 0
	admit := func(id streams.ID) bool {
		if _, ok := l.seen[id]; ok {
			l.seen[id] = ns
			return true
		}
		if len(l.seen) >= l.max {
			l.sweep(ns)
		}
		if len(l.seen) >= l.max {
			refused++
			return false
		}
		l.seen[id] = ns
		return true
	}
	for _, rm := range md.ResourceMetrics().All() {
		l.h.Resource(rm.Resource())
		for _, sm := range rm.ScopeMetrics().All() {
			l.h.Scope(sm.Scope())
			sm.Metrics().RemoveIf(func(m pmetric.Metric) bool {
				l.h.Metric(m)
				return removePoints(m, func(a pointAttrs) bool { return !admit(l.h.Point(a.Attributes())) })
			})
		}
	}
	return refused
}

// sweep forgets the series the exporter has let go, at most once a second.
func (l *limiter) sweep(ns int64) {
	if l.horizon == 0 || ns-l.lastSweep < int64(time.Second) {
		return
	}
	l.lastSweep = ns
	for id, last := range l.seen {
		if ns-last > int64(l.horizon) {
			delete(l.seen, id)
		}
	}
}
