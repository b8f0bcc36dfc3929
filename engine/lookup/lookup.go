// Package lookup answers what ingress asks of the store besides appending: whether a message
// id is stored already and where (the resends of batched-ack streams, the dedupe window across
// a restart, the redeliveries of replicated mode and of the JetStream bridge), and where this engine's copy of a replicated
// partition ends. The lookups go through the IndexFile, on ingress's workers, never on the
// appender's path. It declares what it reads of the store (Store) and makes the parts of
// ingress's configuration that hold them.
package lookup

import (
	"context"
	"strconv"
	"time"

	"github.com/rs/zerolog"

	appender "github.com/rocketstore/engine/append"
	"github.com/rocketstore/engine/internal/reader"
	"github.com/rocketstore/engine/stages/ingress"
	"github.com/rocketstore/engine/stages/ingress/batched"
	"github.com/rocketstore/engine/stages/ingress/jspull"
	"github.com/rocketstore/engine/stages/ingress/replicated"
)

// Store is what the lookups read (engine.Engine implements it).
type Store interface {
	Query(ctx context.Context, req reader.QueryRequest) ([]reader.Message, error)
	Get(ctx context.Context, req reader.GetRequest) (reader.GetResult, error)
	Topics() []reader.TopicInfo
	QueueOffsets(topic string) ([]reader.QueueOffsets, error)
	WaitDispatched(ctx context.Context, off int64) error
}

// Finder looks messages up in a store.
type Finder struct {
	Store Store
	// Indexed says the store has an IndexFile: without one nothing is found.
	Indexed bool
	// Written is the offset just past the last record written.
	Written func() int64
	Logger  zerolog.Logger
}

// Batched is ingress's batched-ack configuration (docs/BATCHED-ACKS.md), with First to answer
// the resends of its streams.
func (f Finder) Batched(maxStreams int, streamIdle time.Duration) *batched.Config {
	return &batched.Config{MaxStreams: maxStreams, StreamIdle: streamIdle, Lookup: f.First}
}

// First finds the first copy of a message stored in topic under msgID (its UNIQ_KEY), through
// the IndexFile. Ingress asks it for the resends of batched-ack streams only (the r flag of
// their Rs-Seq header), so that a resend of a message stored before a restart (when the
// in-memory dedupe window starts empty), or longer ago than the window, is answered with the
// first copy's position instead of being stored again.
//
// Only dispatched records are found, and dispatch follows Durable in sync mode (Written in async
// mode): a record found is stored at the promised level. A record appended but not yet
// dispatched is not found: the resend then goes through the appender's dedupe window, which
// holds it, since it was appended a moment ago. Without an IndexFile nothing is found.
func (f Finder) First(topic, msgID string) (batched.StoredAt, bool) {
	if !f.Indexed {
		return batched.StoredAt{}, false
	}
	found, err := f.Store.Query(context.Background(), reader.QueryRequest{Topic: topic, Key: msgID, NoAckWait: true})
	if err != nil {
		f.Logger.Debug().Err(err).Str("topic", topic).Str("id", msgID).Msg("resend lookup failed")
		return batched.StoredAt{}, false
	}
	for i := len(found) - 1; i >= 0; i-- { // newest first: the first copy is the last one
		if m := &found[i]; m.UniqKey == msgID {
			return storedAt(m), true
		}
	}
	return batched.StoredAt{}, false
}

// StoreDedupe is ingress's StoreDedupe for a start whose newest indexed record was stored at
// lastIndexed (Unix ms), with forgotten the appender's report of the ids it dropped from memory
// (appender.Appender.Forgotten; nil: it drops none it cannot look up): message ids are looked up
// in the IndexFile (Since) while the newest record stored before the start can still be within
// the dedupe window, and while ids dropped from memory can. nil when neither can ever be: dedupe
// off (a window of 0 or a negative dedupeMax), no IndexFile, or no forgotten and an empty store
// or one idle for longer than the window.
func (f Finder) StoreDedupe(lastIndexed int64, window time.Duration, dedupeMax int, now func() time.Time,
	forgotten func() (checked, until int64)) *ingress.StoreDedupe {
	if !f.Indexed || window <= 0 || dedupeMax < 0 {
		return nil
	}
	var until time.Time
	if lastIndexed > 0 {
		until = time.UnixMilli(lastIndexed).Add(window)
	}
	if forgotten == nil && !now().Before(until) {
		return nil
	}
	return &ingress.StoreDedupe{
		RestartUntil: until,
		Forgotten:    forgotten,
		Lookup: func(topic, msgID string) (batched.StoredAt, bool) {
			return f.Since(topic, msgID, now().Add(-window).UnixMilli())
		},
	}
}

// AppenderLookup is the appender's Lookup (appender.Config.Lookup): Since, for a record whose id
// the appender dropped from memory within its window and that ingress did not look up.
func (f Finder) AppenderLookup(topic, msgID string, since int64) (appender.Stored, bool) {
	m, ok := f.since(topic, msgID, since)
	if !ok {
		return appender.Stored{}, false
	}
	return appender.Stored{PhysOffset: m.PhysicalOffset, Size: m.Size, QueueOffset: m.QueueOffset,
		StoreTimestamp: m.StoreTimestamp, QueueID: m.QueueID}, true
}

// Since finds the first copy of a message stored in topic under msgID (its UNIQ_KEY) at or after
// the store time since (Unix ms), through the IndexFile.
func (f Finder) Since(topic, msgID string, since int64) (batched.StoredAt, bool) {
	if m, ok := f.since(topic, msgID, since); ok {
		return storedAt(m), true
	}
	return batched.StoredAt{}, false
}

// since is Since, the message found.
func (f Finder) since(topic, msgID string, since int64) (*reader.Message, bool) {
	// The IndexFile keeps whole seconds: an entry's time may be up to a second before its
	// record's store time.
	found, err := f.Store.Query(context.Background(), reader.QueryRequest{Topic: topic, Key: msgID, Begin: since - 1000, NoAckWait: true})
	if err != nil {
		f.Logger.Debug().Err(err).Str("topic", topic).Str("id", msgID).Msg("dedupe lookup failed")
		return nil, false
	}
	for i := len(found) - 1; i >= 0; i-- { // newest first: the first copy is the last one
		if m := &found[i]; m.UniqKey == msgID && m.StoreTimestamp >= since {
			return m, true
		}
	}
	return nil, false
}

func storedAt(m *reader.Message) batched.StoredAt {
	return batched.StoredAt{QueueID: m.QueueID, QueueOffset: m.QueueOffset, PhysOffset: m.PhysicalOffset,
		StoreTimestamp: m.StoreTimestamp}
}

// Replicated is ingress's replicated-mode source src (docs/SCALE-OUT.md, "Replicated mode") with
// the store's lookups filled in: name when it has none (every engine has a store host of its
// own, or its offset message ids collide), onFatal for a stream configuration JetStream refuses
// (it stops the engine as a failed sync would: it cannot take what it was configured for).
func (f Finder) Replicated(src replicated.Config, name string, onFatal func(error)) *replicated.Config {
	if src.Name == "" {
		src.Name = name
	}
	src.OnFatal = onFatal
	src.LastSeq = f.LastStreamSeq
	src.Found = func(topic, uniqKey string) bool {
		_, ok := f.First(topic, uniqKey)
		return ok
	}
	return &src
}

// JetStream is ingress's JetStream source src with the store's lookup of redeliveries filled in:
// a redelivered message whose dedupe key (its UNIQ_KEY) is stored in its topic already is acked
// from there instead of being stored again (jspull.Config.Found).
func (f Finder) JetStream(src jspull.Config) *jspull.Config {
	src.Found = func(topic, key string, since int64) bool {
		_, ok := f.Since(topic, key, since)
		return ok
	}
	return &src
}

// LastStreamSeq is the highest stream sequence (NATS_STREAM_SEQ) among the last records of queue
// part of every topic: where this engine's copy of a replicated partition ends. Every record of
// the partition is in one of these queues, in stream order within each.
func (f Finder) LastStreamSeq(part int) (uint64, error) {
	ctx := context.Background()
	if err := f.Store.WaitDispatched(ctx, f.Written()); err != nil {
		return 0, err
	}
	var last uint64
	for _, t := range f.Store.Topics() {
		qs, err := f.Store.QueueOffsets(t.Name)
		if err != nil {
			return 0, err
		}
		for _, q := range qs {
			if int(q.QueueID) != part || q.Max <= q.Min {
				continue
			}
			res, err := f.Store.Get(ctx, reader.GetRequest{Topic: t.Name, QueueID: q.QueueID, Offset: q.Max - 1, Max: 1, MaxBytes: 64 << 20})
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
