package ingress

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/internal/wire"
	"github.com/rocketstore/engine/stages"
	"github.com/rocketstore/engine/stages/ingress/batched"
	"github.com/rocketstore/engine/stages/ingress/route"
)

// recordSlack bounds how much longer a record is than its body, topic and properties: 91 fixed
// bytes (V1, IPv4 hosts) + 24 for two IPv6 hosts + 1 for a V2 topic length + 21 for the
// __CRC32# reservation and its separator.
const recordSlack = 91 + 24 + 1 + 21

// job is one message on its way from the callback to its worker.
type job struct {
	msg   *nats.Msg
	route *route.Route
	queue int32
	// count, for a pack entry, is how many entries from msg on (consecutive in the pack's
	// entries, and in sequence) the job carries: a run that goes to one queue (onPack). 0 is
	// one message.
	count int32
	// marker, with msg nil, is a marker request of the batched-ack tracker (tracker.go).
	marker uint64
	// pack is set for an entry of a pack (pack.go): msg is the entry, and seq its sequence (the
	// first's, for a run).
	pack *batched.Pack
	seq  uint64
	// fence, with msg nil, is a fence (handoff.go): closed once the batch it rides in is acked.
	fence fence
	// repl is set for a message of a replicated partition (replicated.go).
	repl *replMeta
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
	tmpl  packTemplate      // the pack entries' (packtemplate.go)
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
	// NATS does not carry a publish time: the born timestamp is when ingress encoded the batch.
	born := w.in.cfg.Clock().UnixMilli()
	n := 0
	for i := range jobs {
		n += jobs[i].messages()
	}
	mem := w.in.batchMem(n)
	recs, metas := mem.recs, mem.metas // metas: a capacity of n, so that pointers into it hold
	var (
		marker uint64
		extra  int // records that are not messages to store (markers, batched refusals)
	)
	for i := range jobs {
		j := &jobs[i]
		if j.count > 0 {
			// A run of pack entries: each is a batched message of its own.
			run := j.pack.Run(j.seq, int(j.count))
			w.in.tracker.CountReceived(len(run))
			for k := range run {
				ej := job{msg: &run[k], route: j.route, queue: j.queue, pack: j.pack, seq: j.seq + uint64(k)}
				recs = w.addBatched(recs, &extra, &ej, born, j.pack.EntrySeq(ej.seq), &metas, n)
			}
			continue
		}
		if j.msg == nil {
			if j.fence != nil {
				recs = append(recs, stages.Record{Err: errFence, Ctx: j.fence})
				extra++
			}
			marker = max(marker, j.marker)
			continue
		}
		if j.repl != nil {
			rec := w.replicatedRecord(j)
			if rec.Err != nil {
				extra++
			}
			recs = append(recs, rec)
			continue
		}
		if sh, isBatched, ok := w.seqHeader(j); isBatched {
			if !ok {
				continue
			}
			w.in.tracker.CountReceived(1)
			recs = w.addBatched(recs, &extra, j, born, sh, &metas, n)
			continue
		}
		if w.answeredFromStore(j) {
			continue
		}
		rec, err := w.encode(j, born)
		if err != nil {
			w.in.reject(j.msg, err)
			continue
		}
		recs = append(recs, rec)
	}
	if marker != 0 {
		recs = append(recs, stages.Record{Err: batched.ErrMarker, Ctx: &batched.Marker{Worker: w.id, Epoch: marker}})
		extra++
	}
	mem.recs, mem.metas = recs, metas // grown, maybe
	if len(recs) == 0 {
		w.in.recycleMem(mem)
		return nil
	}
	// A JetStream message is acked to its stream only once durable here, whatever the flush mode.
	mem.arenas = append(mem.arenas[:0], w.held...)
	b := &mem.batch
	*b = stages.Batch{Records: recs, Done: w.in.done, Durable: w.in.js != nil || w.in.repl != nil,
		Arenas: mem.arenas, Owner: mem}
	select {
	case w.in.cfg.Out <- b:
		w.in.counters.encoded.Add(int64(len(recs) - extra))
		w.held = w.held[:0] // the batch's now
		return nil
	case <-ctx.Done():
		// The pipeline stopped: the batch is answered as the store answers a batch it did not
		// take (ackBatch): a reply to each plain message, a refusal to each stream in its ack.
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

// addBatched builds the record of j, a message of a batched-ack stream with sequence sh, in a
// new slot at the end of recs, and takes the slot back when batched refused the message (it is
// answered already); extra counts a record that carries its refusal. The slot is within recs'
// capacity (n messages, see batchMem), so no later append moves the record being built.
func (w *worker) addBatched(recs []stages.Record, extra *int, j *job, born int64, sh wire.SeqHeader, metas *[]batched.Meta, n int) []stages.Record {
	recs = append(recs, stages.Record{})
	rec := &recs[len(recs)-1]
	switch {
	case !w.batched(rec, j, born, sh, metas, n):
		return recs[:len(recs)-1]
	case rec.Err != nil:
		*extra++
	}
	return recs
}

// encode turns one message into a record: properties from the subject and headers, then
// commitlog.AppendRecord, which checks the topic and the size limits.
func (w *worker) encode(j *job, born int64) (stages.Record, error) {
	return w.encodeSeq(j, born, nil)
}

// encodeSeq is encode for a message of a batched-ack stream when seq is not nil.
func (w *worker) encodeSeq(j *job, born int64, seq *wire.SeqHeader) (stages.Record, error) {
	var r stages.Record
	err := w.encodeInto(&r, j, born, seq)
	return r, err
}

// encodeInto is encodeSeq building the record in r, a zeroed slot (see batched); on error r is
// left as it may be.
func (w *worker) encodeInto(r *stages.Record, j *job, born int64, seq *wire.SeqHeader) error {
	rt := j.route
	if rt.Err != nil {
		return rt.Err
	}
	tmpl := templated(j, seq)
	if tmpl && w.tmpl.holds(j.pack, rt, born) {
		return w.fromTemplate(r, j, seq)
	}
	if undecodedHeaders(j.msg) {
		return errUndecodedHeaders
	}
	props, msgID, err := w.props.buildWith(j.msg, rt, seq)
	if err != nil {
		return err
	}
	cfg := &w.in.cfg
	// The worker's own Message, filled in place: a new one per message was a tenth of the
	// encoding's time (a large struct to zero and copy). Only these fields are ever set; the
	// others stay zero, as a record from NATS has them.
	m := &w.msg
	m.Topic, m.QueueID, m.BornTimestamp = rt.Topic, j.queue, born
	m.BornHost, m.StoreHost = cfg.BornHost, cfg.StoreHost
	m.Body, m.Properties = j.msg.Data, props
	free := w.arenaTail(len(m.Body) + len(m.Topic) + len(props) + recordSlack)
	// Encoding into the free tail of the arena writes in place; a record too big for an arena
	// gets a buffer of its own from AppendRecord, after its checks, so a rejected oversized
	// body costs no allocation.
	rec, err := commitlog.AppendRecord(free, m, *cfg.Encode)
	m.Body, m.Properties = nil, nil // keep no message alive
	if err != nil {
		return err
	}
	w.keep(free, rec)
	if tmpl {
		w.tmpl.reset(j, born, seq, rec, props, &w.props, *cfg.Encode)
	}
	r.Bytes = rec[:len(rec):len(rec)] // capped: an append must never run into the next record
	r.Topic, r.QueueID, r.PropCRC = rt.Topic, j.queue, cfg.Encode.PropCRC
	r.MsgID, r.Reply, r.Index = msgID, j.msg.Reply, w.props.index
	if w.in.js != nil {
		// The reply subject is JetStream's ack subject: the message itself is settled instead.
		r.Reply, r.Ctx = "", j.msg
		if r.MsgID == "" {
			r.MsgID = jsDedupeKey(j.msg)
		}
	}
	return nil
}

// arenaTail is the free tail of the worker's arena, with room for need bytes (a new arena when
// the current one has less), or nil when need is more than an arena holds.
func (w *worker) arenaTail(need int) []byte {
	if need > stages.ArenaSize {
		return nil
	}
	if w.arena == nil || cap(w.arena.Buf)-len(w.arena.Buf) < need {
		if w.arena != nil {
			w.arena.Release()
		}
		w.arena = stages.NewArena()
	}
	return w.arena.Buf[len(w.arena.Buf):]
}

// keep accounts for rec, encoded into free (from arenaTail): it takes its bytes from the arena,
// and the batch being built holds the arena. A record encoded elsewhere (free nil) owns its
// buffer.
func (w *worker) keep(free, rec []byte) {
	if free == nil {
		return
	}
	w.arena.Buf = w.arena.Buf[:len(w.arena.Buf)+len(rec)]
	if n := len(w.held); n == 0 || w.held[n-1] != w.arena {
		w.arena.Hold()
		w.held = append(w.held, w.arena)
	}
}

// errUndecodedHeaders: see undecodedHeaders.
var errUndecodedHeaders = fmt.Errorf("%w: the message's header block is malformed and could not be "+
	"decoded (a header line without ':', or no blank line at its end); nothing of it could be "+
	"stored, so the message is refused rather than stored without its headers", ErrInvalidHeader)

// undecodedHeaders reports whether m came with a header block nats.go could not decode: it then
// delivers the message with no Header at all (and reports ErrBadHeaderMsg to the connection's
// error handler), which would store the message silently stripped of its headers. A received
// message's Size counts the header block on the wire, so the block's presence shows as bytes
// that neither the subject, the reply subject nor the body account for. (A message made in this
// process has no such bytes.)
func undecodedHeaders(m *nats.Msg) bool {
	return m.Header == nil && m.Size() > len(m.Subject)+len(m.Reply)+len(m.Data)
}
