package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/rocketstore/engine/stages/ingress/replicated"
	"github.com/rocketstore/engine/stages/ingress/route"
)

// Partition ownership in a replicated JetStream key-value bucket (docs/SCALE-OUT.md, "Ownership
// in a key-value bucket"). One key per partition, p.<n>, holds its owner and the state of a move:
//
//	owned     {"owner":"e1","state":"owned"}                      e1 takes the partition
//	moving    {"owner":"e2","from":"e1","state":"moving"}         MovePartition asked e1 to give it to e2
//	released  {"owner":"e2","from":"e1","state":"released","ends":{"orders":20}}
//	                                                              e1 gave it up; its queues end there
//	owned     {"owner":"e2","state":"owned","ends":{"orders":20}} e2 took it, its queues starting there
//
// Every engine watches the bucket and does its part of each step; every write is a
// compare-and-set on the key's revision, so two writers never both win. An engine starting in
// this mode claims the partitions of its --owned-partitions that nobody owns yet, and takes
// those the bucket says are its own; the bucket, not the flags, decides afterwards.

// Defaults of Ownership.
const (
	DefaultOwnershipBucket   = "RMQ_PARTITIONS"
	DefaultOwnershipReplicas = 3
)

// Ownership turns on ownership from a key-value bucket (NATSOptions.Ownership).
type Ownership struct {
	// Bucket is the key-value bucket (DefaultOwnershipBucket), created with Replicas
	// (DefaultOwnershipReplicas) when it does not exist.
	Bucket   string
	Replicas int
	// EngineID names this engine in the bucket: unique among the engines, stable across restarts.
	EngineID string
}

// Partition states in the bucket.
const (
	PartitionOwned    = "owned"
	PartitionMoving   = "moving"
	PartitionReleased = "released"
)

// PartitionRecord is a partition's value in the bucket.
type PartitionRecord struct {
	Owner string        `json:"owner"`
	State string        `json:"state"`
	From  string        `json:"from,omitempty"`
	Ends  PartitionEnds `json:"ends,omitempty"`
}

// partitionKey is partition p's key.
func partitionKey(p int) string { return "p." + strconv.Itoa(p) }

// OpenOwnershipBucket opens (or creates) the bucket.
func OpenOwnershipBucket(ctx context.Context, js jetstream.JetStream, bucket string, replicas int) (jetstream.KeyValue, error) {
	bucket = cmpOr(bucket, DefaultOwnershipBucket)
	kv, err := js.KeyValue(ctx, bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = replicated.RetryPlacement(ctx, func() (jetstream.KeyValue, error) {
			return js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: bucket, History: 5,
				Replicas: cmpOrInt(replicas, DefaultOwnershipReplicas), Storage: jetstream.FileStorage})
		})
		if errors.Is(err, jetstream.ErrBucketExists) {
			kv, err = js.KeyValue(ctx, bucket)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("ownership bucket %s: %w", bucket, err)
	}
	return kv, nil
}

// readRecord reads partition p's record and its revision (ok false: none).
func readRecord(ctx context.Context, kv jetstream.KeyValue, p int) (PartitionRecord, uint64, bool, error) {
	e, err := kv.Get(ctx, partitionKey(p))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return PartitionRecord{}, 0, false, nil
	}
	if err != nil {
		return PartitionRecord{}, 0, false, err
	}
	var r PartitionRecord
	if err := json.Unmarshal(e.Value(), &r); err != nil {
		return PartitionRecord{}, 0, false, fmt.Errorf("partition %d: record %q: %w", p, e.Value(), err)
	}
	return r, e.Revision(), true, nil
}

// claimPartitions is the start of an engine in this mode: it claims the partitions of claims
// nobody owns yet, and returns the partitions the bucket gives it, with the queue starts of
// those it took over.
func claimPartitions(ctx context.Context, kv jetstream.KeyValue, me string, count int, claims []int) ([]int, map[int]PartitionEnds, error) {
	for _, p := range claims {
		rec, _ := json.Marshal(PartitionRecord{Owner: me, State: PartitionOwned})
		if _, err := kv.Create(ctx, partitionKey(p), rec); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
			return nil, nil, fmt.Errorf("claim partition %d: %w", p, err)
		}
	}
	var owned []int
	starts := map[int]PartitionEnds{}
	for p := range count {
		r, _, ok, err := readRecord(ctx, kv, p)
		if err != nil {
			return nil, nil, err
		}
		if ok && r.Owner == me && r.State == PartitionOwned {
			owned = append(owned, p)
			if len(r.Ends) > 0 {
				starts[p] = r.Ends
			}
		}
	}
	return owned, starts, nil
}

// watchOwnership follows the bucket until ctx ends, doing this engine's part of every move.
func (s *Server) watchOwnership(ctx context.Context, kv jetstream.KeyValue, me string) {
	log := s.Engine.opts.Logger.With().Str("stage", "ownership").Logger()
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
			if err != nil || p < 0 || p >= s.ing.Partitions().Count {
				continue
			}
			var r PartitionRecord
			if json.Unmarshal(e.Value(), &r) != nil {
				log.Warn().Str("key", e.Key()).Msg("ownership: a record that is not JSON: ignored")
				continue
			}
			if err := s.applyOwnership(ctx, kv, me, p, r, e.Revision()); err != nil && ctx.Err() == nil {
				log.Error().Err(err).Int("partition", p).Str("state", r.State).Msg("ownership: a step of a move failed")
			}
		}
		_ = w.Stop()
	}
}

// applyOwnership does this engine's part for partition p's record r.
func (s *Server) applyOwnership(ctx context.Context, kv jetstream.KeyValue, me string, p int, r PartitionRecord, rev uint64) error {
	owns := slices.Contains(s.ing.Partitions().OwnedNow(), p)
	switch {
	case r.State == PartitionMoving && r.From == me:
		ends, err := s.ReleasePartition(ctx, p) // also when not owned now: says where its queues end
		if err != nil {
			return err
		}
		next, _ := json.Marshal(PartitionRecord{Owner: r.Owner, From: me, State: PartitionReleased, Ends: ends})
		_, err = kv.Update(ctx, partitionKey(p), next, rev)
		return err
	case r.State == PartitionReleased && r.Owner == me:
		if !owns {
			if err := s.AcquirePartition(ctx, p, r.Ends); err != nil {
				return err
			}
		}
		next, _ := json.Marshal(PartitionRecord{Owner: me, State: PartitionOwned, Ends: r.Ends})
		_, err := kv.Update(ctx, partitionKey(p), next, rev)
		return err
	case r.State == PartitionOwned && r.Owner == me && !owns:
		return s.AcquirePartition(ctx, p, r.Ends)
	case r.State == PartitionOwned && r.Owner != me && owns:
		// Given to another engine behind our back (a record written by hand): stop taking it.
		_, err := s.ReleasePartition(ctx, p)
		return err
	}
	return nil
}

// MovePartition asks, through the bucket, that partition p move to the engine to, and waits
// until that engine owns it (ctx bounds the wait). It returns where the queues continue.
func MovePartition(ctx context.Context, kv jetstream.KeyValue, p int, to string) (PartitionEnds, error) {
	r, rev, ok, err := readRecord(ctx, kv, p)
	switch {
	case err != nil:
		return nil, err
	case !ok:
		return nil, fmt.Errorf("partition %d has no owner in the bucket", p)
	case r.State != PartitionOwned:
		return nil, fmt.Errorf("partition %d: a move is under way (%s from %s to %s)", p, r.State, r.From, r.Owner)
	case r.Owner == to:
		return r.Ends, nil
	}
	w, err := kv.Watch(ctx, partitionKey(p), jetstream.UpdatesOnly())
	if err != nil {
		return nil, err
	}
	defer func() { _ = w.Stop() }()
	next, _ := json.Marshal(PartitionRecord{Owner: to, From: r.Owner, State: PartitionMoving})
	if _, err := kv.Update(ctx, partitionKey(p), next, rev); err != nil {
		return nil, fmt.Errorf("partition %d: %w (another move?)", p, err)
	}
	for {
		select {
		case e := <-w.Updates():
			if e == nil {
				continue
			}
			var cur PartitionRecord
			if json.Unmarshal(e.Value(), &cur) == nil && cur.State == PartitionOwned {
				if cur.Owner != to {
					return nil, fmt.Errorf("partition %d: owned by %s, not %s", p, cur.Owner, to)
				}
				return cur.Ends, nil
			}
		case <-ctx.Done():
			return nil, fmt.Errorf("partition %d: the move to %s did not finish: %w", p, to, ctx.Err())
		}
	}
}

// ingressPartitions is the ingress configuration under ownership from the bucket: the owned set
// comes from the bucket, and may start empty.
func ingressPartitions(base *route.Partitions, owned []int) *route.Partitions {
	p := *base
	p.Owned, p.Dynamic = owned, true
	return &p
}
