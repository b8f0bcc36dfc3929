package ingress

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/rocketstore/engine/stages/ingress/route"
)

// Moving a partition between engines (docs/SCALE-OUT.md, "Moving a partition"). The engine that
// gives a partition up stops taking it (RemovePartition: its subscription drained, then a fence
// through every worker, so that everything taken for it has been appended when it returns); the
// engine that takes it over starts its queues at the next offsets (the engine's business) and
// then subscribes (AddPartition). Ownership is checked per message, so a message that reaches an
// engine for a partition it gave up is refused (503, ErrNotOwned): its publisher retries and
// reaches the new owner.

// fence is a worker job that is closed once every message the worker took before it has been
// appended and acked (the core source's done closes it).
type fence chan struct{}

// errFence is a fence record's error: never replied, never counted.
var errFence = errors.New("ingress: fence")

// ErrNotOwned: a message for a partition this engine does not own (503: the owner may come back,
// or the partition may move here; the publisher retries).
var ErrNotOwned = fmt.Errorf("%w: partition not owned by this engine", ErrUnavailable)

// ErrNotPartitioned: AddPartition or RemovePartition without partitioned ingest.
var ErrNotPartitioned = errors.New("ingress: not partitioned (Config.Partitions)")

// notOwned is the error of a message for partition part, which this engine does not own now.
func (in *Ingress) notOwned(part int, subject string) error {
	p := in.cfg.Partitions
	return fmt.Errorf("%w: partition %d of %d (subject %.200q); this engine owns %v", ErrNotOwned, part, p.Count,
		subject, p.OwnedNow())
}

// AddPartition starts taking partition part: it becomes owned, and its subscription is made and
// confirmed by the server. Taking a partition already owned does nothing. Only core NATS
// subscriptions move partitions so (a replicated partition moves with its consumer's pin).
func (in *Ingress) AddPartition(ctx context.Context, part int) error {
	if in.cfg.Partitions == nil {
		return ErrNotPartitioned
	}
	return in.src.addPartition(ctx, part)
}

func (c *coreSource) addPartition(ctx context.Context, part int) error {
	in, p := c.in, c.in.cfg.Partitions
	if part < 0 || part >= p.Count {
		return fmt.Errorf("ingress: partition %d: want 0 to %d", part, p.Count-1)
	}
	in.partMu.Lock()
	defer in.partMu.Unlock()
	if p.Owns(part) {
		return nil
	}
	p.SetOwned(part, true)
	s, err := in.subscribeOne(route.PartitionSubject(p.Prefix, part) + ".>")
	if err == nil {
		err = in.confirm(ctx)
	}
	if err != nil {
		p.SetOwned(part, false)
		if s != nil {
			in.dropSubscription(s)
		}
		return err
	}
	return nil
}

// RemovePartition stops taking partition part. Its subscription is drained (every message NATS
// delivered for it is handed to its worker), it is no longer owned (a message for it that comes
// all the same is refused with 503), and a fence through every worker makes RemovePartition
// return only once every message taken for the partition has been appended and acked at the
// level of its batch (written, in async mode: the caller waits for durability if it needs it).
// Giving up a partition not owned does nothing.
func (in *Ingress) RemovePartition(ctx context.Context, part int) error {
	if in.cfg.Partitions == nil {
		return ErrNotPartitioned
	}
	return in.src.removePartition(ctx, part)
}

func (c *coreSource) removePartition(ctx context.Context, part int) error {
	in, p := c.in, c.in.cfg.Partitions
	in.partMu.Lock()
	defer in.partMu.Unlock()
	if part < 0 || part >= p.Count || !p.Owns(part) {
		return nil
	}
	subject := route.PartitionSubject(p.Prefix, part) + ".>"
	var s *subscription
	for _, c := range in.subscriptions() {
		if c.sub.Subject == subject {
			s = c
		}
	}
	if s != nil {
		if err := s.sub.Drain(); err != nil {
			in.log.Debug().Err(err).Str("subject", subject).Msg("drain")
		}
		select {
		case <-s.done:
		case <-ctx.Done():
			return fmt.Errorf("ingress: give up partition %d: %w", part, ctx.Err())
		}
		in.dropSubscription(s)
	}
	p.SetOwned(part, false)
	return in.fenceWorkers(ctx)
}

// dropSubscription removes s from in.subs.
func (in *Ingress) dropSubscription(s *subscription) {
	in.subsMu.Lock()
	defer in.subsMu.Unlock()
	in.subs = slices.DeleteFunc(in.subs, func(c *subscription) bool { return c == s })
}

// fenceWorkers sends a fence through every worker and waits until all are acked.
func (in *Ingress) fenceWorkers(ctx context.Context) error {
	fences := make([]fence, len(in.workers))
	for i, w := range in.workers {
		fences[i] = make(fence)
		if !w.box.Put(job{fence: fences[i]}, ctx.Done(), in.abort) {
			if ctx.Err() != nil {
				return fmt.Errorf("ingress: fence: %w", ctx.Err())
			}
			return ErrStopped
		}
	}
	for _, f := range fences {
		select {
		case <-f:
		case <-ctx.Done():
			return fmt.Errorf("ingress: fence: %w", ctx.Err())
		case <-in.abort:
			return ErrStopped
		}
	}
	return nil
}
