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

// jsOrigin is what a job of the JetStream source keeps of its message (job.origin): its dedupe
// key and whether JetStream delivered it before (jspull.Key).
type jsOrigin struct {
	key         string
	redelivered bool
}

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
	key, redelivered := jspull.Key(m)
	in.hand(job{msg: m, route: rt, queue: in.router.Queue(m, rt), origin: &jsOrigin{key: key, redelivered: redelivered}})
}

// record encodes the message as a plain one, but its reply subject is JetStream's ack subject:
// the message itself is settled instead (done), and its dedupe key is its UNIQ_KEY, so that the
// IndexFile holds it. A redelivery whose key the store has already is acked from there instead
// (jspull.Config).
func (s *jsSource) record(w *worker, b *batchBuild, j *job) {
	o, _ := j.origin.(*jsOrigin)
	if o == nil {
		o = &jsOrigin{}
	}
	if o.redelivered && o.key != "" && j.route.Err == nil && s.src.Found != nil {
		w.in.restart.lookups.Add(1)
		if s.src.Found(j.route.Topic, o.key, jspull.FoundSince(j.msg)) {
			w.in.restart.found.Add(1)
			w.in.settleJob(j, true)
			s.settle(j.msg, nil) // stored before, its ack lost (a crash, a restart): ack it now
			return
		}
	}
	w.props.uniq = o.key
	rec, err := w.encode(j, b.born)
	w.props.uniq = ""
	if err != nil {
		w.in.settleJob(j, false)
		w.in.reject(j.msg, err)
		return
	}
	rec.Reply, rec.Ctx, rec.MsgID = "", j.msg, o.key
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
