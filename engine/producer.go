package engine

import (
	"context"
)

// producer is a stage that sends batches into the writer's inbox on its own (ingress, with its
// sources), or drives one that does (the ownership watcher, which moves ingress's partitions).
// It runs in the pipeline's group, so that the first error of any stage ends its context and it
// answers what it holds, and Close stops it and waits for it before the inbox closes, so that it
// never sends on a closed channel.
type producer struct {
	stop func()
	done chan struct{}
}

// RunProducer runs run as the stage name in the pipeline's group. run's context ends at the
// first error of any stage, or at Abort: it must then stop sending, answer what it holds and
// return. stop asks it to end gracefully: Close calls it, then waits for run to return, before
// the inbox closes. It fails with ErrClosed once the engine is closing.
func (e *Engine) RunProducer(name string, run func(ctx context.Context) error, stop func()) error {
	// The producers' lock, shared, for the whole registration: the reaper marks the engine
	// closed under it exclusively and then waits for the producers registered by then.
	e.producers.RLock()
	defer e.producers.RUnlock()
	e.prodMu.Lock()
	defer e.prodMu.Unlock()
	if e.closed || e.prodsStopping {
		return ErrClosed
	}
	p := &producer{stop: stop, done: make(chan struct{})}
	e.prods = append(e.prods, p)
	e.group.Go(name, func(ctx context.Context) error {
		defer close(p.done)
		return run(ctx)
	})
	return nil
}

// stopProducers stops every producer stage and waits until each has returned; no producer
// starts after it.
func (e *Engine) stopProducers() {
	e.prodMu.Lock()
	e.prodsStopping = true
	prods := e.prods
	e.prodMu.Unlock()
	for _, p := range prods {
		p.stop()
	}
	for _, p := range prods {
		<-p.done
	}
}

// RunStage runs run as the stage name in the pipeline's group, for a stage fed by the batches'
// Done calls (the batched-ack tracker): it must return once Drained is closed, which happens
// after the pipeline stopped however it stopped, so it must not give up on ctx alone. Close
// waits for it.
func (e *Engine) RunStage(name string, run func(ctx context.Context) error) error {
	e.producers.RLock()
	defer e.producers.RUnlock()
	if e.closed {
		return ErrClosed
	}
	e.group.Go(name, run)
	return nil
}
