package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/rocketstore/engine/stages/ingress"
)

// Moving a partition between engines (docs/SCALE-OUT.md, "Moving a partition"): the old owner
// releases it and says where each of its topics' queues ends; the new owner starts those queues
// there and takes the partition. The logical offsets continue; the old owner's part of the
// history stays readable there (fan-out reads, api.Client.Get falls back to it) until retention
// removes it.

// ErrNoPartitions: a handoff on a server without partitioned ingest.
var ErrNoPartitions = errors.New("engine: not partitioned (NATSOptions.Partitions)")

// PartitionEnds are the next queue offsets of a partition's queue in every topic that has one
// here, by topic: where the next owner starts them.
type PartitionEnds map[string]int64

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

// Partitions is the partitioned-ingest configuration, with the partitions owned now
// (ingress.Partitions.OwnedNow); nil when not partitioned.
func (s *Server) Partitions() *ingress.Partitions { return s.ing.Partitions() }
