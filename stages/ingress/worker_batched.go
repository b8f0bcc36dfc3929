package ingress

import (
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/rocketstore/engine/internal/wire"
	"github.com/rocketstore/engine/stages"
	"github.com/rocketstore/engine/stages/ingress/batched"
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
func (w *worker) batched(rec *stages.Record, j *job, born int64, sh wire.SeqHeader, metas *[]batched.Meta, n int) bool {
	in, m := w.in, j.msg
	t := in.tracker
	ids := m.Header[nats.MsgIdHdr]
	if m.Reply == "" {
		// Nowhere to send acks: stored as a fire-and-forget message (with the appender's
		// dedupe, as a message with a Nats-Msg-Id), never tracked.
		t.CountUntracked()
		if err := w.encodeInto(rec, j, born, &sh); err != nil {
			in.reject(m, err)
			return false
		}
		if len(ids) == 0 {
			rec.MsgID = wire.DerivedMsgID(sh.Stream, sh.Seq)
		}
		return true
	}
	if lookup := in.cfg.Batched.Lookup; sh.Resend && lookup != nil && j.route.Err == nil && len(ids) < 2 {
		id := wire.DerivedMsgID(sh.Stream, sh.Seq)
		if len(ids) == 1 {
			id = ids[0]
		}
		at, found := lookup(j.route.Topic, id)
		t.CountLookup(found)
		if found {
			*rec = stages.Record{Topic: j.route.Topic, QueueID: at.QueueID, MsgID: id,
				Err: &batched.StoredBefore{At: at}, Ctx: batched.NewMeta(metas, n, sh, m.Reply)}
			return true
		}
	}
	var set *batched.Claims
	if j.pack != nil {
		set = j.pack.Claims // looked up once for the pack
	} else {
		set = t.Claims(sh.Stream)
	}
	first, tracked := set.Claim(sh.Seq, sh.Acked)
	if !first {
		// Another copy of the sequence entered the pipeline: its outcome answers it.
		t.CountDropped()
		return false
	}
	meta := batched.NewMeta(metas, n, sh, m.Reply)
	if err := w.encodeInto(rec, j, born, &sh); err != nil {
		in.noteReject(m.Subject, err)
		meta.Rejected = true
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
		return j.pack.EntrySeq(j.seq), true, true
	}
	vals := batched.Header(j.msg)
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

// trackerHost is what the tracker needs of ingress (batched.Pipeline).
type trackerHost struct{ in *Ingress }

func (h trackerHost) Workers() int            { return len(h.in.workers) }
func (h trackerHost) Recycle(b *stages.Batch) { h.in.recycle(b) }
func (h trackerHost) Code(err error) int      { return ReplyCode(err) }

// OfferMarker puts a marker job in worker i's inbox, behind what the callbacks handed it.
func (h trackerHost) OfferMarker(i int, epoch uint64) bool {
	select {
	case h.in.workers[i].jobs <- job{marker: epoch}:
		return true
	default:
		return false
	}
}

// ErrBatchedOff: a message carries the batched-ack header, but this engine does not track streams
// (turned off, or a queue group, which splits a stream between engines). It is refused (400, it
// wraps ErrInvalidHeader) on the reply subject, so that the publisher learns it at once instead
// of by a timeout.
var ErrBatchedOff = fmt.Errorf("%w: batched acks (%s) are off in this engine", ErrInvalidHeader, wire.HeaderSeq)

// parseSeqHeader parses the values of an Rs-Seq header (wire.ParseSeqHeader); the error wraps
// ErrInvalidHeader.
func parseSeqHeader(vals []string) (wire.SeqHeader, error) {
	sh, err := wire.ParseSeqHeader(vals)
	if err != nil {
		return sh, fmt.Errorf("%w: %w", ErrInvalidHeader, err)
	}
	return sh, nil
}
