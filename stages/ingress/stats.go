package ingress

import (
	"sync/atomic"

	"github.com/rocketstore/engine/stages/ingress/batched"
	"github.com/rocketstore/engine/stages/ingress/route"
)

// Stats are ingress's counters since New, read with Ingress.Stats. Per-code maps are keyed by
// the reply codes (wire.CodeInvalid, ...) and hold only non-zero counts.
type Stats struct {
	// Received counts the messages nats.go handed to the callbacks and ingress took (not those
	// it dropped: see Dropped); Excluded those of them that were excluded (never stored);
	// NoResponders the excluded requests nobody else receives, answered with NATS's
	// no-responders status (noresponders.go).
	Received, Excluded, NoResponders int64
	// Encoded counts the records sent to Out.
	Encoded int64
	// Rejected counts, by reply code, the messages ingress refused (invalid or too large): never
	// sent to Out. Aborted counts those it held when Run's context ended (503).
	Rejected map[int]int64
	Aborted  int64
	// Failed counts, by reply code, the records the store did not take (Record.Err in Done).
	Failed map[int]int64
	// Dropped is the sum of nats.go's drops over the subscriptions (Subscription.Dropped): what
	// the client discarded because the pending limits were reached (slow consumer), plus what it
	// still buffered when a subscription had to be unsubscribed without a drain (abort, drain
	// timeout). Pending is what nats.go buffers right now, in messages, summed over the
	// subscriptions.
	Dropped, Pending int64
	// DroppedByTopic counts by topic the fire-and-forget messages ingress dropped itself, its
	// inboxes holding the pending limits already (included in Dropped; nats.go's own drops,
	// whose subjects nats.go does not tell, are the rest). The topics past the first 1024 are
	// counted under OtherTopics.
	DroppedByTopic map[string]int64
	// SlowConsumerEvents counts the times a subscription became a slow consumer.
	SlowConsumerEvents int64
	// AcksSent and ErrorReplies count the replies published; ReplyFailures the publishes that
	// failed (connection closed or out of buffer).
	AcksSent, ErrorReplies, ReplyFailures int64
	// WorkerDepth is the number of messages waiting in each worker's channel.
	WorkerDepth []int
	// Routes are the router's: the subject cache, the topic limit.
	Routes route.Stats
	// Batched are the batched-ack counters (zero when batched acks are off).
	Batched batched.Stats
	// StoreLookups counts the message ids looked up in the store because a record stored before
	// the start, or one whose id the appender dropped from memory, could still be within the
	// dedupe window (Config.StoreDedupe), or because JetStream delivered the message again (the
	// JetStream source); StoreDuplicates those found there: answered as duplicates (acked, for
	// JetStream), not stored again.
	StoreLookups, StoreDuplicates int64
}

// counters are the shared atomic counters behind Stats.
type counters struct {
	received, excluded, encoded, aborted atomic.Int64
	rejected, failed                     [len(codes)]atomic.Int64
	slowEvents                           atomic.Int64
	acks, errReplies, replyFailures      atomic.Int64
	noResponders                         atomic.Int64
	// discarded counts what nats.go still buffered when a subscription was unsubscribed without
	// a drain (abort, drain timeout): lost like a drop, so reported with the drops.
	discarded atomic.Int64
}

// Stats returns a snapshot of the counters. Safe to call at any time, from any goroutine.
func (in *Ingress) Stats() Stats {
	c := &in.counters
	s := Stats{
		Received:           c.received.Load(),
		Excluded:           c.excluded.Load(),
		NoResponders:       c.noResponders.Load(),
		Encoded:            c.encoded.Load(),
		Aborted:            c.aborted.Load(),
		Rejected:           map[int]int64{},
		Failed:             map[int]int64{},
		SlowConsumerEvents: c.slowEvents.Load(),
		AcksSent:           c.acks.Load(),
		ErrorReplies:       c.errReplies.Load(),
		ReplyFailures:      c.replyFailures.Load(),
		Routes:             in.router.Stats(),
		StoreLookups:       in.restart.lookups.Load(),
		StoreDuplicates:    in.restart.found.Load(),
	}
	for i, code := range codes {
		if n := c.rejected[i].Load(); n > 0 {
			s.Rejected[code] = n
		}
		if n := c.failed[i].Load(); n > 0 {
			s.Failed[code] = n
		}
	}
	if in.tracker != nil {
		s.Batched = in.tracker.Stats()
	}
	s.Dropped, s.Pending = in.natsCounts()
	var own int64
	own, s.DroppedByTopic = in.ffDrops.Snapshot()
	s.Dropped += own
	s.Received -= own // dropped, as nats.go's drops are: not received
	for _, w := range in.workers {
		s.WorkerDepth = append(s.WorkerDepth, w.box.Depth())
	}
	return s
}

// natsCounts sums nats.go's dropped and pending counts over the subscriptions. A closed
// subscription no longer tells its drops, so the last count read is kept.
func (in *Ingress) natsCounts() (dropped, pending int64) {
	dropped = in.counters.discarded.Load()
	for _, s := range in.subscriptions() {
		dropped += s.readDropped()
		if p, _, err := s.sub.Pending(); err == nil {
			pending += int64(p)
		}
	}
	return dropped, pending
}

// sumCounts is the total of a per-code count map.
func sumCounts(m map[int]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}
