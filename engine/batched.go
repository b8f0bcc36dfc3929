package engine

import (
	"context"

	"github.com/rocketstore/engine/stages/ingress/batched"
)

// batchedConfig is ingress's batched-ack configuration for nopts (nil: off). See
// docs/BATCHED-ACKS.md.
func (e *Engine) batchedConfig(nopts NATSOptions) *batched.Config {
	if nopts.NoBatchedAcks || nopts.JetStream != nil || nopts.QueueGroup != "" {
		return nil
	}
	return &batched.Config{
		MaxStreams: nopts.MaxStreams,
		StreamIdle: nopts.StreamIdle,
		Lookup:     e.lookupStored,
	}
}

// lookupStored finds the first copy of a message stored in topic under msgID (its UNIQ_KEY),
// through the IndexFile. Ingress asks it for the resends of batched-ack streams only (the r flag
// of their Rs-Seq header), on its workers, never on the appender's path, so that a resend of a
// message stored before a restart (when the in-memory dedupe window starts empty), or longer ago
// than the window, is answered with the first copy's position instead of being stored again.
//
// Only dispatched records are found, and dispatch follows Durable in sync mode (Written in async
// mode): a record found is stored at the promised level. A record appended but not yet
// dispatched is not found: the resend then goes through the appender's dedupe window, which
// holds it, since it was appended a moment ago. Without an IndexFile (NoIndex) nothing is found.
func (e *Engine) lookupStored(topic, msgID string) (batched.StoredAt, bool) {
	if e.index == nil {
		return batched.StoredAt{}, false
	}
	found, err := e.Query(context.Background(), QueryRequest{Topic: topic, Key: msgID})
	if err != nil {
		e.opts.Logger.Debug().Err(err).Str("topic", topic).Str("id", msgID).Msg("resend lookup failed")
		return batched.StoredAt{}, false
	}
	for i := len(found) - 1; i >= 0; i-- { // newest first: the first copy is the last one
		if m := &found[i]; m.UniqKey == msgID {
			return batched.StoredAt{QueueID: m.QueueID, QueueOffset: m.QueueOffset,
				PhysOffset: m.PhysicalOffset, StoreTimestamp: m.StoreTimestamp}, true
		}
	}
	return batched.StoredAt{}, false
}
