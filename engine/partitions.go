package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/rocketstore/engine/engine/natsserver"
	"github.com/rocketstore/engine/stages/ingress/route"
)

// Moving a partition between engines (docs/SCALE-OUT.md, "Moving a partition"): the old owner
// releases it and says where each of its topics' queues ends; the new owner starts those queues
// there and takes the partition. The logical offsets continue; the old owner's part of the
// history stays readable there (fan-out reads, api.Client.Get falls back to it) until retention
// removes it.

// ErrNoPartitions: a handoff on a server without partitioned ingest.
var ErrNoPartitions = errors.New("engine: not partitioned (NATSOptions.Partitions)")

// Ownership turns on partition ownership from a key-value bucket (NATSOptions.Ownership;
// engine/natsserver holds the bucket, the claims and the watcher).
type Ownership = natsserver.Ownership

// PartitionEnds are the next queue offsets of a partition's queue in every topic that has one
// here, by topic: where the next owner starts them.
type PartitionEnds = natsserver.PartitionEnds

// ReleasePartition gives partition p up: ingress stops taking it (its subscription drained,
// every message taken for it appended), its per-partition read subjects are no longer served
// here, and once everything written is durable and dispatched, it returns where each topic's
// queue p ends. A message for p that reaches this engine afterwards is refused (503).
func (s *Server) ReleasePartition(ctx context.Context, p int) (PartitionEnds, error) {
	if s.ing.Partitions() == nil {
		return nil, ErrNoPartitions
	}
	if err := s.ing.RemovePartition(ctx, p); err != nil {
		return nil, err
	}
	if s.api != nil {
		s.api.UnservePartition(p)
	}
	end := s.Engine.Offsets().Written
	if err := s.Engine.Sync(ctx); err != nil {
		return nil, fmt.Errorf("engine: release partition %d: %w", p, err)
	}
	if err := s.Engine.WaitDispatched(ctx, end); err != nil {
		return nil, fmt.Errorf("engine: release partition %d: %w", p, err)
	}
	ends := PartitionEnds{}
	for _, t := range s.Engine.Topics() {
		qs, err := s.Engine.QueueOffsets(t.Name)
		if err != nil {
			return nil, err
		}
		for _, q := range qs {
			if int(q.QueueID) == p {
				ends[t.Name] = q.Max
			}
		}
	}
	s.Engine.opts.Logger.Info().Int("partition", p).Any("ends", ends).Msg("partition released")
	return ends, nil
}

// AcquirePartition takes partition p over from the engine that released it with ends: every
// topic's queue p continues at its end (StartQueue, persisted), then the partition's read
// subjects are served here and ingress takes it.
func (s *Server) AcquirePartition(ctx context.Context, p int, ends PartitionEnds) error {
	parts := s.ing.Partitions()
	if parts == nil {
		return ErrNoPartitions
	}
	if p < 0 || p >= parts.Count {
		return fmt.Errorf("engine: partition %d: want 0 to %d", p, parts.Count-1)
	}
	for topic, next := range ends {
		if err := s.Engine.StartQueue(ctx, topic, int32(p), next); err != nil {
			return err
		}
	}
	if s.api != nil {
		if err := s.api.ServePartition(p); err != nil {
			return err
		}
	}
	if err := s.ing.AddPartition(ctx, p); err != nil {
		return err
	}
	s.Engine.opts.Logger.Info().Int("partition", p).Any("starts", ends).Msg("partition acquired")
	return nil
}

// claimOwnership is the start of an engine whose partition ownership comes from the bucket
// (NATSOptions.Ownership): it claims, reads what the bucket gives it, and starts the queues it
// took over; it returns ingress's partitions, the owned set from the bucket (which may start
// empty), and the bucket (nil without it).
func (s *Server) claimOwnership(ctx context.Context, nopts NATSOptions) (*route.Partitions, *natsserver.Bucket, error) {
	parts, o := nopts.Partitions, nopts.Ownership
	if o == nil {
		return parts, nil, nil
	}
	if parts == nil || nopts.Replicated != nil || o.EngineID == "" {
		return nil, nil, errors.New("ownership from a bucket needs partitioned ingest (not replicated: the pins decide there) and an engine id")
	}
	count := parts.Count
	if count <= 0 {
		count = route.DefaultPartitionCount
	}
	bucket, owned, starts, err := natsserver.Claim(ctx, s.conn, *o, count, parts.Owned)
	if err != nil {
		return nil, nil, err
	}
	for p, ends := range starts {
		for topic, next := range ends {
			if err := s.Engine.StartQueue(ctx, topic, int32(p), next); err != nil {
				return nil, nil, err
			}
		}
	}
	claimed := *parts
	claimed.Owned, claimed.Dynamic = owned, true
	return &claimed, bucket, nil
}

// watchOwnership runs the ownership watcher (natsserver.Bucket.Watch) as a stage of the
// engine's group: the first error of any stage ends it, and Shutdown and Abort stop it, and wait
// for the step under way, before anything else (endOwnership).
func (s *Server) watchOwnership(b *natsserver.Bucket) error {
	stopped, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	owned := func() []int { return s.ing.Partitions().OwnedNow() }
	if err := s.Engine.RunProducer("ownership", func(ctx context.Context) error {
		defer close(done)
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		defer context.AfterFunc(stopped, cancel)()
		b.Watch(ctx, s, owned, s.Engine.opts.Logger)
		return nil
	}, stop); err != nil {
		stop()
		return err
	}
	s.stopOwnership, s.ownershipDone = stop, done
	return nil
}

// endOwnership stops the ownership watcher and waits for it (a step under way finishes).
func (s *Server) endOwnership() {
	if s.stopOwnership != nil {
		s.stopOwnership()
		<-s.ownershipDone
	}
}

// Partitions is the partitioned-ingest configuration, with the partitions owned now
// (route.Partitions.OwnedNow); nil when not partitioned.
func (s *Server) Partitions() *route.Partitions { return s.ing.Partitions() }
