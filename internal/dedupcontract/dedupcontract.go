// Package dedupcontract is the contract between the dedup processor and the
// components after it that hand back items they lost (the dedup exporters):
// TakeBack is what such a component needs of the processor; the
// processor's factory offers it (Provider); a component finds it through
// the host it is started with, by the processor's component ID (Find), as
// core's persistent queue finds its storage extension through
// host.GetExtensions. The factories of one collector are its own
// (otelcol.Factories is called once per collector), so two collectors in
// one process, each with a processor under the same ID, reach each its own.
package dedupcontract

import (
	"context"
	"fmt"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/service/hostcapabilities"

	"github.com/doubletake/doubletake/internal/upstreamhealth"
)

// QueueDepth reads a sending queue now: what it holds and the most it may
// hold, in the unit of its sizer.
type QueueDepth func() (size, capacity int64)

// TakeBack lets a component after a dedup processor hand back items it had
// accepted and afterwards lost for good, and show its sending queue on the
// processor's status page. Every method names the processor by component
// ID; it is safe for concurrent use.
type TakeBack interface {
	// Traces takes back the spans of td, lost after dedup id accepted
	// them because of cause. It returns how many entries were taken back.
	Traces(ctx context.Context, id component.ID, td ptrace.Traces, cause error) (int, error)
	// Logs takes back the log records of ld.
	Logs(ctx context.Context, id component.ID, ld plog.Logs, cause error) (int, error)
	// Metrics counts and logs the loss of md's points.
	Metrics(ctx context.Context, id component.ID, md pmetric.Metrics, cause error) error
	// WatchQueue shows the sending queue of exporter on the status page of
	// the processor id until the returned function is called.
	WatchQueue(id, exporter component.ID, signal, sizer string, depth QueueDepth) (unwatch func())
	// WatchUpstream is WatchQueue with the health of the exporter's
	// upstream, read by upstream, shown beside the queue.
	WatchUpstream(id, exporter component.ID, signal, sizer string, depth QueueDepth, upstream func() upstreamhealth.Snapshot) (unwatch func())
}

// Provider is implemented by the dedup processor's factory: the TakeBack
// that reaches the processors it makes.
type Provider interface {
	DedupTakeBack() TakeBack
}

// Find returns the TakeBack of the processor id in the collector whose
// host is given: the factory of id's type, found through the host
// (hostcapabilities.ComponentFactory), must be a Provider. It fails when
// the host offers no factories or none of that type takes items back.
func Find(host component.Host, id component.ID) (TakeBack, error) {
	cf, ok := host.(hostcapabilities.ComponentFactory)
	if !ok {
		return nil, fmt.Errorf("dedup processor %q cannot be reached: the host offers no component factories", id)
	}
	f := cf.GetFactory(component.KindProcessor, id.Type())
	if f == nil {
		return nil, fmt.Errorf("dedup processor %q cannot be reached: this collector has no processor of type %q", id, id.Type())
	}
	p, ok := f.(Provider)
	if !ok {
		return nil, fmt.Errorf("dedup processor %q cannot be reached: processors of type %q take nothing back", id, id.Type())
	}
	return p.DedupTakeBack(), nil
}

// Unreachable is the TakeBack of a component that could not find its
// processor (Find's error): every take back fails with Err, nothing is
// shown on a status page.
type Unreachable struct{ Err error }

func (u Unreachable) Traces(context.Context, component.ID, ptrace.Traces, error) (int, error) {
	return 0, u.Err
}

func (u Unreachable) Logs(context.Context, component.ID, plog.Logs, error) (int, error) {
	return 0, u.Err
}

func (u Unreachable) Metrics(context.Context, component.ID, pmetric.Metrics, error) error {
	return u.Err
}

func (Unreachable) WatchQueue(component.ID, component.ID, string, string, QueueDepth) func() {
	return func() {}
}

func (Unreachable) WatchUpstream(component.ID, component.ID, string, string, QueueDepth, func() upstreamhealth.Snapshot) func() {
	return func() {}
}
