package dedupprocessor

import (
	"fmt"
	"sync"

	"go.opentelemetry.io/collector/component"
)

// link joins the processors of every factory NewFactory returns to the
// components that find them by component ID alone (LinkedTakeBack): in a
// collector built from a builder manifest, each component's factory is
// made on its own, so the dedup exporters cannot be handed the TakeBack
// of the processor factory. It holds the states while they run, so its
// size is the number of dedup processors running in the process.
type link struct {
	mu     sync.Mutex
	states map[component.ID]map[*state]struct{}
	// queues are the sending queues reported through LinkedTakeBack,
	// which the status pages of NewFactory's processors show.
	queues queueWatch
}

var linked = &link{states: make(map[component.ID]map[*state]struct{})}

func (l *link) add(st *state) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.states[st.id] == nil {
		l.states[st.id] = make(map[*state]struct{})
	}
	l.states[st.id][st] = struct{}{}
}

func (l *link) remove(st *state) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.states[st.id], st)
	if len(l.states[st.id]) == 0 {
		delete(l.states, st.id)
	}
}

// running returns the one state running under id.
func (l *link) running(id component.ID) (*state, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch n := len(l.states[id]); n {
	case 0:
		return nil, fmt.Errorf("dedup processor %q is not running", id)
	case 1:
		for st := range l.states[id] {
			return st, nil
		}
	default:
		return nil, fmt.Errorf("%d dedup processors %q run in this process; their exporters need NewFactoryWithTakeBack's TakeBack", n, id)
	}
	return nil, nil
}
