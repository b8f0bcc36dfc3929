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

	"github.com/rocketstore/engine/internal/wire"
	"github.com/rocketstore/engine/stages/ingress/route"
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

// coreSource is core NATS subscriptions as a Source, the default: Config.Subjects, or the owned
// partitions' subjects under partitioned ingest. Its messages are answered on their reply
// subjects (acks.go), or in their stream's batched acks (worker_batched.go).
type coreSource struct{ in *Ingress }

func (c *coreSource) durable() bool { return false }

// refuse answers a refused message with an error reply.
func (c *coreSource) refuse(m *nats.Msg, code int, err error) {
	c.in.replyError(m.Reply, code, err.Error())
}

// record builds the record of a message: one with the Rs-Seq header is a batched-ack stream's
// (worker_batched.go); one whose Nats-Msg-Id the store had before this start is answered from
// there (storededupe.go); any other is encoded (encode.go) and answered once stored.
func (c *coreSource) record(w *worker, b *batchBuild, j *job) {
	var checked int64
	if h := j.msg.Header; h != nil {
		if vals := h[wire.HeaderSeq]; vals != nil {
			w.batchedMsg(b, j, vals)
			return
		}
		if c.in.cfg.StoreDedupe != nil {
			var answered bool
			if answered, checked = w.answeredFromStore(j); answered {
				return
			}
		}
	}
	rec, err := w.encode(j, b.born)
	if err != nil {
		c.in.settleJob(j, false)
		c.in.reject(j.msg, err)
		return
	}
	rec.DedupeChecked = checked
	b.recs = append(b.recs, rec)
}

// start makes the subscriptions and waits until the server has them.
func (c *coreSource) start(ctx context.Context) error {
	in := c.in
	for _, subject := range in.cfg.Subjects {
		if _, err := in.subscribeOne(subject); err != nil {
			return err
		}
	}
	return in.confirm(ctx)
}

// onMsg is the subscription callback, on nats.go's goroutine for the subscription. It does only
// cheap work and hands the message to the worker that owns its (topic, queue). Blocking here
// when that worker is behind is the back-pressure: nats.go then buffers, up to the pending limits.
func (in *Ingress) onMsg(m *nats.Msg) {
	in.counters.received.Add(1)
	if in.cfg.excluded(m.Subject) {
		in.counters.excluded.Add(1)
		in.answerUnserved(m)
		return
	}
	if m.Header != nil {
		if vals := m.Header[wire.HeaderPack]; vals != nil {
			in.onPack(m, vals)
			return
		}
	}
	rt := in.router.Route(m.Subject)
	if rt.Partition >= 0 && !in.cfg.Partitions.Owns(int(rt.Partition)) {
		in.reject(m, in.notOwned(int(rt.Partition), rt.Stored))
		return
	}
	rt = in.router.Admit(rt, 1) // its topic, or the overflow topic (before its queue is chosen)
	in.hand(job{msg: m, route: rt, queue: in.router.Queue(m, rt)})
}

// excluded reports whether subject is never stored.
func (c *Config) excluded(subject string) bool {
	if route.NeverStored(subject) {
		return true
	}
	return c.Exclude != nil && c.Exclude(subject)
}

// hand gives j to the worker that owns its (topic, queue), or answers it if ingress aborts
// first. A fire-and-forget message is never waited for: when the worker's inbox holds its share
// of the pending limits already, the message is dropped and counted by topic (package inbox).
func (in *Ingress) hand(j job) {
	w := in.workers[j.route.Worker(j.queue, len(in.workers))]
	if fireAndForget(j.msg) {
		if j.ffCost = msgCost(j.msg); !w.box.PutFF(j) {
			in.settleJob(&j, false)
			in.ffDrops.Add(j.route.Topic)
			select {
			case in.slow <- struct{}{}: // Run reports the drops (drops.Reporter)
			default:
			}
		}
		return
	}
	if !in.send(w, j) {
		held := j // only an abort pays for a job on the heap
		in.abandon(&held)
	}
}

// send hands j to w, waiting while w's inbox is full (the back-pressure on the NATS
// callbacks); it returns false if the ingress aborts first.
func (in *Ingress) send(w *worker, j job) bool {
	return w.box.Put(j, nil, in.abort)
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
		if in.ending.Load() {
			// Draining or aborted: nats.go may still drop messages that arrive before the
			// server has the UNSUB, and a closed subscription no longer tells its drop
			// count. A drop happens while messages are pending, whose callbacks run after
			// it, so reading the count here catches it (all but a drop with nothing
			// pending: a message over PendingBytes on its own, arriving after the last
			// callback).
			s.readDropped()
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

// stop drains every subscription and waits until each one's callbacks have ended.
// The drain is the same on a graceful stop and on an abort: on an abort (ctx done) the callbacks
// no longer wait for the workers, they answer 503 at once, so the drain is quick and every
// message nats.go had buffered gets an answer and is counted. If ctx ends during a graceful
// drain, the drain turns into that. Past DrainTimeout (abortDrainTimeout once aborted) the
// subscriptions are unsubscribed instead.
func (c *coreSource) stop(ctx context.Context, cancel context.CancelFunc) {
	in := c.in
	in.ending.Store(true) // before the drain: answerUnserved counts on it
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
				in.drops.Event()
			case <-in.drops.C:
				in.drops.Fire()
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
