package dedupotlpexporter

import (
	"context"
	"math"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/embedded"

	"github.com/doubletake/doubletake/internal/admission"
)

// The instruments exporterhelper reports its sending queue with.
// TestPinnedQueueGauges fails, naming the change, when a collector bump
// changes them.
const (
	queueSizeMetric     = "otelcol_exporter_queue_size"
	queueCapacityMetric = "otelcol_exporter_queue_capacity"
)

// queueProbe reads the size and capacity of the sending queue that
// exporterhelper builds, which says them only through its observable
// gauges otelcol_exporter_queue_size and otelcol_exporter_queue_capacity:
// the MeterProvider exporterhelper is given (meterProvider) passes
// everything on to the collector's, and keeps the callbacks registered
// for those two gauges, which read runs against an observer of its own.
type queueProbe struct {
	mu        sync.Mutex
	size      metric.Int64Observable
	capacity  metric.Int64Observable
	callbacks map[int]metric.Callback
	next      int
}

func newQueueProbe() *queueProbe { return &queueProbe{callbacks: make(map[int]metric.Callback)} }

// meterProvider wraps mp for the exporterhelper of one exporter.
func (p *queueProbe) meterProvider(mp metric.MeterProvider) metric.MeterProvider {
	return probeMeterProvider{MeterProvider: mp, p: p}
}

// readable says whether the queue's two gauges were made and can be told
// apart (a no-op MeterProvider's instruments cannot).
func (p *queueProbe) readable() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.size != nil && p.capacity != nil && !same(p.size, p.capacity) && len(p.callbacks) > 0
}

// read runs the queue's callbacks: what it holds and may hold, in the
// unit of its sizer; zeros before exporterhelper made its queue.
func (p *queueProbe) read() (size, capacity int64) {
	p.mu.Lock()
	o := &probeObserver{size: p.size, capacity: p.capacity}
	cbs := make([]metric.Callback, 0, len(p.callbacks))
	for _, cb := range p.callbacks {
		cbs = append(cbs, cb)
	}
	p.mu.Unlock()
	for _, cb := range cbs {
		_ = cb(context.Background(), o)
	}
	return o.sizeV, o.capacityV
}

// same says whether two instruments are one, without comparing values of
// a type that cannot be compared.
func same(a, b metric.Observable) bool {
	if a == nil || b == nil {
		return false
	}
	ta := reflect.TypeOf(a)
	return ta == reflect.TypeOf(b) && ta.Comparable() && a == b
}

type probeMeterProvider struct {
	metric.MeterProvider
	p *queueProbe
}

func (mp probeMeterProvider) Meter(name string, opts ...metric.MeterOption) metric.Meter {
	return probeMeter{Meter: mp.MeterProvider.Meter(name, opts...), p: mp.p}
}

type probeMeter struct {
	metric.Meter
	p *queueProbe
}

func (m probeMeter) Int64ObservableGauge(name string, opts ...metric.Int64ObservableGaugeOption) (metric.Int64ObservableGauge, error) {
	g, err := m.Meter.Int64ObservableGauge(name, opts...)
	if err != nil {
		return g, err
	}
	m.p.mu.Lock()
	switch name {
	case queueSizeMetric:
		m.p.size = g
	case queueCapacityMetric:
		m.p.capacity = g
	}
	m.p.mu.Unlock()
	return g, nil
}

func (m probeMeter) RegisterCallback(f metric.Callback, instruments ...metric.Observable) (metric.Registration, error) {
	reg, err := m.Meter.RegisterCallback(f, instruments...)
	if err != nil {
		return reg, err
	}
	m.p.mu.Lock()
	defer m.p.mu.Unlock()
	for _, inst := range instruments {
		if same(inst, m.p.size) || same(inst, m.p.capacity) {
			id := m.p.next
			m.p.next++
			m.p.callbacks[id] = f
			return probeRegistration{Registration: reg, p: m.p, id: id}, nil
		}
	}
	return reg, nil
}

type probeRegistration struct {
	metric.Registration
	p  *queueProbe
	id int
}

func (r probeRegistration) Unregister() error {
	r.p.mu.Lock()
	delete(r.p.callbacks, r.id)
	r.p.mu.Unlock()
	return r.Registration.Unregister()
}

// probeObserver takes what the queue's callbacks observe.
type probeObserver struct {
	embedded.Observer
	size, capacity   metric.Int64Observable
	sizeV, capacityV int64
}

func (o *probeObserver) ObserveInt64(inst metric.Int64Observable, v int64, _ ...metric.ObserveOption) {
	switch {
	case same(inst, o.size):
		o.sizeV = v
	case same(inst, o.capacity):
		o.capacityV = v
	}
}

func (*probeObserver) ObserveFloat64(metric.Float64Observable, float64, ...metric.ObserveOption) {}

// The sending queue, for the receivers' servers (internal/admission).
var _ admission.Queue = (*upstream)(nil)

// roomMaxAge is how long a reading of the queue's room serves the
// receivers' servers before it is read again.
const roomMaxAge = time.Millisecond

// room caches the sending queue's room for the receivers' servers, which
// ask for every request before decoding it: the persistent queue reports
// its size under the lock it holds while it writes an entry, so reading it
// each time would make every request wait for the write under way. One
// caller at a time reads it again, once the reading is roomMaxAge old; the
// others take the last reading. A stale reading costs a request refused
// that would have fitted (its sender retries) or one let through that the
// queue refuses itself, as without the check.
type room struct {
	free       atomic.Int64
	at         atomic.Int64 // when free was read, Unix nanoseconds; 0: never
	refreshing atomic.Bool
	// now is the clock, Unix nanoseconds; nil: time.Now.
	now func() int64
}

func (r *room) clock() int64 {
	if r.now != nil {
		return r.now()
	}
	return time.Now().UnixNano()
}

// Free is the room the sending queue has left, in its sizer's unit, read
// at most roomMaxAge ago; all the room there is while it cannot be read.
func (up *upstream) Free() (int64, admission.Unit) {
	unit := admission.Bytes
	switch up.sizer {
	case "items":
		unit = admission.Items
	case "requests":
		unit = admission.Requests
	}
	r := &up.room
	at := r.at.Load()
	if (at == 0 || r.clock()-at >= int64(roomMaxAge)) && r.refreshing.CompareAndSwap(false, true) {
		r.free.Store(up.readFree())
		r.at.Store(r.clock())
		r.refreshing.Store(false)
	} else if at == 0 {
		return math.MaxInt64, unit // another caller reads it for the first time
	}
	return r.free.Load(), unit
}

// fullProbe is how long after its storage refused new data for lack of
// room the queue is taken to have none: requests are refused before
// decoding meanwhile; then the next ones go through to the queue, which
// tells whether room came back (the queue drained, or room was freed).
const fullProbe = 250 * time.Millisecond

// readFree reads the queue's room now: none while its storage refuses new
// data for lack of room (storageFullAt, fullProbe).
func (up *upstream) readFree() int64 {
	if at := up.storageFullAt.Load(); at != 0 && up.room.clock()-at < int64(fullProbe) {
		return 0
	}
	if !up.queue.readable() {
		return math.MaxInt64
	}
	size, capacity := up.queue.read()
	if capacity <= 0 {
		return math.MaxInt64
	}
	return capacity - size
}

// Name names the queue by its exporter's ID.
func (up *upstream) Name() string { return up.id.String() }
