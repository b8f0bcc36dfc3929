package stages

import (
	"context"
	"errors"
	"fmt"
	"runtime/pprof"
	"slices"
	"sync"
)

// Group runs stage loops. Each runs under a pprof label stage=name; the first one to return an
// error (other than a cancellation) cancels the group's context, so every other loop sees
// ctx.Done() and exits. Wait returns that first error.
type Group struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	err     error
	running []string // the loops started and not returned, in the order they started
}

// NewGroup returns a group and the context its loops run under.
func NewGroup(parent context.Context) (*Group, context.Context) {
	ctx, cancel := context.WithCancelCause(parent)
	return &Group{ctx: ctx, cancel: cancel}, ctx
}

// Go starts run as the loop called name.
func (g *Group) Go(name string, run func(ctx context.Context) error) {
	g.mu.Lock()
	g.running = append(g.running, name)
	g.mu.Unlock()
	g.wg.Go(func() {
		defer g.returned(name)
		pprof.Do(g.ctx, pprof.Labels("stage", name), func(ctx context.Context) {
			err := run(ctx)
			if err == nil || errors.Is(err, context.Canceled) && g.ctx.Err() != nil {
				return
			}
			g.fail(fmt.Errorf("%s: %w", name, err))
		})
	})
}

// returned notes that the loop called name has returned.
func (g *Group) returned(name string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if i := slices.Index(g.running, name); i >= 0 {
		g.running = slices.Delete(g.running, i, i+1)
	}
}

// Running returns the names of the loops that have not returned yet, in the order they
// started: what Wait waits on.
func (g *Group) Running() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.running)
}

func (g *Group) fail(err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.err == nil {
		g.err = err
		g.cancel(err)
	}
}

// Cancel stops every loop with cause (an abort: loops exit without draining); Wait then
// returns cause unless a loop failed first.
func (g *Group) Cancel(cause error) { g.fail(cause) }

// Done is closed when the group's context ends: on the first error, on Cancel, or after Wait.
func (g *Group) Done() <-chan struct{} { return g.ctx.Done() }

// Err is the first error so far, or nil.
func (g *Group) Err() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.err
}

// Wait waits for every loop to return and gives the first error.
func (g *Group) Wait() error {
	g.wg.Wait()
	g.cancel(nil)
	return g.Err()
}
