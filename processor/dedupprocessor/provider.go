package dedupprocessor

import (
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/processor"

	"github.com/doubletake/doubletake/internal/dedupcontract"
)

// NewFactory returns the dedup processor's factory. Processors made by one
// factory for one component ID share their windows, whatever pipelines and
// signals they serve.
//
// The factory is a dedupcontract.Provider: the dedup exporters find it
// through the host they start with (dedupcontract.Find) and reach its
// processors by component ID. A collector calls its factories' function
// once, so two collectors in one process reach each its own processors.
func NewFactory() processor.Factory {
	f := &factory{states: make(map[component.ID]*state)}
	return providerFactory{Factory: f.processorFactory(), f: f}
}

// NewFactoryWithTakeBack returns a dedup processor factory, like
// NewFactory, and the TakeBack that reaches the processors it makes.
func NewFactoryWithTakeBack() (processor.Factory, *TakeBack) {
	f := &factory{states: make(map[component.ID]*state)}
	return providerFactory{Factory: f.processorFactory(), f: f}, &TakeBack{f: f}
}

// providerFactory is the processor factory with the TakeBack of its
// processors, which the components after them find through the host.
type providerFactory struct {
	processor.Factory
	f *factory
}

func (p providerFactory) DedupTakeBack() dedupcontract.TakeBack { return &TakeBack{f: p.f} }
