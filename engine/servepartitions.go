package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rocketstore/engine/stages/ingress"
)

// addPartitionMappings adds the mappings of PartitionSources to the embedded server's global
// account (before any client connects: a mapping applies where a message enters NATS).
func (s *Server) addPartitionMappings(ns *server.Server) error {
	if len(s.opts.PartitionSources) == 0 {
		return nil
	}
	p := s.opts.Partitions
	if p == nil {
		return errors.New("partition sources without partitioned ingest")
	}
	prefix, count := cmpOr(p.Prefix, ingress.DefaultPartitionPrefix), p.Count
	if count == 0 {
		count = ingress.DefaultPartitionCount
	}
	for _, src := range s.opts.PartitionSources {
		subject, n, err := ingress.SplitPartitionSource(src, count)
		if err != nil {
			return err
		}
		dest, err := ingress.PartitionMapping(prefix, n, subject)
		if err != nil {
			return err
		}
		if err := ns.GlobalAccount().AddMapping(subject, dest); err != nil {
			return fmt.Errorf("embedded nats: mapping %q -> %q: %w", src, dest, err)
		}
	}
	return nil
}

// claimOwnership is the start of an engine whose partition ownership comes from the bucket
// (NATSOptions.Ownership, ownership.go): it claims, reads what the bucket gives it, and starts
// the queues it took over; it returns ingress's partitions and the bucket (nil without it).
func (s *Server) claimOwnership(ctx context.Context, nopts NATSOptions) (*ingress.Partitions, jetstream.KeyValue, error) {
	parts := nopts.Partitions
	if o := nopts.Ownership; o != nil {
		if parts == nil || nopts.Replicated != nil || o.EngineID == "" {
			return nil, nil, errors.New("ownership from a bucket needs partitioned ingest (not replicated: the pins decide there) and an engine id")
		}
		js, err := jetstream.New(s.conn)
		if err != nil {
			return nil, nil, err
		}
		kv, err := OpenOwnershipBucket(ctx, js, o.Bucket, o.Replicas)
		if err != nil {
			return nil, nil, err
		}
		count := cmpOrInt(parts.Count, ingress.DefaultPartitionCount)
		owned, starts, err := claimPartitions(ctx, kv, o.EngineID, count, parts.Owned)
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
		return ingressPartitions(parts, owned), kv, nil
	}
	return parts, nil, nil
}

func cmpOrInt(v, def int) int {
	if v <= 0 {
		return def
	}
	return v
}
