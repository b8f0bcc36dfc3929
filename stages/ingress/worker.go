package ingress

import (
	"context"

	"github.com/nats-io/nats.go"

	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/stages"
	"github.com/rocketstore/engine/stages/ingress/batched"
	"github.com/rocketstore/engine/stages/ingress/route"
)

// job is one message on its way from the callback to its worker.
type job struct {
	msg   *nats.Msg
	route *route.Route
	queue int32
	// count, for a pack entry, is how many entries from msg on (consecutive in the pack's
	// entries, and in sequence) the job carries: a run that goes to one queue (onPack). 0 is
	// one message.
	count int32
	// marker, with msg nil, is a marker request of the batched-ack tracker (batched.Marker).
	marker uint64
	// pack is set for an entry of a pack (packs.go): msg is the entry, and seq its sequence (the
	// first's, for a run).
	pack *batched.Pack
	seq  uint64
	// fence, with msg nil, is a fence (handoff.go): closed once the batch it rides in is acked.
	fence fence
	// origin is what the source keeps of the message (the replicated source's place in its
	// stream), nil for core NATS.
	origin any
}

// batchBuild is the batch a worker is building: its records (in a batchMem, with room for n
// messages and a marker), the metas of its batched records (a capacity of n, so that pointers
// into it hold), and how many of its records are not messages to store (markers, fences,
// refusals that travel to the tracker).
type batchBuild struct {
	recs  []stages.Record
	metas []batched.Meta
	n     int
	extra int
	// born is the batch's born timestamp: NATS does not carry a publish time, so it is when
	// ingress encoded the batch.
	born int64
}

// worker validates and encodes the messages of the (topic, queue)s it owns, in arrival order,
// and sends them to Out in batches. Only its own goroutine touches its fields (jobs excepted).
type worker struct {
	in *Ingress
	id int
	// jobs is the worker's inbox: the callbacks send, the worker receives. Never closed: on a
	// graceful stop, subsDone tells the worker that no more sends come.
	jobs  chan job
	props propBuilder
	batch []job
	// carry is a job drain took from the inbox that did not fit in the batch it built: it
	// starts the next one (carried says there is one).
	carry   job
	carried bool
	// arena is the buffer records are encoded into (stages.Arena), and held the arenas the
	// records of the batch being built were cut from, one reference each. A record that does
	// not fit in an arena gets a buffer of its own.
	arena *stages.Arena
	held  []*stages.Arena
	msg   commitlog.Message // encodeSeq's, reused
	build batchBuild        // process's, reused
	tmpl  packTemplate      // the pack entries' (packtemplate.go)
	plain plainTemplates    // the plain messages' (plaintemplate.go)
}

// messages is how many messages j carries.
func (j *job) messages() int { return max(int(j.count), 1) }

// run is the worker loop: block for one message, take what else is queued (up to MaxBatch
// messages), encode, send. It returns nil after a graceful stop, ctx's error on an abort.
func (w *worker) run(ctx context.Context) error {
	for {
		if w.carried {
			if err := w.process(ctx, w.drain(w.batch[:0])); err != nil {
				return err
			}
			continue
		}
		select {
		case j := <-w.jobs:
			if err := w.process(ctx, w.drain(append(w.batch[:0], j))); err != nil {
				return err
			}
		case <-w.in.subsDone:
			return w.finish(ctx)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// finish sends what the channel still holds; no callback runs any more, so every pass either
// empties the channel or takes at least one job from it.
func (w *worker) finish(ctx context.Context) error {
	for range cap(w.jobs) + 2 {
		batch := w.drain(w.batch[:0])
		if len(batch) == 0 {
			return nil
		}
		if err := w.process(ctx, batch); err != nil {
			return err
		}
	}
	return nil // unreachable: every pass takes at least one of the at most cap(jobs) jobs
}

// drain appends to batch the job carried over from the last drain, if any, then the jobs queued
// in the inbox, without waiting, as long as the batch stays within MaxBatch messages. A job that
// would take it past that is carried over to the next batch (a run holds at most MaxBatch, see
// onPack, so it always fits in one).
func (w *worker) drain(batch []job) []job {
	if w.carried {
		batch = append(batch, w.carry)
		w.carry, w.carried = job{}, false
	}
	n := 0
	for i := range batch {
		n += batch[i].messages()
	}
	for n < w.in.cfg.MaxBatch {
		select {
		case j := <-w.jobs:
			if n+j.messages() > w.in.cfg.MaxBatch {
				w.carry, w.carried = j, true
				return batch
			}
			batch = append(batch, j)
			n += j.messages()
		default:
			return batch
		}
	}
	return batch
}

// process encodes jobs into one batch and sends it to Out. A message that fails validation is
// answered at once and left out. jobs is cleared afterwards so that it holds no message.
func (w *worker) process(ctx context.Context, jobs []job) error {
	w.batch = jobs
	// The batch takes over the arena references its records hold; whatever is still held on
	// the way out (no batch was sent) is released here.
	w.held = w.held[:0]
	defer func() {
		for i := range jobs {
			if j := &jobs[i]; j.count > 0 {
				w.in.packDone(j.pack, int(j.count)) // its records are encoded, or refused
			}
		}
		clear(jobs)
		for _, a := range w.held {
			a.Release()
		}
		clear(w.held)
		w.held = w.held[:0]
	}()
	// The worker's own batchBuild: the sources get a pointer to it, which would put one on the
	// heap per batch.
	bb := &w.build
	now := w.in.cfg.Clock()
	*bb = batchBuild{born: now.UnixMilli()}
	w.props.bornAt = now
	defer func() { *bb = batchBuild{} }() // keep no batch alive
	for i := range jobs {
		bb.n += jobs[i].messages()
	}
	mem := w.in.batchMem(bb.n)
	bb.recs, bb.metas = mem.recs, mem.metas
	var marker uint64
	for i := range jobs {
		switch j := &jobs[i]; {
		case j.count > 0:
			w.packRun(bb, j)
		case j.msg == nil:
			if j.fence != nil {
				bb.recs = append(bb.recs, stages.Record{Err: errFence, Ctx: j.fence})
				bb.extra++
			}
			marker = max(marker, j.marker)
		default:
			w.in.src.record(w, bb, j)
		}
	}
	if marker != 0 {
		bb.recs = append(bb.recs, stages.Record{Err: batched.ErrMarker, Ctx: &batched.Marker{Worker: w.id, Epoch: marker}})
		bb.extra++
	}
	recs, extra := bb.recs, bb.extra
	mem.recs, mem.metas = recs, bb.metas // grown, maybe
	if len(recs) == 0 {
		w.in.recycleMem(mem)
		return nil
	}
	// A source that acks its own stream (JetStream) does so only once durable here, whatever
	// the flush mode.
	mem.arenas = append(mem.arenas[:0], w.held...)
	b := &mem.batch
	*b = stages.Batch{Records: recs, Done: w.in.done, Durable: w.in.durable,
		Arenas: mem.arenas, Owner: mem}
	select {
	case w.in.cfg.Out <- b:
		w.in.counters.encoded.Add(int64(len(recs) - extra))
		w.held = w.held[:0] // the batch's now
		return nil
	case <-ctx.Done():
		// The pipeline stopped: the batch is answered as the store answers a batch it did not
		// take (its source's done): a reply to each plain message, a refusal to each stream in its ack.
		w.in.counters.aborted.Add(int64(len(recs) - extra))
		b.Arenas = nil // the references are w.held's, released on the way out
		for i := range recs {
			if recs[i].Err == nil {
				recs[i].Err = errHeldAtAbort
			}
		}
		w.in.done(b)
		return ctx.Err()
	}
}

// encode turns one message into a record (encode.go).
func (w *worker) encode(j *job, born int64) (stages.Record, error) {
	return w.encodeSeq(j, born, nil)
}
