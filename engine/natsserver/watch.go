package natsserver

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

// Handoff is what the watcher needs of the engine for its part of a move (engine.Server
// implements it): giving a partition up, saying where its queues end, and taking one over
// where another engine's queues ended.
type Handoff interface {
	ReleasePartition(ctx context.Context, p int) (PartitionEnds, error)
	AcquirePartition(ctx context.Context, p int, ends PartitionEnds) error
}

// Watch follows the bucket until ctx ends, doing this engine's part of every move through h;
// owned says which partitions the engine takes now.
func (b *Bucket) Watch(ctx context.Context, h Handoff, owned func() []int, log zerolog.Logger) {
	kv, me := b.kv, b.me
	log = log.With().Str("stage", "ownership").Logger()
	for ctx.Err() == nil {
		w, err := kv.WatchAll(ctx)
		if err != nil {
			log.Warn().Err(err).Msg("ownership: watch failed; again in a second")
			select {
			case <-time.After(time.Second):
			case <-ctx.Done():
			}
			continue
		}
		for e := range w.Updates() {
			if e == nil || e.Operation() != jetstream.KeyValuePut {
				continue // the end of the initial values, or a deletion
			}
			p, err := strconv.Atoi(strings.TrimPrefix(e.Key(), "p."))
			if err != nil || p < 0 || p >= b.count {
				continue
			}
			var r PartitionRecord
			if json.Unmarshal(e.Value(), &r) != nil {
				log.Warn().Str("key", e.Key()).Msg("ownership: a record that is not JSON: ignored")
				continue
			}
			if err := applyOwnership(ctx, kv, h, owned, me, p, r, e.Revision()); err != nil && ctx.Err() == nil {
				log.Error().Err(err).Int("partition", p).Str("state", r.State).Msg("ownership: a step of a move failed")
			}
		}
		_ = w.Stop()
	}
}

// applyOwnership does this engine's part for partition p's record r.
func applyOwnership(ctx context.Context, kv jetstream.KeyValue, h Handoff, owned func() []int, me string, p int, r PartitionRecord, rev uint64) error {
	owns := slices.Contains(owned(), p)
	switch {
	case r.State == PartitionMoving && r.From == me:
		ends, err := h.ReleasePartition(ctx, p) // also when not owned now: says where its queues end
		if err != nil {
			return err
		}
		next, _ := json.Marshal(PartitionRecord{Owner: r.Owner, From: me, State: PartitionReleased, Ends: ends})
		_, err = kv.Update(ctx, partitionKey(p), next, rev)
		return err
	case r.State == PartitionReleased && r.Owner == me:
		if !owns {
			if err := h.AcquirePartition(ctx, p, r.Ends); err != nil {
				return err
			}
		}
		next, _ := json.Marshal(PartitionRecord{Owner: me, State: PartitionOwned, Ends: r.Ends})
		_, err := kv.Update(ctx, partitionKey(p), next, rev)
		return err
	case r.State == PartitionOwned && r.Owner == me && !owns:
		return h.AcquirePartition(ctx, p, r.Ends)
	case r.State == PartitionOwned && r.Owner != me && owns:
		// Given to another engine behind our back (a record written by hand): stop taking it.
		_, err := h.ReleasePartition(ctx, p)
		return err
	}
	return nil
}
