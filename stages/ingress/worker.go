package ingress

import (
	"context"

	"github.com/nats-io/nats.go"

	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/stages"
	"github.com/rocketstore/engine/stages/ingress/batched"
	"github.com/rocketstore/engine/stages/ingress/internal/inbox"
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
	// ffCost, for a fire-and-forget message, is what it counts in its inbox (msgCost); 0 for
	// every other job.
	ffCost int64
}

// FFCost is what j counts against its inbox's fire-and-forget bounds (inbox.Item).
func (j job) FFCost() int64 { return j.ffCost }

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
// and sends them to Out in batches. Only its own goroutine touches its fields (box excepted).
type worker struct {
	in *Ingress
	id int
	// box is the worker's inbox (package inbox): the callbacks put, the worker takes.
	box *inbox.Inbox[job]
	// taken are the jobs the worker took from box and has not processed yet, from next on.
	taken []job
	next  int
	props propBuilder
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

// run is the worker loop: wait for jobs, take all that are queued, encode and send them in
// batches of at most MaxBatch messages. It returns nil after a graceful stop, ctx's error on an
// abort (what it took and did not process is then in taken, from next on).
func (w *worker) run(ctx context.Context) error {
	for {
		if err := w.processTaken(ctx); err != nil {
			return err
		}
		select {
		case <-w.box.Wake():
		case <-w.in.subsDone:
			return w.finish(ctx)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// finish processes what the inbox still holds; no callback runs any more, and nothing else puts
// after them, so a second look finds it empty.
func (w *worker) finish(ctx context.Context) error {
	for range 2 {
		if err := w.processTaken(ctx); err != nil {
			return err
		}
	}
	return nil
}

// processTaken takes what the inbox holds and processes it batch by batch: a batch takes jobs
// while it stays within MaxBatch messages (a pack's run holds at most MaxBatch, see onPack, so
// every job fits in one).
func (w *worker) processTaken(ctx context.Context) error {
	w.taken, w.next = w.box.Take(w.taken), 0
	for w.next < len(w.taken) {
		start, n := w.next, 0
		for w.next < len(w.taken) && (w.next == start || n+w.taken[w.next].messages() <= w.in.cfg.MaxBatch) {
			n += w.taken[w.next].messages()
			w.next++
		}
		if err := w.process(ctx, w.taken[start:w.next]); err != nil {
			return err
		}
	}
	w.taken, w.next = w.taken[:0], 0
	return nil
}

// leftovers are the jobs the worker took and did not process (after an abort).
func (w *worker) leftovers() []job { return w.taken[w.next:] }

// process encodes jobs into one batch and sends it to Out. A message that fails validation is
// answered at once and left out. jobs is cleared afterwards so that it holds no message.
func (w *worker) process(ctx context.Context, jobs []job) error {
	// The batch takes over the arena references its records hold; whatever is still held on
	// the way out (no batch was sent) is released here.
	w.held = w.held[:0]
	defer func() {
		for i := range jobs {
			if j := &jobs[i]; j.count > 0 {
				w.in.packDone(j.pack, int(j.count)) // its records are encoded, or refused
			}
		}
		w.box.Done(jobs)
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
