package batched

import (
	"errors"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rocketstore/engine/internal/wire"
	"github.com/rocketstore/engine/stages"
	"github.com/rocketstore/engine/stages/ingress/internal/bounded"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
)

// maxMissingRanges bounds the missing ranges of one ack; the rest go in the next one.
const maxMissingRanges = 1024

// markerRetry is how soon a marker that found a worker's channel full is offered again.
const markerRetry = 2 * time.Millisecond

// Pipeline is what the tracker needs of ingress: its workers, through which it sends markers, and
// the memory of the batches it is done with.
type Pipeline interface {
	// Workers is how many workers there are.
	Workers() int
	// OfferMarker offers worker i a marker of epoch without blocking: false when the worker's
	// inbox is full (the tracker offers it again shortly).
	OfferMarker(worker int, epoch uint64) bool
	// Recycle gives back the memory of a batch the tracker is done with; nothing uses b
	// afterwards.
	Recycle(b *stages.Batch)
	// Code is the reply code of a record's error (ingress's ReplyCode).
	Code(err error) int
}

// Tracker is the batched-ack stage (docs/BATCHED-ACKS.md): it takes the batches whose records
// belong to batched-ack streams from the ack stage (ingress's Batch.Done offers them without
// ever blocking), keeps a bounded table of streams, and publishes at most one ack per stream per
// round.
//
// Rounds. The loop blocks for one batch, then drains whatever else the ack stage has handed over
// meanwhile (stages.Drain), then publishes. The ack stage calls Done for every batch a sync made
// durable in one burst, so a round covers a group-commit round (or more under load, never less
// than one batch): one ack per stream per round instead of one reply per message, and no timer.
//
// Missing sequences. Ingress workers are sharded by (topic, queue), so the messages of one
// stream reach the appender, and the tracker, out of order: seeing seq 9 stored while seq 8 is
// not yet seen means nothing by itself, seq 8 may be in another worker's batch. Markers settle it
// exactly: when a stream has such a gap, the tracker asks every worker for a marker of a new
// epoch (a job in the worker's FIFO channel, behind everything the callbacks handed it). The
// worker adds a marker record to the batch it sends next; the record flows through the appender
// (which skips it: it carries an error) and the ack stage in order, so when the tracker has the
// marker of epoch E from every worker, every message received before the request has reached it.
// NATS delivers one publisher's messages on one subscription in order, so a sequence below one
// seen before the request that is still unseen then never reached the engine (dropped as a slow
// consumer, or lost before): it is reported missing, once. (A stream whose subjects are split
// over several subscriptions loses that order: a sequence may then be reported missing while it
// is on its way; its resend is answered as a duplicate.)
//
// Bounds: at most MaxStreams streams (a new one evicts the least recently active, which is sent
// an error ack), idle ones expire after StreamIdle, at most MaxAhead sequences tracked per stream,
// at most Queue batches waiting.
type Tracker struct {
	p        Pipeline
	conn     *nats.Conn
	log      zerolog.Logger
	failLog  *bounded.LogLimiter // shared with ingress's warnings of records not stored
	replyLog *bounded.LogLimiter // shared with ingress's warnings of replies not published
	cfg      *Config
	batches  chan *stages.Batch
	// recv is the streams' dedupe (received.go): claimed by the workers, released here.
	recv *received

	counters trackerCounters

	// Owned by the tracker goroutine.
	streams    map[string]*stream
	head, tail *stream   // LRU list, head most recent
	marks      []uint64  // per worker, the highest marker epoch back
	sent       []uint64  // per worker, the highest marker epoch offered
	epoch      uint64    // the highest marker epoch asked for
	minMark    uint64    // min(marks)
	markerBack bool      // a marker came back this round
	touched    []*stream // streams with news this round
	waiting    []*stream // streams waiting for an epoch
	pending    []*stages.Batch
	now        time.Time
	retry      *time.Timer
	retryC     <-chan time.Time
	ack        ackWriter
}

type trackerCounters struct {
	received, acked, refused, ackMessages, missing       atomic.Int64
	evicted, expired, overflow, markers, streams         atomic.Int64
	lookups, lookupHits, publishFailures, untrackedSends atomic.Int64
	dropped, packs                                       atomic.Int64
}

// NewTracker makes the tracker of cfg (with its defaults: Config.WithDefaults) for p, publishing
// the acks on conn; failLog and replyLog rate-limit its warnings with ingress's of the same kind.
func NewTracker(cfg *Config, p Pipeline, conn *nats.Conn, log zerolog.Logger, failLog, replyLog *bounded.LogLimiter) *Tracker {
	t := &Tracker{
		p: p, conn: conn, log: log, failLog: failLog, replyLog: replyLog,
		cfg: cfg, batches: make(chan *stages.Batch, cfg.Queue), recv: newReceived(cfg.MaxStreams, cfg.MaxAhead),
		streams: make(map[string]*stream),
		marks:   make([]uint64, p.Workers()), sent: make([]uint64, p.Workers()),
	}
	t.ack.t = t
	return t
}

// Offer hands a batch over from the ack stage; it never blocks (see Config.Queue).
func (t *Tracker) Offer(b *stages.Batch) {
	select {
	case t.batches <- b:
	default:
		t.releaseRefused(b)
		t.p.Recycle(b)
		t.counters.overflow.Add(1)
		if ok, held := t.failLog.Allow(time.Now()); ok {
			t.log.Warn().Int("queue", cap(t.batches)).Int64("more", held).
				Msg("ingress: the batched-ack tracker is behind; a batch is not tracked (its publishers resend)")
		}
	}
}

// releaseRefused releases the claims of the records of b that were refused, as handle does, for
// a batch that is not tracked: a refused sequence must stay open to a retry, which would
// otherwise be dropped as a copy of one on its way. (A stored one keeps its claim: its resend is
// found in the store, or dropped while its first copy is on its way.)
func (t *Tracker) releaseRefused(b *stages.Batch) {
	for i := range b.Records {
		r := &b.Records[i]
		if m, ok := r.Ctx.(*Meta); ok && r.Err != nil && !IsStoredBefore(r.Err) {
			t.recv.release(m.Stream, m.Seq)
		}
	}
}

// Run is the tracker's loop, until drained is closed: then no batch comes any more, and what
// the ack stage and the engine's reaper handed over is answered, once.
func (t *Tracker) Run(drained <-chan struct{}) {
	defer func() {
		if t.retry != nil {
			t.retry.Stop()
		}
	}()
	expire := t.cfg.ExpireTick
	if expire == nil {
		tick := time.NewTicker(max(t.cfg.StreamIdle/4, time.Millisecond))
		defer tick.Stop()
		expire = tick.C
	}
	for {
		select {
		case b := <-t.batches:
			t.round(b)
		case <-t.retryC:
			t.retryC = nil
			t.sendMarkers()
		case <-expire:
			t.expire(t.cfg.Clock())
		case <-drained:
			select {
			case b := <-t.batches:
				t.round(b)
			default:
			}
			return
		}
	}
}

// round handles first and whatever else is queued, then publishes.
func (t *Tracker) round(first *stages.Batch) {
	t.now = t.cfg.Clock()
	t.pending, _ = stages.Drain(t.batches, append(t.pending[:0], first), cap(t.batches))
	for _, b := range t.pending {
		t.handle(b)
		t.p.Recycle(b)
	}
	clear(t.pending)
	t.endRound()
}

// handle takes the outcome of every batched record of b.
func (t *Tracker) handle(b *stages.Batch) {
	for i := range b.Records {
		r := &b.Records[i]
		switch m := r.Ctx.(type) {
		case *Marker:
			if m.Worker < len(t.marks) && m.Epoch > t.marks[m.Worker] {
				t.marks[m.Worker] = m.Epoch
				t.markerBack = true
			}
		case *Meta:
			s := t.streamFor(m)
			if r.Err == nil {
				s.stored(m.Seq, r.Topic, r.QueueID, r.QueueOffset, r.Duplicate)
				t.counters.acked.Add(1)
				continue
			}
			// Only here: errors.As's target escapes, a heap allocation that every record paid
			// while it was declared above (4% of the engine).
			var before *StoredBefore
			switch {
			case errors.As(r.Err, &before):
				s.stored(m.Seq, r.Topic, before.At.QueueID, before.At.QueueOffset, true)
				t.counters.acked.Add(1)
			default:
				desc := r.Err.Error()
				if len(desc) > wire.MaxDescription {
					desc = desc[:wire.MaxDescription] + "..."
				}
				s.refuse(m.Seq, t.p.Code(r.Err), desc)
				t.recv.release(m.Stream, m.Seq) // a retry must be stored
				t.counters.refused.Add(1)
			}
		}
	}
}

// streamFor returns the stream of m, making it (and evicting the least recently active one if
// the table is full), with m's floor and ack subject applied.
func (t *Tracker) streamFor(m *Meta) *stream {
	s := t.streams[m.Stream]
	if s == nil {
		if len(t.streams) >= t.cfg.MaxStreams {
			t.evict(t.tail)
		}
		s = newStream(strings.Clone(m.Stream), m.AckTo, m.Acked, t.cfg.MaxAhead)
		t.streams[s.id] = s
		t.pushFront(s)
		t.counters.streams.Store(int64(len(t.streams)))
	}
	if s.ackTo != m.AckTo {
		s.ackTo = m.AckTo
	}
	s.applyFloor(m.Acked)
	t.touch(s)
	return s
}

// touch puts s on this round's list and at the head of the LRU list.
func (t *Tracker) touch(s *stream) {
	if s.inRound {
		return
	}
	s.inRound = true
	s.last = t.now
	t.touched = append(t.touched, s)
	if t.head != s {
		t.unlink(s)
		t.pushFront(s)
	}
}

// endRound decides the gaps whose markers are back, asks for markers for new gaps, and
// publishes one ack per stream with news.
func (t *Tracker) endRound() {
	if t.markerBack {
		t.markerBack = false
		if m := minOf(t.marks); m > t.minMark {
			t.minMark = m
			t.decide()
		}
	}
	need := false
	for _, s := range t.touched {
		if s.gone {
			continue
		}
		s.advance()
		if s.waitEpoch == 0 && s.undecided() {
			s.waitEpoch, s.waitHigh = t.epoch+1, s.maxSeen
			if !s.waiting {
				s.waiting = true
				t.waiting = append(t.waiting, s)
			}
			need = true
		}
	}
	for _, s := range t.touched {
		s.inRound = false
		if !s.gone && s.news() {
			t.publish(s)
		}
	}
	clear(t.touched)
	t.touched = t.touched[:0]
	if need {
		t.epoch++
		t.sendMarkers()
	}
}

// decide marks the gaps of the streams whose epoch is back as decided.
func (t *Tracker) decide() {
	kept := t.waiting[:0]
	for _, s := range t.waiting {
		switch {
		case s.gone:
		case s.waitEpoch <= t.minMark:
			if s.waitHigh > s.decided {
				s.decided, s.decidedNew = s.waitHigh, true
			}
			s.waitEpoch, s.waiting = 0, false
			t.touch(s)
		default:
			kept = append(kept, s)
		}
	}
	clear(t.waiting[len(kept):])
	t.waiting = kept
}

// sendMarkers offers the current epoch's marker to every worker that has not had it; a full
// channel is tried again shortly (never blocking: a worker may be blocked on the appender).
func (t *Tracker) sendMarkers() {
	retry := false
	for i := range t.sent {
		if t.sent[i] >= t.epoch {
			continue
		}
		if t.p.OfferMarker(i, t.epoch) {
			t.sent[i] = t.epoch
			t.counters.markers.Add(1)
		} else {
			retry = true
		}
	}
	if retry && t.retryC == nil {
		if t.retry == nil {
			t.retry = time.NewTimer(markerRetry)
		} else {
			t.retry.Reset(markerRetry)
		}
		t.retryC = t.retry.C
	}
}

// evict drops s to make room, after publishing what it had, and tells its publisher.
func (t *Tracker) evict(s *stream) {
	if s == nil {
		return
	}
	if s.news() {
		t.publish(s)
	}
	t.ack.evicted(s)
	t.remove(s)
	t.counters.evicted.Add(1)
}

// expire drops the streams idle for StreamIdle. Nothing is sent: the publisher is gone, or will
// rebuild the stream with its next message.
func (t *Tracker) expire(now time.Time) {
	for s := t.tail; s != nil && now.Sub(s.last) >= t.cfg.StreamIdle; s = t.tail {
		t.remove(s)
		t.counters.expired.Add(1)
	}
}

func (t *Tracker) remove(s *stream) {
	s.gone = true
	delete(t.streams, s.id)
	t.unlink(s)
	t.counters.streams.Store(int64(len(t.streams)))
}

func (t *Tracker) pushFront(s *stream) {
	s.prev, s.next = nil, t.head
	if t.head != nil {
		t.head.prev = s
	}
	t.head = s
	if t.tail == nil {
		t.tail = s
	}
}

func (t *Tracker) unlink(s *stream) {
	if s.prev != nil {
		s.prev.next = s.next
	} else if t.head == s {
		t.head = s.next
	}
	if s.next != nil {
		s.next.prev = s.prev
	} else if t.tail == s {
		t.tail = s.prev
	}
	s.prev, s.next = nil, nil
}

// publish sends s's news.
func (t *Tracker) publish(s *stream) {
	t.ack.write(s)
	s.sent()
}

// send publishes one ack message.
func (t *Tracker) send(subject string, data []byte) {
	if err := t.conn.Publish(subject, data); err != nil {
		t.counters.publishFailures.Add(1)
		if ok, held := t.replyLog.Allow(time.Now()); ok {
			t.log.Warn().Err(err).Int64("more", held).Msg("ingress: a batched ack could not be published")
		}
		return
	}
	t.counters.ackMessages.Add(1)
}

func minOf(v []uint64) uint64 {
	if len(v) == 0 {
		return 0
	}
	m := v[0]
	for _, x := range v[1:] {
		m = min(m, x)
	}
	return m
}

// Stats are the batched-ack counters (ingress's Stats.Batched).
type Stats struct {
	// Received counts the messages of batched-ack streams taken; Acked the ones acknowledged as
	// stored (duplicates and resends found in the store included), Refused the ones refused.
	Received, Acked, Refused int64
	// AckMessages counts the acks published; Missing the sequences reported missing.
	AckMessages, Missing int64
	// Streams is the size of the stream table; Evicted and Expired count the streams dropped for
	// room and for idleness.
	Streams          int64
	Evicted, Expired int64
	// Lookups counts resends looked up in the store, LookupHits those found there (not stored
	// again).
	Lookups, LookupHits int64
	// Overflow counts batches the tracker could not take (never blocking the ack stage); Markers
	// the markers sent to the workers; PublishFailures the acks that could not be published.
	Overflow, Markers, PublishFailures int64
	// Untracked counts batched messages without a reply subject: stored, never acked.
	Untracked int64
	// Dropped counts copies of a sequence dropped at ingress because another copy of it was
	// stored or on its way (resends, duplicates): the stream's dedupe (received.go).
	Dropped int64
	// Packs counts the packs taken (pack.go); their entries count in Received one by one.
	Packs int64
}

// Stats returns a snapshot of the counters. Safe to call at any time, from any goroutine.
func (t *Tracker) Stats() Stats {
	c := &t.counters
	return Stats{
		Received: c.received.Load(), Acked: c.acked.Load(), Refused: c.refused.Load(),
		AckMessages: c.ackMessages.Load(), Missing: c.missing.Load(), Streams: c.streams.Load(),
		Evicted: c.evicted.Load(), Expired: c.expired.Load(), Lookups: c.lookups.Load(),
		LookupHits: c.lookupHits.Load(), Overflow: c.overflow.Load(), Markers: c.markers.Load(),
		PublishFailures: c.publishFailures.Load(), Untracked: c.untrackedSends.Load(),
		Dropped: c.dropped.Load(), Packs: c.packs.Load(),
	}
}

// Claims is stream's received set (received.go), made if the table does not hold it.
func (t *Tracker) Claims(stream string) *Claims { return t.recv.set(stream) }

// Release forgets a claim of stream's seq (a refusal ingress answered itself).
func (t *Tracker) Release(stream string, seq uint64) { t.recv.release(stream, seq) }

// The counts ingress keeps in Stats: messages of batched-ack streams taken (once per run of a
// pack: two workers adding to one counter per message made its cache line bounce), packs, sends
// without an ack subject, lookups of resends (and the hits), copies dropped by the claims.
func (t *Tracker) CountReceived(n int) { t.counters.received.Add(int64(n)) }

// CountPack: see CountReceived.
func (t *Tracker) CountPack() { t.counters.packs.Add(1) }

// CountUntracked: see CountReceived.
func (t *Tracker) CountUntracked() { t.counters.untrackedSends.Add(1) }

// CountLookup: see CountReceived.
func (t *Tracker) CountLookup(hit bool) {
	t.counters.lookups.Add(1)
	if hit {
		t.counters.lookupHits.Add(1)
	}
}

// CountDropped: see CountReceived.
func (t *Tracker) CountDropped() { t.counters.dropped.Add(1) }
