package engine

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/rocketstore/engine/stages/ingress/replicated"
)

// replicatedSource is ingress's replicated-mode source for nopts (nil: off), with the engine's
// store lookups filled in (docs/SCALE-OUT.md, "Replicated mode").
func (e *Engine) replicatedSource(nopts NATSOptions) *replicated.Config {
	if nopts.Replicated == nil {
		return nil
	}
	src := *nopts.Replicated
	if src.Name == "" {
		// Every engine has a store host of its own (or its offset message ids collide).
		src.Name = e.opts.StoreHost.String()
	}
	// A stream configuration JetStream refuses stops the engine as a failed sync would: it
	// cannot take what it was configured for.
	src.OnFatal = func(err error) { e.group.Cancel(fmt.Errorf("replicated mode: %w", err)) }
	src.LastSeq = e.lastStreamSeq
	src.Found = func(topic, uniqKey string) bool {
		_, ok := e.lookupStored(topic, uniqKey)
		return ok
	}
	return &src
}

// lastStreamSeq is the highest stream sequence (NATS_STREAM_SEQ) among the last records of queue
// part of every topic: where this engine's copy of a replicated partition ends. Every record of
// the partition is in one of these queues, in stream order within each.
func (e *Engine) lastStreamSeq(part int) (uint64, error) {
	ctx := context.Background()
	if err := e.WaitDispatched(ctx, e.Offsets().Written); err != nil {
		return 0, err
	}
	var last uint64
	for _, t := range e.Topics() {
		qs, err := e.QueueOffsets(t.Name)
		if err != nil {
			return 0, err
		}
		for _, q := range qs {
			if int(q.QueueID) != part || q.Max <= q.Min {
				continue
			}
			res, err := e.Get(ctx, GetRequest{Topic: t.Name, QueueID: q.QueueID, Offset: q.Max - 1, Max: 1, MaxBytes: 64 << 20})
			if err != nil {
				return 0, err
			}
			for _, m := range res.Messages {
				if seq, err := strconv.ParseUint(m.Properties[replicated.PropStreamSeq], 10, 64); err == nil {
					last = max(last, seq)
				}
			}
		}
	}
	return last, nil
}

// checkReplicated refuses replicated mode on an embedded server without JetStream: the
// partitions' streams could never be made (an external server's JetStream may be on its way:
// the engine waits for it).
func (s *Server) checkReplicated(nopts NATSOptions) error {
	if nopts.Replicated != nil && s.nats != nil && !s.nats.JetStreamEnabled() {
		return errors.New("replicated mode needs JetStream: the embedded server has none (give it a jetstream block in --nats-config, on a cluster of three)")
	}
	return nil
}

// replicatedNotReady is why, in replicated mode, the engine does not consume what it should yet
// (nil when it does, and outside replicated mode): /readyz answers 503 with it.
func (s *Server) replicatedNotReady() error {
	if s.ing == nil {
		return nil
	}
	return s.ing.ReplicatedReady()
}

// ReplicatedStarted is closed, in replicated mode, once every partition's stream and consumer
// are open and the partitions are spread over the live engines; at once otherwise. Serve
// returns before that: a JetStream cluster still forming is waited for as long as it takes.
func (s *Server) ReplicatedStarted() <-chan struct{} { return s.ing.ReplicatedStarted() }
