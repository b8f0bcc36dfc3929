package benchmarks

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/nats-io/nats.go"

	rspub "github.com/rocketstore/engine/engine/publisher"
)

// Batched acks in the publisher process (rspub: the engine's publisher package, named apart from
// this package's publisher type). Each publisher (one connection, one goroutine) is one
// stream of the engine's own client, rspub.Publisher, with Load.Window as its window: the
// run measures what an application that uses the package gets, resends and all, rather than a
// re-implementation of the protocol. The package adds its headers (Rs-Seq, which the engine does
// not store, and the message id it derives from the stream id and the sequence, stored as
// UNIQ_KEY); the bodies are the harness's, so verification tallies them as in any other mode.
//
// Latency runs from Publish taking the message (Future.Published: after it waited for room in
// the window, so that, as in request/reply, the wait for a free slot is not counted; before the
// message waited in a pack, which is counted) to its future's resolution, on the publisher's
// monotonic clock. Load.Unpacked turns packs off (publisher.Options.MaxPack 1).

// batched is one publisher's batched-ack stream and what it measures.
type batched struct {
	p     *publisher // its counters (acked, ackErrors) feed the progress line
	pub   *rspub.Publisher
	nc    *nats.Conn
	stall time.Duration
	// bodies are the messages' buffers (see body); next counts the Publish calls that gave out
	// a sequence. Publishing goroutine only.
	bodies [][]byte
	next   uint64
	closed bool

	mu   sync.Mutex
	hist *hdrhistogram.Histogram
	// Counted by onResult, once per future (acked ones in p.acked, with a latency): failed, and
	// unanswered (failed with ErrClosed: Close gave up on it).
	failed, unanswered int64
	firstErr           error
	lastAck            time.Duration // since epoch
	answered, want     int64
	allDone            chan struct{} // closed once answered reaches want
}

// newBatched starts p's stream on its connection: the package subscribes to the stream's ack
// inbox (confirmed by the server) before the clock starts.
//
// The body buffers are Window+1: Publish of sequence s returns only once every sequence up to
// s-Window is answered, and the buffer of s+1 was last that of s-Window, so it is free (a future
// answered is never sent again).
func newBatched(p *publisher) (*batched, error) {
	w := p.cfg.Load.Window
	b := &batched{
		p: p, nc: p.nc, stall: p.stall,
		bodies: make([][]byte, w+1),
		hist:   newLatencyHistogram(),
		want:   -1, allDone: make(chan struct{}),
	}
	var err error
	opts := rspub.Options{Window: w, OnResult: b.onResult}
	if p.cfg.Load.Unpacked {
		opts.MaxPack = 1
	}
	b.pub, err = rspub.New(p.nc, opts)
	if err != nil {
		return nil, fmt.Errorf("publisher %d: batched acks: %w", p.id, err)
	}
	return b, nil
}

// body returns the buffer of the next message, the publisher's body copied on first use. The
// message must keep it until its future is answered: a resend sends it again.
func (b *batched) body() []byte {
	i := b.next % uint64(len(b.bodies))
	if b.bodies[i] == nil {
		b.bodies[i] = slices.Clone(b.p.body)
	}
	return b.bodies[i]
}

// publish sends body (the last buffer body returned) on subject. It waits while the window is
// full.
func (b *batched) publish(ctx context.Context, subject string, body []byte) error {
	if _, err := b.pub.Publish(ctx, subject, body, nil); err != nil {
		if c := context.Cause(ctx); c != nil && ctx.Err() != nil {
			err = c
		}
		return err
	}
	b.next++
	return nil
}

// onResult is the Publisher's OnResult: one call per future, as it resolves.
func (b *batched) onResult(f *rspub.Future, _ rspub.Ack, err error) {
	now := f.Answered() // when the ack came: no clock read per message here
	var seq uint64
	if err != nil {
		seq = f.Seq() // before b.mu: Seq takes the Publisher's lock
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case err == nil:
		recordLatency(b.hist, now.Sub(f.Published()))
		b.lastAck = max(b.lastAck, now.Sub(epoch))
		b.p.acked.Add(1)
	case errors.Is(err, rspub.ErrClosed):
		b.unanswered++
	default:
		b.failed++
		b.p.ackErrors.Add(1)
		if b.firstErr == nil {
			b.firstErr = fmt.Errorf("seq %d: %w", seq, err)
		}
	}
	b.answered++
	if b.answered == b.want {
		close(b.allDone)
	}
}

// expect sets how many futures onResult will see in all.
func (b *batched) expect(n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.want = n
	if b.answered == n {
		close(b.allDone)
	}
}

// watch returns ctx, cancelled once neither a publish nor an answer happened for the stall
// time (the window full and no ack, or the last acks not coming), with the cause; stop ends
// the watch.
func (b *batched) watch(ctx context.Context) (context.Context, func()) {
	wctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	moved := func() int64 { return b.p.published.Load() + b.p.acked.Load() + b.p.ackErrors.Load() }
	go func() {
		tick := time.NewTicker(max(b.stall/8, time.Millisecond))
		defer tick.Stop()
		seen, since := moved(), time.Now()
		for {
			select {
			case <-done:
				return
			case <-wctx.Done():
				return
			case now := <-tick.C:
				if cur := moved(); cur != seen {
					seen, since = cur, now
				} else if now.Sub(since) >= b.stall {
					cancel(fmt.Errorf("no publish and no ack for %s (window %d)", b.stall, len(b.bodies)-1))
					return
				}
			}
		}
	}()
	return wctx, func() { close(done); cancel(nil) }
}

// finish waits for the answers to everything published (Flush, under the watch), stops the
// stream (Close; after a failed wait, what is still open fails with ErrClosed at once), waits
// until onResult has seen every future, and hands the histogram and the counts to p. Any
// message not acknowledged is an error: the run is invalid.
func (b *batched) finish(ctx context.Context) error {
	ferr := b.pub.Flush(ctx)
	if ferr != nil && ctx.Err() != nil {
		ferr = fmt.Errorf("waiting for acks: %w", context.Cause(ctx))
	}
	cerr := b.close(ferr != nil)
	b.expect(int64(b.next))
	t := time.NewTimer(b.stall)
	defer t.Stop()
	select {
	case <-b.allDone:
	case <-t.C:
		return errors.Join(ferr, cerr, fmt.Errorf("publisher %d: %d futures never resolved", b.p.id, int64(b.next)-b.answeredNow()))
	}
	st := b.pub.Stats()
	b.mu.Lock()
	defer b.mu.Unlock()
	p := b.p
	p.hist, p.repliesStopped = b.hist, true
	p.missing, p.resent, p.ackMessages = b.unanswered, st.Resent, st.AckMessages
	if b.lastAck > 0 {
		p.lastReply = epoch.Add(b.lastAck).UnixNano()
	}
	var errs []error
	if b.failed > 0 || b.unanswered > 0 || ferr != nil {
		err := fmt.Errorf("publisher %d: %d of %d messages acked, %d failed, %d unanswered",
			p.id, p.acked.Load(), b.next, b.failed, b.unanswered)
		if b.firstErr != nil {
			err = fmt.Errorf("%w (first failure: %w)", err, b.firstErr)
		}
		errs = append(errs, err, ferr)
	}
	if ferr == nil && cerr != nil {
		errs = append(errs, fmt.Errorf("publisher %d: close: %w", p.id, cerr))
	}
	return errors.Join(errs...)
}

func (b *batched) answeredNow() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.answered
}

// close stops the stream once: at once if giveUp (what is open fails with ErrClosed), else
// after the answers to what is in flight, for at most the stall time.
func (b *batched) close(giveUp bool) error {
	if b.closed {
		return nil
	}
	b.closed = true
	ctx, cancel := context.WithTimeout(context.Background(), b.stall)
	defer cancel()
	if giveUp {
		cancel()
	}
	err := b.pub.Close(ctx)
	if giveUp {
		return nil // the failures are counted by onResult; the wait's error says why
	}
	return err
}
