package ingress

import (
	"github.com/nats-io/nats.go"

	"github.com/rocketstore/engine/internal/wire"
	"github.com/rocketstore/engine/stages"
)

// batched builds the record of a message that carries the batched-ack header (batched.go). ok
// is false when the message was refused as a plain one and answered already: a malformed header,
// or batched acks off, or a copy of a sequence another copy of which entered the pipeline
// already (received.go). A message refused here for its stream (invalid input) is returned as a
// record with its error, so that its refusal reaches the tracker in order with the others; a
// resend that Lookup finds in the store is returned as a record with a storedBefore error: the
// appender skips both. n is the number of messages of the batch being built (see newMeta). The record
// is built in place in rec, a zeroed slot of the batch (a Record is a few hundred bytes: built
// and copied out, it cost a sixth of the worker's time); rec is left as it may be when ok is
// false. The caller counts the message in the tracker's received counter (once per run of a
// pack: two workers adding to one counter per message made its cache line bounce).
func (w *worker) batched(rec *stages.Record, j *job, born int64, sh wire.SeqHeader, metas *[]seqMeta, n int) bool {
	in, m := w.in, j.msg
	t := in.tracker
	ids := m.Header[nats.MsgIdHdr]
	if m.Reply == "" {
		// Nowhere to send acks: stored as a fire-and-forget message (with the appender's
		// dedupe, as a message with a Nats-Msg-Id), never tracked.
		t.counters.untrackedSends.Add(1)
		if err := w.encodeInto(rec, j, born, &sh); err != nil {
			in.reject(m, err)
			return false
		}
		if len(ids) == 0 {
			rec.MsgID = wire.DerivedMsgID(sh.Stream, sh.Seq)
		}
		return true
	}
	if sh.Resend && t.cfg.Lookup != nil && j.route.Err == nil && len(ids) < 2 {
		id := wire.DerivedMsgID(sh.Stream, sh.Seq)
		if len(ids) == 1 {
			id = ids[0]
		}
		t.counters.lookups.Add(1)
		if at, found := t.cfg.Lookup(j.route.Topic, id); found {
			t.counters.lookupHits.Add(1)
			*rec = stages.Record{Topic: j.route.Topic, QueueID: at.QueueID, MsgID: id,
				Err: &storedBefore{at: at}, Ctx: newMeta(metas, n, sh, m.Reply)}
			return true
		}
	}
	var set *recvSet
	if j.pack != nil {
		set = j.pack.recv // looked up once for the pack
	} else {
		set = t.recv.set(sh.Stream)
	}
	first, tracked := set.claim(sh.Seq, sh.Acked)
	if !first {
		// Another copy of the sequence entered the pipeline: its outcome answers it.
		t.counters.dropped.Add(1)
		return false
	}
	meta := newMeta(metas, n, sh, m.Reply)
	if err := w.encodeInto(rec, j, born, &sh); err != nil {
		in.noteReject(m.Subject, err)
		meta.rejected = true
		*rec = stages.Record{Topic: j.route.Topic, QueueID: j.queue, Err: err, Ctx: meta}
		return true
	}
	if !tracked && len(ids) == 0 {
		// Beyond the claims' reach: the appender's window dedupes it. (Claimed, the claim is its
		// dedupe: no entry in the window, where a Nats-Msg-Id of the publisher's own keeps one,
		// since it may be shared across streams.)
		rec.MsgID = wire.DerivedMsgID(sh.Stream, sh.Seq)
	}
	rec.Reply, rec.Ctx = "", meta
	return true
}

// seqHeader says whether j is a message of a batched-ack stream (isBatched), and if so gives its
// sequence: an entry of a pack (checked by the callback), or a message with an Rs-Seq header
// (checked here). A malformed header, or one that comes while batched acks are off, is refused
// and answered here: ok is then false, and the caller skips the message.
func (w *worker) seqHeader(j *job) (sh wire.SeqHeader, isBatched, ok bool) {
	if j.pack != nil {
		return j.pack.entrySeq(j.seq), true, true
	}
	vals := batchedHeader(j.msg)
	if vals == nil || w.in.js != nil {
		return wire.SeqHeader{}, false, false
	}
	sh, err := parseSeqHeader(vals)
	if err == nil && w.in.tracker == nil {
		err = ErrBatchedOff
	}
	if err != nil {
		w.in.reject(j.msg, err)
		return wire.SeqHeader{}, true, false
	}
	return sh, true, true
}

// newMeta appends a seqMeta to the batch's metas (with a capacity of at least n, the batch's
// messages, so that the pointers into it stay valid) and returns it.
func newMeta(metas *[]seqMeta, n int, sh wire.SeqHeader, ackTo string) *seqMeta {
	if cap(*metas) < n {
		*metas = make([]seqMeta, 0, n)
	}
	*metas = append(*metas, seqMeta{SeqHeader: sh, ackTo: ackTo})
	return &(*metas)[len(*metas)-1]
}
