package engine

import (
	"context"
	"strconv"

	"github.com/rocketstore/engine/stages/ingress"
)

// replicatedSource is ingress's replicated-mode source for nopts (nil: off), with the engine's
// store lookups filled in (docs/SCALE-OUT.md, "Replicated mode").
func (e *Engine) replicatedSource(nopts NATSOptions) *ingress.ReplicatedSource {
	if nopts.Replicated == nil {
		return nil
	}
	src := *nopts.Replicated
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
				if seq, err := strconv.ParseUint(m.Properties[ingress.PropStreamSeq], 10, 64); err == nil {
					last = max(last, seq)
				}
			}
		}
	}
	return last, nil
}
