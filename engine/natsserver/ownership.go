package natsserver

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rocketstore/engine/stages/ingress/replicated"
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

// PartitionEnds are the next queue offsets of a partition's queue in every topic that has one
// on the engine that released it, by topic: where the next owner starts them.
type PartitionEnds map[string]int64

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
	bucket = cmp.Or(bucket, DefaultOwnershipBucket)
	kv, err := js.KeyValue(ctx, bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = replicated.RetryPlacement(ctx, func() (jetstream.KeyValue, error) {
			return js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: bucket, History: 5,
				Replicas: orDefault(replicas, DefaultOwnershipReplicas), Storage: jetstream.FileStorage})
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

// Bucket is the ownership bucket as an engine in this mode holds it (Claim): its watcher runs
// on it (Watch).
type Bucket struct {
	kv    jetstream.KeyValue
	me    string
	count int
}

// Claim is the start of an engine in this mode, on nc: it opens (or creates) the bucket, claims
// the partitions of claims nobody owns yet, and returns the partitions the bucket gives it out
// of count, with the queue starts of those it took over.
func Claim(ctx context.Context, nc *nats.Conn, o Ownership, count int, claims []int) (*Bucket, []int, map[int]PartitionEnds, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, nil, nil, err
	}
	kv, err := OpenOwnershipBucket(ctx, js, o.Bucket, o.Replicas)
	if err != nil {
		return nil, nil, nil, err
	}
	owned, starts, err := claimPartitions(ctx, kv, o.EngineID, count, claims)
	if err != nil {
		return nil, nil, nil, err
	}
	return &Bucket{kv: kv, me: o.EngineID, count: count}, owned, starts, nil
}

// claimPartitions claims the partitions of claims nobody owns yet, and returns the partitions
// the bucket gives me, with the queue starts of those it took over.
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

func orDefault(v, def int) int {
	if v <= 0 {
		return def
	}
	return v
}
