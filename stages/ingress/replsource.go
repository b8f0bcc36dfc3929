package ingress

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"

	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/internal/wire"
	"github.com/rocketstore/engine/stages"
	"github.com/rocketstore/engine/stages/ingress/replicated"
	"github.com/rocketstore/engine/stages/ingress/route"
)

// replSource is the replicated partitions' streams as a Source (Config.Replicated): package
// replicated consumes them and hands each message to Take, in its partition's sequence order;
// this file is the pipeline's side (the records, their outcomes).
type replSource struct {
	in  *Ingress
	src *replicated.Source
}

// errReplicatedMove: in replicated mode a partition's engines share its consumer; the pin moves.
var errReplicatedMove = errors.New("ingress: replicated mode: a partition moves with its consumer's pin, not by handoff")

func (s *replSource) start(ctx context.Context) error {
	if err := s.src.Start(ctx); err != nil {
		return err
	}
	s.in.repl.Store(s.src) // its status from now on
	return nil
}

func (s *replSource) stop(context.Context, context.CancelFunc) { s.src.Stop() }

func (s *replSource) durable() bool                              { return true }
func (s *replSource) addPartition(context.Context, int) error    { return errReplicatedMove }
func (s *replSource) removePartition(context.Context, int) error { return errReplicatedMove }

// refuse: a replicated message is refused only in its record (Take, record), which its
// partition's floor passes over; nothing to answer here (JetStream acked the publisher).
func (s *replSource) refuse(*nats.Msg, int, error) {}

// abandon: a message not stored is taken again from the partition's floor by the next engine or
// session; nothing to answer.
func (s *replSource) abandon(*job) {}

// Topic is the topic subject is stored under (replicated.Sink).
func (s *replSource) Topic(subject string) (string, bool) {
	rt := s.in.router.Route(subject)
	return s.in.router.StoredTopic(rt), rt.Err == nil
}

// Take hands a replicated message to its worker (replicated.Sink). A message that cannot be
// stored at all (its subject is not one of the partition's: a stream capturing more than its
// partition) is refused, counted, and done: it is in the stream, it will never be stored here.
func (s *replSource) Take(ctx context.Context, m *nats.Msg, meta *replicated.Meta) error {
	in := s.in
	in.counters.received.Add(1)
	rt := in.router.Route(m.Subject)
	err := rt.Err
	if err == nil && int(rt.Partition) != meta.Part.Number() {
		err = fmt.Errorf("%w: %q in the stream of partition %d", route.ErrInvalidSubject, m.Subject, meta.Part.Number())
	}
	if err != nil {
		in.noteReject(m.Subject, err)
		meta.Part.DoneOne(meta.Seq, meta.Ack)
		return nil
	}
	rt = in.router.Admit(rt, 1)
	w := in.workers[rt.Worker(rt.Partition, len(in.workers))]
	j := job{msg: m, route: rt, queue: rt.Partition, origin: meta}
	if w.box.Put(j, ctx.Done(), in.abort) {
		return nil
	}
	in.settleJob(&j, false)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return ErrStopped
}

// record encodes a replicated message deterministically: born and store time are the stream's
// timestamp, UNIQ_KEY its Nats-Msg-Id or "<stream>:<seq>", NATS_STREAM_SEQ its sequence, and no
// dedupe window (the sequence rule dedupes). A message refused as invalid comes back with its
// error (done all the same: it never will be stored).
func (s *replSource) record(w *worker, b *batchBuild, j *job) {
	meta := j.origin.(*replicated.Meta)
	sh := wire.SeqHeader{Stream: meta.Part.StreamName(), Seq: meta.Seq}
	w.props.extra = w.props.extra[:0]
	w.props.extra = commitlog.AppendProperty(w.props.extra, replicated.PropStreamSeq, strconv.FormatUint(meta.Seq, 10))
	rec, err := w.encodeSeq(j, meta.TS, &sh)
	w.props.extra = w.props.extra[:0]
	if err != nil {
		w.in.noteReject(j.msg.Subject, err)
		b.recs = append(b.recs, stages.Record{Topic: j.route.Topic, QueueID: j.queue, Err: err, Ctx: meta})
		b.extra++
		return
	}
	rec.MsgID, rec.Reply, rec.Ctx, rec.StoreTimestamp = "", "", meta, meta.TS
	b.recs = append(b.recs, rec)
}

// done reports the outcomes to the partitions, once per partition per batch: stored, or refused
// for good (400, 413), is done; anything else (the store could not take it now) fails its
// partition's session, which starts again from the floor.
func (s *replSource) done(b *stages.Batch) {
	var acc map[*replicated.Partition][]replicated.Done
	for i := range b.Records {
		r := &b.Records[i]
		meta, ok := r.Ctx.(*replicated.Meta)
		if !ok {
			continue
		}
		if r.Err != nil {
			if code := ReplyCode(r.Err); code != wire.CodeInvalid && code != wire.CodeTooLarge {
				meta.Part.Fail(meta.Seq)
				continue
			}
		}
		if acc == nil {
			acc = map[*replicated.Partition][]replicated.Done{}
		}
		acc[meta.Part] = append(acc[meta.Part], replicated.Done{Seq: meta.Seq, Ack: meta.Ack})
	}
	for p, ds := range acc {
		p.DoneMany(ds)
	}
	s.in.recycle(b)
}
