package stages

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
)

// ErrClosed is what a watermark's waiters get when its owner stopped cleanly.
var ErrClosed = errors.New("stages: closed")

// Watermark is an offset that only moves up (Written, Durable, Dispatched). It has exactly one
// owner, which calls Advance as work completes and Fail once when it stops; anyone may Load it
// or Wait for it to reach an offset. Waiting is event-driven: Advance closes the channels of the
// waiters it satisfies; nothing polls.
type Watermark struct {
	cur atomic.Int64

	mu      sync.Mutex
	err     error // sticky, set once by Fail
	waiters []waiter
}

type waiter struct {
	off int64
	ch  chan struct{}
}

// NewWatermark returns a watermark that starts at off.
func NewWatermark(off int64) *Watermark {
	w := &Watermark{}
	w.cur.Store(off)
	return w
}

// Load is the current offset.
func (w *Watermark) Load() int64 { return w.cur.Load() }

// Advance moves the mark up to off (never down) and releases every waiter at or below it.
func (w *Watermark) Advance(off int64) {
	if off <= w.cur.Load() {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if off <= w.cur.Load() {
		return
	}
	w.cur.Store(off)
	kept := w.waiters[:0]
	for _, wt := range w.waiters {
		if wt.off <= off {
			close(wt.ch)
		} else {
			kept = append(kept, wt)
		}
	}
	clear(w.waiters[len(kept):])
	w.waiters = kept
}

// Fail freezes the mark: waits at or below the current offset still succeed, every other
// present or future wait returns err (ErrClosed for a clean stop). Only the first Fail counts.
func (w *Watermark) Fail(err error) {
	if err == nil {
		err = ErrClosed
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return
	}
	w.err = err
	for _, wt := range w.waiters {
		close(wt.ch)
	}
	clear(w.waiters)
	w.waiters = nil
}

// Waiters is how many waits are registered and not yet released: the long polls and stages
// waiting on the mark now. A wait that gives up (ctx ended) is not counted any more.
func (w *Watermark) Waiters() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.waiters)
}

// Err is the error the mark was failed with, or nil while its owner runs.
func (w *Watermark) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// Wait returns nil once the mark is at or past off, the mark's error if it was failed below off,
// or ctx's error.
func (w *Watermark) Wait(ctx context.Context, off int64) error {
	if w.cur.Load() >= off {
		return nil
	}
	ch := w.WaitChan(off)
	select {
	case <-ch:
		return w.reached(off)
	case <-ctx.Done():
		w.forget(ch)
		return ctx.Err()
	}
}

// forget drops a waiter that stopped waiting, so that waits that time out (long polls at the
// head of an idle queue) do not pile up until the mark moves.
func (w *Watermark) forget(ch <-chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, wt := range w.waiters {
		if wt.ch == ch {
			last := len(w.waiters) - 1
			w.waiters[i] = w.waiters[last]
			w.waiters[last] = waiter{}
			w.waiters = w.waiters[:last]
			return
		}
	}
}

// reached tells, once a wait for off is over, whether the mark got there (nil) or failed first.
func (w *Watermark) reached(off int64) error {
	if w.cur.Load() >= off {
		return nil
	}
	return w.Err()
}

// WaitChan returns a channel that is closed once the mark reaches off or fails, for callers that
// select on several things; it is already closed when that has happened. Afterwards Load (or
// Wait, which then returns at once) tells which.
func (w *Watermark) WaitChan(off int64) <-chan struct{} {
	if w.cur.Load() >= off {
		return closedChan
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cur.Load() >= off || w.err != nil {
		return closedChan
	}
	ch := make(chan struct{})
	w.waiters = append(w.waiters, waiter{off, ch})
	return ch
}

var closedChan = func() chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}()
