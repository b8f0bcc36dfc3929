package ingress

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/stages"
)

// Replicated mode (docs/SCALE-OUT.md, "Replicated mode"). Each partition is a replicated (R3)
// JetStream file stream in front of the engines, RMQ_P<p>, capturing "<prefix>.<p>.>": the
// publishers' acks are JetStream's. The engines that own the partition consume it through one
// durable pull consumer with the pinned-client priority policy, so that one of them at a time
// (the pinned one) takes it, and the others take over when it goes; each acks (AckAll) only what
// is durable in its own store, contiguously from the bottom.
//
// The sequence rule. Every record keeps its stream sequence (NATS_STREAM_SEQ, and its UNIQ_KEY
// is "<stream>:<seq>" without a Nats-Msg-Id). An engine takes a partition's messages only in
// sequence order: a message below the next expected sequence is a copy and is dropped; one above
// it (the pin moved, and the messages in between went to another engine, or were delivered
// before a restart) makes the engine read the missing ones from the stream itself first (an
// ordered consumer), never acking past them. Appends are deterministic: the store time is the
// stream's timestamp, the queue is the partition and the queue offsets count the partition's
// messages of each topic in stream order, so every engine that consumes the partition builds the
// same ConsumeQueue (physical offsets aside) and can serve or take over the partition.

// PropStreamSeq is the property that holds a replicated record's stream sequence.
const PropStreamSeq = "NATS_STREAM_SEQ"

// Defaults of ReplicatedSource.
const (
	DefaultStreamPrefix       = "RMQ_P"
	DefaultReplicatedConsumer = "rocketstore"
	DefaultPriorityGroup      = "owner"
	DefaultReplicas           = 3
	DefaultStreamMaxAge       = 7 * 24 * time.Hour
	DefaultPinnedTTL          = 10 * time.Second
	DefaultReplicatedAckWait  = 30 * time.Second
	DefaultReplicatedPending  = 16384
)

// ReplicatedSource turns on replicated mode (Config.Replicated; needs Config.Partitions).
type ReplicatedSource struct {
	// StreamPrefix names the partitions' streams: <StreamPrefix><p> (DefaultStreamPrefix).
	StreamPrefix string
	// Consumer is the durable consumer every engine of a partition shares (its pinned client
	// takes the partition); Group its priority group.
	Consumer, Group string
	// Replicas, MaxAge: of the streams the engine creates when they do not exist (NoCreate: it
	// refuses to start instead). The servers should run with sync_interval: always, so that a
	// JetStream ack means the message is on disk on a majority.
	Replicas int
	MaxAge   time.Duration
	NoCreate bool
	// PinnedTTL: how long the pin survives its engine's silence before another engine takes the
	// partition; AckWait and MaxAckPending: of the consumer.
	PinnedTTL     time.Duration
	AckWait       time.Duration
	MaxAckPending int
	// Batch bounds one pull (256).
	Batch int
	// LastSeq is the last stream sequence of partition part this engine stored (0: none), from
	// its store (the engine's; required). Found is the engine's lookup of a stored record by
	// topic and UNIQ_KEY (required): after a restart, the messages between the consumer's ack
	// floor and LastSeq may be stored already.
	LastSeq func(part int) (uint64, error)
	Found   func(topic, uniqKey string) bool
	// RetryDelay: a partition whose messages the store did not take (disk full, say) starts
	// again from its last durable one after this (1 s).
	RetryDelay time.Duration
}

func (s *ReplicatedSource) withDefaults() (*ReplicatedSource, error) {
	c := *s
	if c.LastSeq == nil || c.Found == nil {
		return nil, errors.New("ingress: replicated mode needs LastSeq and Found")
	}
	if c.StreamPrefix == "" {
		c.StreamPrefix = DefaultStreamPrefix
	}
	if c.Consumer == "" {
		c.Consumer = DefaultReplicatedConsumer
	}
	if c.Group == "" {
		c.Group = DefaultPriorityGroup
	}
	if c.Replicas <= 0 {
		c.Replicas = DefaultReplicas
	}
	if c.MaxAge <= 0 {
		c.MaxAge = DefaultStreamMaxAge
	}
	if c.PinnedTTL <= 0 {
		c.PinnedTTL = DefaultPinnedTTL
	}
	if c.AckWait <= 0 {
		c.AckWait = DefaultReplicatedAckWait
	}
	if c.MaxAckPending <= 0 {
		c.MaxAckPending = DefaultReplicatedPending
	}
	if c.Batch <= 0 {
		c.Batch = 256
	}
	if c.RetryDelay <= 0 {
		c.RetryDelay = time.Second
	}
	return &c, nil
}

// StreamName is partition part's stream.
func (s *ReplicatedSource) StreamName(part int) string { return s.StreamPrefix + strconv.Itoa(part) }

// replicated is the running replicated source.
type replicated struct {
	in    *Ingress
	src   *ReplicatedSource
	js    jetstream.JetStream
	parts map[int]*replPartition
	stop  context.CancelFunc
	wg    sync.WaitGroup
}

// replMeta rides in Record.Ctx of a replicated record, from the partition loop to ackBatch.
type replMeta struct {
	part *replPartition
	seq  uint64
	ts   int64 // the stream's timestamp, ms
	// ack is the message to AckAll with once everything up to seq is durable; nil for a message
	// read by a catch-up (an ordered consumer: not the durable one).
	ack jetstream.Msg
}

// startReplicated ensures every owned partition's stream and consumer and starts their loops.
func (in *Ingress) startReplicated(ctx context.Context) error {
	src, parts := in.cfg.Replicated, in.cfg.Partitions
	js, err := jetstream.New(in.cfg.Conn)
	if err != nil {
		return fmt.Errorf("ingress: replicated: %w", err)
	}
	rctx, stop := context.WithCancel(context.Background())
	r := &replicated{in: in, src: src, js: js, parts: map[int]*replPartition{}, stop: stop}
	in.repl = r
	for _, p := range parts.OwnedNow() {
		rp, err := r.open(ctx, p)
		if err != nil {
			stop()
			return err
		}
		r.parts[p] = rp
	}
	for _, rp := range r.parts {
		r.wg.Go(func() { rp.run(rctx) })
	}
	return nil
}

// open ensures partition p's stream and consumer.
func (r *replicated) open(ctx context.Context, p int) (*replPartition, error) {
	src, prefix := r.src, r.in.cfg.Partitions.Prefix
	name := src.StreamName(p)
	stream, err := r.js.Stream(ctx, name)
	if errors.Is(err, jetstream.ErrStreamNotFound) && !src.NoCreate {
		stream, err = RetryPlacement(ctx, func() (jetstream.Stream, error) {
			return r.js.CreateStream(ctx, jetstream.StreamConfig{
				Name: name, Subjects: []string{PartitionSubject(prefix, p) + ".>"},
				Storage: jetstream.FileStorage, Replicas: src.Replicas, Retention: jetstream.LimitsPolicy,
				MaxAge: src.MaxAge, Duplicates: 2 * time.Minute,
			})
		})
	}
	if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		stream, err = r.js.Stream(ctx, name) // another engine made it just now
	}
	if err != nil {
		return nil, fmt.Errorf("ingress: replicated: stream %s: %w", name, err)
	}
	cons, err := RetryPlacement(ctx, func() (jetstream.Consumer, error) {
		return stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
			Durable: src.Consumer, AckPolicy: jetstream.AckAllPolicy, AckWait: src.AckWait,
			MaxAckPending: src.MaxAckPending, DeliverPolicy: jetstream.DeliverAllPolicy,
			PriorityPolicy: jetstream.PriorityPolicyPinned, PriorityGroups: []string{src.Group}, PinnedTTL: src.PinnedTTL,
		})
	})
	if err != nil {
		return nil, fmt.Errorf("ingress: replicated: consumer %s on %s: %w", src.Consumer, name, err)
	}
	return &replPartition{r: r, part: p, stream: stream, cons: cons, done: map[uint64]jetstream.Msg{},
		wake: make(chan struct{}, 1), failed: make(chan uint64, 1)}, nil
}

// stopReplicated stops every partition loop and waits for them.
func (in *Ingress) stopReplicated() {
	in.repl.stop()
	in.repl.wg.Wait()
}

// onReplicated hands a replicated message to its worker. A message that cannot be stored at all
// (its subject is not one of the partition's: a stream capturing more than its partition) is
// refused, counted, and done: it is in the stream, it will never be stored here.
func (in *Ingress) onReplicated(ctx context.Context, m *nats.Msg, meta *replMeta) error {
	in.counters.received.Add(1)
	rt := in.router.route(m.Subject)
	err := rt.err
	if err == nil && int(rt.partition) != meta.part.part {
		err = fmt.Errorf("%w: %q in the stream of partition %d", ErrInvalidSubject, m.Subject, meta.part.part)
	}
	if err != nil {
		in.noteReject(m.Subject, err)
		meta.part.doneOne(meta.seq, meta.ack)
		return nil
	}
	w := in.workers[rt.worker(rt.partition, len(in.workers))]
	select {
	case w.jobs <- job{msg: m, route: rt, queue: rt.partition, repl: meta}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-in.abort:
		return ErrStopped
	}
}

// replicatedRecord encodes a replicated message deterministically: born and store time are the
// stream's timestamp, UNIQ_KEY its Nats-Msg-Id or "<stream>:<seq>", NATS_STREAM_SEQ its
// sequence, and no dedupe window (the sequence rule dedupes). A message refused as invalid comes
// back with its error (done all the same: it never will be stored).
func (w *worker) replicatedRecord(j *job) stages.Record {
	meta := j.repl
	sh := seqHeader{stream: w.in.repl.src.StreamName(meta.part.part), seq: meta.seq}
	w.props.extra = w.props.extra[:0]
	w.props.extra = commitlog.AppendProperty(w.props.extra, PropStreamSeq, strconv.FormatUint(meta.seq, 10))
	rec, err := w.encodeSeq(j, meta.ts, &sh)
	w.props.extra = w.props.extra[:0]
	if err != nil {
		w.in.noteReject(j.msg.Subject, err)
		return stages.Record{Topic: j.route.topic, QueueID: j.queue, Err: err, Ctx: meta}
	}
	rec.MsgID, rec.Reply, rec.Ctx, rec.StoreTimestamp = "", "", meta, meta.ts
	return rec
}

// replDoneOf files a replicated record's outcome for doneMany: stored, or refused for good (400,
// 413), is done; anything else (the store could not take it now) fails its partition's session,
// which starts again from the floor.
func replDoneOf(acc *map[*replPartition][]replDone, r *stages.Record, meta *replMeta) {
	if r.Err != nil {
		if code := ReplyCode(r.Err); code != CodeInvalid && code != CodeTooLarge {
			meta.part.fail(meta.seq)
			return
		}
	}
	if *acc == nil {
		*acc = map[*replPartition][]replDone{}
	}
	(*acc)[meta.part] = append((*acc)[meta.part], replDone{seq: meta.seq, ack: meta.ack})
}

// ReplicatedFloors are, in replicated mode, each consumed partition's floor: the stream sequence
// up to which everything is durable here (and acked to the consumer); nil otherwise.
func (in *Ingress) ReplicatedFloors() map[int]uint64 {
	if in.repl == nil {
		return nil
	}
	out := make(map[int]uint64, len(in.repl.parts))
	for p, rp := range in.repl.parts {
		out[p] = rp.Floor()
	}
	return out
}
