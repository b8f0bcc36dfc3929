// Package appender is the single writer of the CommitLog: one goroutine owns the log's tail and
// the next offset of every (topic, queue), takes batches of encoded records from ingress, stamps
// and copies them, and advances the Written watermark. Nothing else writes the log.
//
// The directory is append/ (fixed by the design); the package is appender so that importing it
// does not shadow the append builtin. Import it as appender "github.com/rocketstore/engine/append".
package appender

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/stages"
)

// Log is what the appender needs of the CommitLog (commitlog.Log implements it).
type Log interface {
	// Append copies and stamps one record and returns its physical offset.
	Append(rec []byte, queueOffset, storeTimestamp int64, propCRC bool) (int64, error)
	// Commit makes what Append took part of the log (a write, when the log gathers records).
	Commit() error
	// MaxOffset is the offset just past the last byte written.
	MaxOffset() int64
	// NeedsNext says the next segment should be allocated ahead now.
	NeedsNext() bool
}

// Gate admits or refuses writes before each batch (the retention stage implements it: a disk
// above its limit, or dispatch waiting for space to grow a ConsumeQueue). It is asked on the
// writer's goroutine for every batch, so it must be cheap while it admits.
type Gate interface {
	// Admit is nil while writes are taken, and the error every record of the batch gets while
	// they are refused.
	Admit() error
	// LogFull is told that the log refused a record for want of disk space (a new segment
	// could not be made: ENOSPC), so that room is made now rather than at the next check of
	// the disk. It must not block.
	LogFull(err error)
}

// QueueKey names one ConsumeQueue.
type QueueKey struct {
	Topic   string
	QueueID int32
}

// Config wires an Appender. Every channel and watermark is made by the engine.
type Config struct {
	Log Log
	// In carries batches from ingress. Its capacity (set by the engine) bounds the batches
	// waiting for the writer; when it is full, ingress blocks.
	In <-chan *stages.Batch
	// Out carries appended batches, in append order, to the ack stage.
	Out chan<- *stages.Batch
	// Written is owned by the appender: the offset just past the last record in place.
	Written *stages.Watermark
	// Dispatched is followed for back-pressure: before each round the appender waits until it
	// is less than MaxLag bytes ahead of dispatch (so the lag is bounded by MaxLag plus one round
	// of at most MaxBatch batches), which bounds the recovery work and the page cache that
	// dispatch must still read.
	Dispatched *stages.Watermark
	MaxLag     int64
	// MaxBatch is how many batches the writer takes at once before advancing Written.
	MaxBatch int
	// NextOffsets are the next queue offsets recovered from the ConsumeQueues; the appender takes
	// the map over.
	NextOffsets map[QueueKey]int64
	// StartOffset, when set, is the first offset of a queue that NextOffsets does not have: a
	// queue that continues another engine's offsets (a partition taken over); ok false means 0.
	StartOffset func(QueueKey) (off int64, ok bool)
	// MaxQueueOffset is the last queue offset a ConsumeQueue can hold
	// (consumequeue.Store.MaxQueueOffset); 0 means MaxInt64-1, where the counter itself stops. A
	// record that would take an offset past it is refused with ErrQueueFull: stored, it could
	// never be dispatched, and recovery would stop at it on every start.
	MaxQueueOffset int64
	// DedupeWindow is how long a message id is remembered, DedupeMax how many are held in
	// memory at most (either 0 turns dedupe off). Past DedupeMax ids are dropped from memory
	// before their window ends; with Lookup set the window still holds for them (dedupe.go).
	DedupeWindow time.Duration
	DedupeMax    int
	// Lookup, when set, finds the first copy of a message stored in topic under id at or after
	// since (Unix ms) in the store (the IndexFile), for a record whose id was dropped from
	// memory within its window and that its producer did not look up (Record.DedupeChecked).
	// With it, an id leaves memory only once dispatched. Called on the writer's goroutine.
	Lookup func(topic, id string, since int64) (Stored, bool)
	// Kick asks the allocator to prepare the next segment (a non-blocking send); the appender
	// closes it when it stops.
	Kick chan<- struct{}
	// Now is the store clock (time.Now when nil).
	Now func() time.Time
	// Gate, when set, is asked before each batch; an error refuses the batch (every record gets
	// it) without stopping the appender: a full disk refuses writes until space returns.
	Gate Gate
	// Feed, when set, gets each round's records whose RecordIndex the encoder knew, once they
	// are written (stages.DispatchFeed): dispatch then builds them without reading them back.
	Feed *stages.DispatchFeed
}

// Stored is where a first copy found in the store (Config.Lookup) is.
type Stored struct {
	PhysOffset, QueueOffset, StoreTimestamp int64
	Size, QueueID                           int32
}

// ErrQueueFull refuses a record whose queue has given out its last offset (Config.MaxQueueOffset).
var ErrQueueFull = errors.New("appender: the queue has no offset left")

// Stats are the appender's counters, read with Appender.Stats.
type Stats struct {
	Batches, Records, Bytes, Duplicates, Errors int64
	DedupeSize                                  int
	// DedupeEvicted counts the ids dropped from memory before their window ended (DedupeMax
	// reached): with Lookup, their retries are looked up in the store; without, they are
	// forgotten. DedupeLookups counts the lookups the writer made itself (Config.Lookup), and
	// DedupeFound the duplicates they found.
	DedupeEvicted, DedupeLookups, DedupeFound int64
}

// Appender is the CommitLog's single writer.
type Appender struct {
	cfg Config
	// offsets are the next queue offsets, by topic then queue, each counter allocated once so
	// that the topic of the last record can be kept at hand (lastTopic): records come in runs
	// of one topic (a pack is one subject), and hashing the topic string twice per record was
	// a sixth of the writer's own time.
	offsets   map[string]map[int32]*int64
	lastTopic string
	lastQs    map[int32]*int64
	dedupe    *dedupe
	// checked and checkedUntil publish the dedupe window's checked mark (Forgotten).
	checked, checkedUntil atomic.Int64
	stats                 statsCounters
	round                 []stages.Dispatched // this round's records for Feed
}

// New makes an appender; Run starts it.
func New(cfg Config) *Appender {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	cfg.MaxBatch = max(cfg.MaxBatch, 1)
	if cfg.MaxQueueOffset <= 0 {
		cfg.MaxQueueOffset = math.MaxInt64 - 1
	}
	offsets := make(map[string]map[int32]*int64)
	for k, next := range cfg.NextOffsets {
		qs := offsets[k.Topic]
		if qs == nil {
			qs = make(map[int32]*int64)
			offsets[k.Topic] = qs
		}
		qs[k.QueueID] = &next
	}
	cfg.NextOffsets = nil
	a := &Appender{cfg: cfg, offsets: offsets, dedupe: newDedupe(cfg.DedupeWindow, cfg.DedupeMax, cfg.Lookup != nil)}
	if cfg.Feed != nil {
		a.round = cfg.Feed.Buffer()
	}
	return a
}

// Run is the writer loop. It returns nil when In is closed and drained (a clean stop), and
// freezes Written on the way out so that the flusher and dispatch know no more data comes.
func (a *Appender) Run(ctx context.Context) (err error) {
	defer func() {
		a.cfg.Written.Fail(cmp.Or(err, stages.ErrClosed))
		close(a.cfg.Out)
		if a.cfg.Kick != nil {
			close(a.cfg.Kick)
		}
	}()
	batches := make([]*stages.Batch, 0, a.cfg.MaxBatch)
	for {
		var first *stages.Batch
		select {
		case b, ok := <-a.cfg.In:
			if !ok {
				return nil
			}
			first = b
		case <-ctx.Done():
			return ctx.Err()
		}
		var open bool
		batches, open = stages.Drain(a.cfg.In, append(batches[:0], first), a.cfg.MaxBatch)
		if err := a.cfg.Dispatched.Wait(ctx, a.dispatchNeeded(batches)); err != nil {
			err = fmt.Errorf("waiting for dispatch: %w", err)
			notStored := err
			if ctx.Err() != nil {
				// As the ack stage says it: the engine stopped, and why (a failed sync, say).
				notStored = fmt.Errorf("engine stopped: %w", context.Cause(ctx))
			}
			a.handOver(batches, 0, notStored)
			return err
		}
		now := a.cfg.Now()
		for _, b := range batches {
			a.appendBatch(b, now)
		}
		if err := a.cfg.Log.Commit(); err != nil {
			// The records are not in the log: their answer is the error.
			err = fmt.Errorf("writing the CommitLog: %w", err)
			a.handOver(batches, 0, err)
			return err
		}
		if a.cfg.Feed != nil {
			// Before Written moves: dispatch, which follows Written (or Durable, behind it),
			// finds a round in the feed by the time the round is below its limit.
			a.cfg.Feed.Offer(a.round)
			a.round = a.cfg.Feed.Buffer()
		}
		a.cfg.Written.Advance(a.cfg.Log.MaxOffset())
		a.trimDedupe(now)
		if a.cfg.Log.NeedsNext() && a.cfg.Kick != nil {
			select {
			case a.cfg.Kick <- struct{}{}:
			default:
			}
		}
		for i, b := range batches {
			select {
			case a.cfg.Out <- b:
			case <-ctx.Done():
				// These are in the log: the ack stage tells which reached its level.
				a.handOver(batches, i, nil)
				return ctx.Err()
			}
			batches[i] = nil
		}
		if !open {
			return nil
		}
	}
}

// handOver is how the writer lets go of the batches it took, from the i-th on, on its way out:
// whatever the reason it stops, every batch it took goes to Out, where the ack stage drains
// until Out is closed and answers each one, so that no producer is left waiting. notStored,
// when set, is the answer of every record that has none yet: those records are not in the log
// (their offsets are unset or were never committed), so no level may answer them with success.
func (a *Appender) handOver(batches []*stages.Batch, i int, notStored error) {
	for _, b := range batches[i:] {
		if notStored != nil {
			for j := range b.Records {
				if r := &b.Records[j]; r.Err == nil {
					r.Err = notStored
				}
			}
		}
		a.cfg.Out <- b
	}
	clear(batches)
}

// appendBatch writes the records of b. A record that fails (a new segment could not be made:
// disk full) is marked and not stored; the log is unchanged by it, so the writer carries on.
func (a *Appender) appendBatch(b *stages.Batch, now time.Time) {
	ts := now.UnixMilli()
	var gateErr error
	if a.cfg.Gate != nil {
		gateErr = a.cfg.Gate.Admit()
	}
	if a.dedupe != nil {
		a.dedupe.expire(now)
	}
	a.stats.batches.Add(1)
	for i := range b.Records {
		r := &b.Records[i]
		if r.Err != nil {
			continue
		}
		if gateErr != nil {
			r.Err = gateErr
			a.stats.errors.Add(1)
			continue
		}
		var dk dedupeKey
		if a.dedupe != nil && r.MsgID != "" {
			dk = dedupeKey{r.Topic, r.MsgID}
			if e, ok := a.firstCopy(dk, r.DedupeChecked, now); ok {
				r.Duplicate = true
				r.PhysOffset, r.Size, r.QueueOffset = e.phys, e.size, e.queueOffset
				r.QueueID, r.StoreTimestamp = e.queueID, e.storeTimestamp
				b.End = max(b.End, r.End())
				a.stats.duplicates.Add(1)
				continue
			}
		}
		// As RocketMQ's doAppend: PREPARED and ROLLBACK records never get a ConsumeQueue unit,
		// so they are stamped with queue offset 0 and take none from their queue.
		var qo int64
		var next *int64
		queued := takesQueueOffset(r.Bytes)
		if queued {
			if next = a.queueOffset(r.Topic, r.QueueID); next != nil {
				qo = *next
			} else if a.cfg.StartOffset != nil {
				qo, _ = a.cfg.StartOffset(QueueKey{r.Topic, r.QueueID})
			}
			if qo > a.cfg.MaxQueueOffset {
				r.Err = fmt.Errorf("%w: %s/%d is at offset %d, past its last, %d", ErrQueueFull, r.Topic, r.QueueID,
					qo, a.cfg.MaxQueueOffset)
				a.stats.errors.Add(1)
				continue
			}
		}
		rts := ts
		if r.StoreTimestamp != 0 {
			rts = r.StoreTimestamp // the producer's: a replicated record stores its stream's time
		}
		phys, err := a.cfg.Log.Append(r.Bytes, qo, rts, r.PropCRC)
		if err != nil {
			r.Err = err
			a.stats.errors.Add(1)
			if a.cfg.Gate != nil && errors.Is(err, syscall.ENOSPC) {
				a.cfg.Gate.LogFull(err)
			}
			continue
		}
		if queued {
			if next == nil { // the queue's first record
				next = new(int64)
				a.lastQs[r.QueueID] = next // lastQs is r.Topic's: queueOffset just looked it up
			}
			*next = qo + 1
		}
		r.QueueOffset, r.PhysOffset, r.Size, r.StoreTimestamp = qo, phys, int32(len(r.Bytes)), rts
		b.End = max(b.End, r.End())
		if a.cfg.Feed != nil && queued && r.Index.Known {
			a.round = append(a.round, stages.Dispatched{Phys: phys, Size: r.Size, QueueID: r.QueueID,
				QueueOffset: qo, StoreTimestamp: rts, Topic: r.Topic, Index: r.Index})
		}
		if a.dedupe != nil && r.MsgID != "" {
			a.dedupe.put(dk, dedupeEntry{phys: phys, size: r.Size, queueOffset: qo, queueID: r.QueueID, storeTimestamp: rts},
				now, r.End())
		}
		a.stats.records.Add(1)
		a.stats.bytes.Add(int64(r.Size))
	}
	b.ReleaseBytes() // every record is in the log (or refused): their encodings are not read again
}

// firstCopy finds the first copy of the message with id k within the window: in memory, or, when
// the id may have been dropped from memory within its window after what the record's producer
// looked up in the store (stamp), in the store.
func (a *Appender) firstCopy(k dedupeKey, stamp int64, now time.Time) (dedupeEntry, bool) {
	if e, ok := a.dedupe.get(k); ok {
		return e, true
	}
	if !a.dedupe.mustLookUp(stamp, now) {
		return dedupeEntry{}, false
	}
	a.stats.dedupeLookups.Add(1)
	at, ok := a.cfg.Lookup(k.topic, k.id, now.Add(-a.cfg.DedupeWindow).UnixMilli())
	if !ok {
		return dedupeEntry{}, false
	}
	a.stats.dedupeFound.Add(1)
	// The batch's acks wait for its end as for one in memory (in async mode dispatch, and so
	// the lookup, may be ahead of Durable, which a Durable batch waits for).
	return dedupeEntry{phys: at.PhysOffset, size: at.Size, queueOffset: at.QueueOffset, storeTimestamp: at.StoreTimestamp,
		queueID: at.QueueID}, true
}

// dispatchNeeded is the offset dispatch must have reached before the round of batches: within
// MaxLag of Written, and past the ids the round pushes out of the dedupe window's memory (they
// must be in the IndexFile by the time they leave it).
func (a *Appender) dispatchNeeded(batches []*stages.Batch) int64 {
	off := a.cfg.Written.Load() - a.cfg.MaxLag
	if a.dedupe == nil || !a.dedupe.lookups {
		return off
	}
	ids := 0
	for _, b := range batches {
		for i := range b.Records {
			if b.Records[i].MsgID != "" {
				ids++
			}
		}
	}
	return max(off, a.dedupe.need(ids))
}

// trimDedupe brings the dedupe window back to its bound after a round and publishes how far it
// reaches for ingress (Forgotten).
func (a *Appender) trimDedupe(now time.Time) {
	d := a.dedupe
	if d == nil {
		return
	}
	d.trim(now, a.cfg.Dispatched.Load())
	// The window's end first: whoever sees the new sequence sees its window too.
	a.checkedUntil.Store(d.checkedUntil)
	a.checked.Store(d.checked)
	a.stats.dedupeSize.Store(int64(d.n))
	a.stats.dedupeEvicted.Store(d.early)
}

// Forgotten tells ingress which message ids it must look up in the store itself: the ids up to
// sequence checked passed the in-memory window's soft bound, and while until (Unix ns) is ahead
// some of them are within the window. A producer that looked a message's id up with the store
// after reading checked stamps the record with it (Record.DedupeChecked). Safe from any goroutine.
func (a *Appender) Forgotten() (checked, until int64) {
	checked = a.checked.Load()
	return checked, a.checkedUntil.Load()
}

// queueOffset returns the counter of the next offset of a queue, nil before the queue's first
// record is stored (the caller then asks StartOffset, until one is: a queue whose start is set
// after a refused record still gets it). It leaves the topic's queues in lastQs.
func (a *Appender) queueOffset(topic string, id int32) *int64 {
	if a.lastQs == nil || topic != a.lastTopic {
		qs := a.offsets[topic]
		if qs == nil {
			qs = make(map[int32]*int64)
			a.offsets[topic] = qs
		}
		a.lastTopic, a.lastQs = topic, qs
	}
	return a.lastQs[id]
}

// takesQueueOffset says whether the encoded record rec is of a transaction type that the
// ConsumeQueue holds (normal or committed), reading SYSFLAG from its fixed position.
func takesQueueOffset(rec []byte) bool {
	if len(rec) < commitlog.PosSysFlag+4 {
		return true
	}
	tx := int32(binary.BigEndian.Uint32(rec[commitlog.PosSysFlag:])) & commitlog.TxMask
	return tx == commitlog.TxNotType || tx == commitlog.TxCommit
}
