package ingress

import (
	"context"
	"fmt"
	"runtime/pprof"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
)

// abortDrainTimeout bounds the drain of an abort (see endSubscriptions).
const abortDrainTimeout = 2 * time.Second

// subscription is one live subscription and the signal that its callbacks have ended.
type subscription struct {
	sub *nats.Subscription
	// done is closed by the closed handler, which nats.go calls on the callback goroutine after
	// the last callback returned.
	done chan struct{}
	// busy is 1 while the callback handles a message (see unsubscribeAll).
	busy atomic.Int32
	// dropped is the last count read from sub.Dropped, which fails once sub is closed.
	mu      sync.Mutex
	dropped int64 // guarded by mu
}

// readDropped returns nats.go's drop count for the subscription, or the last one read.
func (s *subscription) readDropped() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if d, err := s.sub.Dropped(); err == nil && int64(d) > s.dropped {
		s.dropped = int64(d)
	}
	return s.dropped
}

func (in *Ingress) subscriptions() []*subscription {
	in.subsMu.Lock()
	defer in.subsMu.Unlock()
	return slices.Clone(in.subs)
}

// subscribe makes the subscriptions and waits until the server has them.
func (in *Ingress) subscribe(ctx context.Context) error {
	if in.cfg.JetStream != nil {
		return in.startJetStream(ctx)
	}
	if in.cfg.Replicated != nil {
		return in.startReplicated(ctx)
	}
	for _, subject := range in.cfg.Subjects {
		if _, err := in.subscribeOne(subject); err != nil {
			return err
		}
	}
	return in.confirm(ctx)
}

// confirm waits until the server has every subscription made so far.
func (in *Ingress) confirm(ctx context.Context) error {
	fctx, cancel := context.WithTimeout(ctx, subscribeTimeout)
	defer cancel()
	if err := in.cfg.Conn.FlushWithContext(fctx); err != nil {
		return fmt.Errorf("ingress: confirming the subscriptions with the server: %w", err)
	}
	return nil
}

// subscribeOne subscribes to subject and adds the subscription to in.subs.
func (in *Ingress) subscribeOne(subject string) (*subscription, error) {
	nc := in.cfg.Conn
	s := &subscription{done: make(chan struct{})}
	handler := func(m *nats.Msg) {
		s.busy.Store(1)
		in.onMsg(m)
		s.busy.Store(0)
		select {
		case <-in.stop:
			// Draining: nats.go may still drop messages that arrive before the server has
			// the UNSUB, and a closed subscription no longer tells its drop count. A drop
			// happens while messages are pending, whose callbacks run after it, so reading
			// the count here catches it (all but a drop with nothing pending: a message
			// over PendingBytes on its own, arriving after the last callback).
			s.readDropped()
		case <-in.abort:
			s.readDropped()
		default:
		}
	}
	var err error
	if in.cfg.QueueGroup != "" {
		s.sub, err = nc.QueueSubscribe(subject, in.cfg.QueueGroup, handler)
	} else {
		s.sub, err = nc.Subscribe(subject, handler)
	}
	if err != nil {
		return nil, fmt.Errorf("ingress: subscribe to %q: %w", subject, err)
	}
	sub := s.sub
	var once sync.Once
	closeDone := func() { once.Do(func() { close(s.done) }) }
	sub.SetClosedHandler(func(string) { closeDone() })
	if !sub.IsValid() {
		// Closed before the handler was set (the connection closed just now): nats.go may
		// have read the nil handler already and would never call ours.
		closeDone()
	}
	in.subsMu.Lock()
	in.subs = append(in.subs, s)
	in.subsMu.Unlock()
	if err := sub.SetPendingLimits(in.cfg.PendingMsgs, in.cfg.PendingBytes); err != nil {
		return nil, fmt.Errorf("ingress: pending limits of %q: %w", subject, err)
	}
	in.watchSlow(sub)
	return s, nil
}

// watchSlow forwards the subscription's slow-consumer events to Run until Run ends. Its own
// goroutine, because nats.go hands the events over on a channel per subscription.
func (in *Ingress) watchSlow(sub *nats.Subscription) {
	events := sub.StatusChanged(nats.SubscriptionSlowConsumer)
	in.watchers.Go(func() {
		pprof.Do(context.Background(), pprof.Labels("stage", "ingress-slow-watch"), func(context.Context) {
			for {
				select {
				case _, ok := <-events:
					if !ok {
						return // subscription closed
					}
					in.counters.slowEvents.Add(1)
					select {
					case in.slow <- struct{}{}:
					default: // one pending event is enough
					}
				case <-in.quit:
					return // nats.go does not close events when the connection closes
				}
			}
		})
	})
}

// endSubscriptions drains every subscription and waits until each one's callbacks have ended.
// The drain is the same on a graceful stop and on an abort: on an abort (ctx done) the callbacks
// no longer wait for the workers, they answer 503 at once, so the drain is quick and every
// message nats.go had buffered gets an answer and is counted. If ctx ends during a graceful
// drain, the drain turns into that. Past DrainTimeout (abortDrainTimeout once aborted) the
// subscriptions are unsubscribed instead.
func (in *Ingress) endSubscriptions(ctx context.Context, cancel context.CancelFunc) {
	if in.js != nil {
		in.stopJetStream()
		return
	}
	if in.repl != nil {
		in.stopReplicated()
		return
	}
	subs := in.subscriptions()
	for _, s := range subs {
		s.readDropped() // Dropped cannot be read once the subscription is closed
		if err := s.sub.Drain(); err != nil {
			// Closed already (connection closed): its closed handler fires all the same.
			in.log.Debug().Err(err).Str("subject", s.sub.Subject).Msg("drain")
		}
	}
	timeout := time.NewTimer(in.cfg.DrainTimeout)
	defer timeout.Stop()
	aborted := ctx.Done()
	for _, s := range subs {
		for waiting := true; waiting; { // ends: the timeout unsubscribes, which closes s.done
			select {
			case <-s.done:
				waiting = false
			case <-aborted:
				// The callbacks now answer at once, so this drain is short unless the
				// connection itself is stuck: do not let an abort wait the whole DrainTimeout.
				cancel()
				aborted = nil
				timeout.Reset(abortDrainTimeout)
			case <-timeout.C:
				in.log.Warn().Dur("timeout", in.cfg.DrainTimeout).
					Msg("ingress: drain timed out; unsubscribing, what nats.go still buffers is dropped")
				in.unsubscribeAll()
			case <-in.slow:
				in.drops.event()
			case <-in.drops.c:
				in.drops.fire()
			}
		}
	}
}

// unsubscribeAll removes every subscription without a drain, counting what nats.go still held
// for it as dropped: its pending count less the message a callback is handling (which nats.go
// counts as pending until the callback returns). Approximate by at most one message per
// subscription whose callback returns at that very moment.
func (in *Ingress) unsubscribeAll() {
	for _, s := range in.subscriptions() {
		s.readDropped()
		if n, _, err := s.sub.Pending(); err == nil {
			in.counters.discarded.Add(int64(max(n-int(s.busy.Load()), 0)))
		}
		if err := s.sub.Unsubscribe(); err != nil {
			in.log.Debug().Err(err).Str("subject", s.sub.Subject).Msg("unsubscribe")
		}
	}
}
