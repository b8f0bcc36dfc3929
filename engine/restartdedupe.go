package engine

import (
	"context"
	"time"

	"github.com/rocketstore/engine/stages/ingress"
	"github.com/rocketstore/engine/stages/ingress/batched"
)

// restartDedupe is ingress's RestartDedupe for this start: the message ids of records stored
// before it are looked up in the IndexFile while the newest of them can still be within the
// dedupe window (nil when none can: an empty store, a store idle for longer than the window,
// dedupe or the IndexFile off).
func (e *Engine) restartDedupe() *ingress.RestartDedupe {
	o := e.opts
	if e.index == nil || o.DedupeWindow <= 0 || o.DedupeMax < 0 {
		return nil
	}
	var last int64
	if files := e.index.Files(); len(files) > 0 {
		// The newest IndexFile ends at the store time of the last record indexed; every record
		// the engine writes has a UNIQ_KEY, so that is the last record recovered.
		last = files[len(files)-1].EndTimestamp()
	}
	if last <= 0 {
		return nil
	}
	until := time.UnixMilli(last).Add(o.DedupeWindow)
	if !o.Now().Before(until) {
		return nil
	}
	window := o.DedupeWindow
	return &ingress.RestartDedupe{
		Until: until,
		Lookup: func(topic, msgID string) (batched.StoredAt, bool) {
			return e.lookupRecent(topic, msgID, o.Now().Add(-window).UnixMilli())
		},
	}
}

// lookupRecent finds the first copy of a message stored in topic under msgID (its UNIQ_KEY)
// at or after the store time since (Unix ms), through the IndexFile.
func (e *Engine) lookupRecent(topic, msgID string, since int64) (batched.StoredAt, bool) {
	// The IndexFile keeps whole seconds: an entry's time may be up to a second before its
	// record's store time.
	found, err := e.Query(context.Background(), QueryRequest{Topic: topic, Key: msgID, Begin: since - 1000})
	if err != nil {
		e.opts.Logger.Debug().Err(err).Str("topic", topic).Str("id", msgID).Msg("dedupe lookup failed")
		return batched.StoredAt{}, false
	}
	for i := len(found) - 1; i >= 0; i-- { // newest first: the first copy is the last one
		if m := &found[i]; m.UniqKey == msgID && m.StoreTimestamp >= since {
			return batched.StoredAt{QueueID: m.QueueID, QueueOffset: m.QueueOffset,
				PhysOffset: m.PhysicalOffset, StoreTimestamp: m.StoreTimestamp}, true
		}
	}
	return batched.StoredAt{}, false
}
