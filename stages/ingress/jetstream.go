package ingress

import (
	"context"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/rocketstore/engine/stages"
	"github.com/rocketstore/engine/stages/ingress/jspull"
)

// jsSource is a JetStream stream as a Source (Config.JetStream): package jspull pulls it and
// settles each message; this file is the pipeline's side. Replies go to JetStream, not to
// publishers (see jspull.Config).
type jsSource struct {
	in     *Ingress
	src    *jspull.Config
	puller *jspull.Puller
}

func (s *jsSource) durable() bool                              { return true }
func (s *jsSource) addPartition(context.Context, int) error    { return ErrNotPartitioned }
func (s *jsSource) removePartition(context.Context, int) error { return ErrNotPartitioned }

// abandon: a message not acked is delivered again by JetStream after AckWait.
func (s *jsSource) abandon(*job) {}

func (s *jsSource) start(ctx context.Context) (err error) {
	s.puller, err = jspull.Start(ctx, s.in.cfg.Conn, s.src, s.in.log, &s.in.replyLog, s.deliver)
	return err
}

// stop waits until the pull loop has handed over its last message.
func (s *jsSource) stop(context.Context, context.CancelFunc) { s.puller.Stop() }

// deliver hands a pulled message to the worker that owns its (topic, queue); a message of an
// excluded subject is not ours to store: done with it.
func (s *jsSource) deliver(m *nats.Msg) {
	in := s.in
	in.counters.received.Add(1)
	if in.cfg.excluded(m.Subject) {
		in.counters.excluded.Add(1)
		s.settle(m, nil)
		return
	}
	rt := in.router.Admit(in.router.Route(m.Subject), 1)
	in.hand(job{msg: m, route: rt, queue: in.router.Queue(m, rt)})
}

// record encodes the message as a plain one, but its reply subject is JetStream's ack subject:
// the message itself is settled instead (done), and without a Nats-Msg-Id its stream and
// sequence are the dedupe key.
func (s *jsSource) record(w *worker, b *batchBuild, j *job) {
	rec, err := w.encode(j, b.born)
	if err != nil {
		w.in.settleJob(j, false)
		w.in.reject(j.msg, err)
		return
	}
	rec.Reply, rec.Ctx = "", j.msg
	if rec.MsgID == "" {
		rec.MsgID = jspull.DedupeKey(j.msg)
	}
	b.recs = append(b.recs, rec)
}

// done settles each message once the store answered.
func (s *jsSource) done(b *stages.Batch) {
	in := s.in
	for i := range b.Records {
		r := &b.Records[i]
		m, ok := r.Ctx.(*nats.Msg)
		if !ok {
			continue
		}
		if r.Err == nil {
			in.counters.acks.Add(1)
		} else {
			in.counters.failed[codeIndex(ReplyCode(r.Err))].Add(1)
		}
		s.settle(m, r.Err)
	}
	in.recycle(b)
}

// refuse settles a message refused before it reached the store.
func (s *jsSource) refuse(m *nats.Msg, _ int, err error) { s.settle(m, err) }

func (s *jsSource) settle(m *nats.Msg, err error) {
	if aerr := jspull.Settle(m, err != nil, ReplyCode(err)); aerr != nil {
		s.in.counters.replyFailures.Add(1)
		if ok, held := s.in.replyLog.Allow(time.Now()); ok {
			s.in.log.Warn().Err(aerr).Int64("more", held).Msg("ingress: a jetstream ack could not be sent")
		}
	}
}
