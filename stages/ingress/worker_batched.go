package ingress

import (
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/rocketstore/engine/internal/wire"
	"github.com/rocketstore/engine/stages"
	"github.com/rocketstore/engine/stages/ingress/batched"
)

// batchedRecord builds the record of a message that carries the batched-ack header. ok
// is false when the message was refused as a plain one and answered already: a malformed header,
// or batched acks off, or a copy of a sequence another copy of which entered the pipeline
// already (batched.Claims). A message refused here for its stream (invalid input) is returned as a
// record with its error, so that its refusal reaches the tracker in order with the others; a
// resend that Lookup finds in the store is returned as a record with a storedBefore error: the
// appender skips both. Its meta goes in b's metas (batched.NewMeta). The record is built in place
// in rec, a zeroed slot of the batch (a Record is a few hundred bytes: built
// and copied out, it cost a sixth of the worker's time); rec is left as it may be when ok is
// false. The caller counts the message in the tracker's received counter (once per run of a
// pack: two workers adding to one counter per message made its cache line bounce).
func (w *worker) batchedRecord(rec *stages.Record, b *batchBuild, j *job, sh wire.SeqHeader) bool {
	in, m := w.in, j.msg
	t := in.tracker
	ids := m.Header[nats.MsgIdHdr]
	if m.Reply == "" {
		// Nowhere to send acks: stored as a fire-and-forget message (with the appender's
		// dedupe, as a message with a Nats-Msg-Id), never tracked.
		t.CountUntracked()
		if err := w.encodeInto(rec, j, b.born, &sh); err != nil {
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
				Err: &batched.StoredBefore{At: at}, Ctx: batched.NewMeta(&b.metas, b.n, sh, m.Reply)}
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
	meta := batched.NewMeta(&b.metas, b.n, sh, m.Reply)
	if err := w.encodeInto(rec, j, b.born, &sh); err != nil {
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

// batchedMsg adds the record of j, a message with the Rs-Seq header vals, to b. A malformed
// header, or one that comes while batched acks are off, is refused and answered here.
func (w *worker) batchedMsg(b *batchBuild, j *job, vals []string) {
	sh, err := parseSeqHeader(vals)
	if err == nil && w.in.tracker == nil {
		err = ErrBatchedOff
	}
	if err != nil {
		w.in.settleJob(j, false)
		w.in.reject(j.msg, err)
		return
	}
	w.in.tracker.CountReceived(1)
	w.addBatched(b, j, sh)
}

// packRun adds the records of j, a run of pack entries, to b: each is a batched message of its
// own.
func (w *worker) packRun(b *batchBuild, j *job) {
	run := j.pack.Run(j.seq, int(j.count))
	w.in.tracker.CountReceived(len(run))
	for k := range run {
		ej := job{msg: &run[k], route: j.route, queue: j.queue, pack: j.pack, seq: j.seq + uint64(k)}
		w.addBatched(b, &ej, j.pack.EntrySeq(ej.seq))
	}
}

// trackerHost is what the tracker needs of ingress (batched.Pipeline).
type trackerHost struct{ in *Ingress }

func (h trackerHost) Workers() int            { return len(h.in.workers) }
func (h trackerHost) Recycle(b *stages.Batch) { h.in.recycle(b) }
func (h trackerHost) Code(err error) int      { return ReplyCode(err) }

// OfferMarker puts a marker job in worker i's inbox, behind what the callbacks handed it.
func (h trackerHost) OfferMarker(i int, epoch uint64) bool {
	return h.in.workers[i].box.TryPut(job{marker: epoch})
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

// addBatched builds the record of j, a message of a batched-ack stream with sequence sh, in a
// new slot at the end of b's records, and takes the slot back when batchedRecord refused the
// message (it is answered already); a record that carries its refusal counts in b.extra. The
// slot is within the records' capacity (n messages, see batchMem), so no later append moves the
// record being built.
func (w *worker) addBatched(b *batchBuild, j *job, sh wire.SeqHeader) {
	b.recs = append(b.recs, stages.Record{})
	rec := &b.recs[len(b.recs)-1]
	switch {
	case !w.batchedRecord(rec, b, j, sh):
		b.recs = b.recs[:len(b.recs)-1]
		w.in.settleJob(j, false) // refused, or another copy of it is on its way
	case rec.Err != nil:
		b.extra++
	}
}
