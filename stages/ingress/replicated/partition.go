package replicated

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Partition consumes one partition's stream (source.go): the loop
// (run, one goroutine, started once the stream and consumer are open) pulls the partition while
// it is assigned here (assign.go), takes its messages in sequence order and hands them to
// the workers; ingress reports what became durable (DoneMany), which moves the partition's
// floor, the sequence up to which everything is durable here, and AckAll-s the consumer there.
type Partition struct {
	r      *Source
	part   int
	stream jetstream.Stream   // set by open, before the loop starts
	cons   jetstream.Consumer // set by open, before the loop starts

	// The loop's own.
	exp           uint64 // the next sequence to take
	lastDelivered uint64 // the last sequence taken (exp-1)
	skipTo        uint64 // sequences up to it may be stored already (a restart): looked up first
	warnedGone    bool
	// pinID is the pin the server gave this engine's pulls (Nats-Pin-Id of the last message
	// delivered), so that stepping down unpins only its own pin.
	pinID string

	// assigned: the live engines' assignment gives the partition to this engine.
	assigned atomic.Bool
	// assignCh is signalled when assigned changes (capacity 1).
	assignCh chan struct{}

	mu sync.Mutex
	// done (guarded by mu): its floor is the sequence up to which everything is durable here
	// (or refused, or not in the stream); above it what is done out of order.
	done    doneSet
	maxSeen uint64                  // guarded by mu: the highest sequence taken this life
	cancel  context.CancelCauseFunc // guarded by mu: ends the current session
	openErr error                   // guarded by mu: why the stream or consumer is not open yet
	opened  bool                    // guarded by mu
	failing error                   // guarded by mu: why the last session ended, until the next one pulls
	// progress is signalled when the floor moves (capacity 1); failed carries a sequence the
	// store did not take (capacity 1).
	progress chan struct{}
	failed   chan uint64
}

// errUnassigned ends a session: the partition is assigned to another engine now.
var errUnassigned = errors.New("ingress: replicated partition assigned to another engine")

func newPartition(r *Source, part int) *Partition {
	return &Partition{r: r, part: part, assignCh: make(chan struct{}, 1),
		progress: make(chan struct{}, 1), failed: make(chan uint64, 1)}
}

// setAssigned gives the partition to this engine or takes it away (ending the session).
func (rp *Partition) setAssigned(mine bool) {
	if rp.assigned.Swap(mine) == mine {
		return
	}
	if !mine {
		rp.mu.Lock()
		if rp.cancel != nil {
			rp.cancel(errUnassigned)
		}
		rp.mu.Unlock()
	}
	select {
	case rp.assignCh <- struct{}{}:
	default:
	}
}

// run pulls the partition while it is assigned here, until ctx ends. A session ends on a
// failure (the store did not take a message, the consumer failed: the next one starts from the
// floor after RetryDelay) or when the partition is assigned elsewhere (stepDown).
func (rp *Partition) run(ctx context.Context) {
	for ctx.Err() == nil {
		if !rp.assigned.Load() {
			select {
			case <-rp.assignCh:
				continue
			case <-ctx.Done():
				return
			}
		}
		err := rp.session(ctx)
		if ctx.Err() != nil || rp.r.conn.IsClosed() {
			return // stopping, or the engine's connection is gone for good
		}
		if errors.Is(err, errUnassigned) {
			rp.stepDown(ctx)
			continue
		}
		rp.mu.Lock()
		rp.failing = err
		rp.mu.Unlock()
		rp.r.log.Warn().Err(err).Int("partition", rp.part).Dur("retry_in", rp.r.src.RetryDelay).
			Msg("ingress: replicated partition stopped; starting again from its last durable message")
		select {
		case <-time.After(rp.r.src.RetryDelay):
		case <-ctx.Done():
			return
		}
	}
}

// stepDown hands the partition over once another engine is to take it: the pin is given up (the
// server pins the next engine's pull at once instead of after PinnedTTL), and what this engine
// took of the partition is waited for, so that a later session here starts above it.
func (rp *Partition) stepDown(ctx context.Context) {
	rp.unpin(ctx)
	for {
		rp.mu.Lock()
		drained := rp.done.floor >= rp.lastDelivered
		rp.mu.Unlock()
		if drained {
			return
		}
		select {
		case <-rp.progress:
		case seq := <-rp.failed:
			select { // for the next session to see
			case rp.failed <- seq:
			default:
			}
			return
		case <-ctx.Done():
			return
		}
	}
}

// unpinTimeout bounds giving up a pin.
const unpinTimeout = 5 * time.Second

// unpin gives up the consumer's pin if this engine holds it.
func (rp *Partition) unpin(ctx context.Context) {
	if rp.pinID == "" || rp.cons == nil {
		return
	}
	pin := rp.pinID
	rp.pinID = ""
	uctx, cancel := context.WithTimeout(ctx, unpinTimeout)
	defer cancel()
	info, err := rp.cons.Info(uctx)
	if err == nil {
		for _, g := range info.PriorityGroups {
			if g.Group == rp.r.src.Group && g.PinnedClientID == pin {
				err = rp.stream.UnpinConsumer(uctx, rp.r.src.Consumer, rp.r.src.Group)
			}
		}
	}
	if err != nil {
		// The pin then lapses after PinnedTTL.
		rp.r.log.Debug().Err(err).Int("partition", rp.part).Msg("ingress: replicated: giving up the pin")
	}
}

// session takes the partition's messages from where this engine's store is durable on.
func (rp *Partition) session(ctx context.Context) error {
	src := rp.r.src
	last, err := src.LastSeq(rp.part)
	if err != nil {
		return fmt.Errorf("the last stored sequence: %w", err)
	}
	ictx, icancel := context.WithTimeout(ctx, openAttemptTimeout)
	info, err := rp.cons.Info(ictx)
	icancel()
	if err != nil {
		return fmt.Errorf("consumer info: %w", err)
	}
	sctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	rp.mu.Lock()
	start := rp.done.floor + 1
	if rp.maxSeen == 0 {
		// First session: the store has up to last; the consumer's floor may be below it (acks
		// not sent before a crash) or above it (another engine acked further): start at the
		// lower, and look up what may be stored already.
		start = min(info.AckFloor.Stream, last) + 1
	}
	rp.skipTo = max(last, rp.maxSeen)
	rp.done.reset(start - 1)
	rp.cancel = cancel
	rp.mu.Unlock()
	defer func() {
		rp.mu.Lock()
		rp.cancel = nil
		rp.mu.Unlock()
	}()
	if !rp.assigned.Load() { // taken away before the cancel was in place
		return errUnassigned
	}
	rp.exp, rp.lastDelivered, rp.warnedGone = start, start-1, false
	select { // a failure of the last session is behind this one
	case <-rp.failed:
	default:
	}

	it, err := rp.cons.Messages(jetstream.PullPriorityGroup(src.Group), jetstream.PullMaxMessages(src.Batch),
		jetstream.PullExpiry(pullExpiry))
	if err != nil {
		return fmt.Errorf("pull: %w", err)
	}
	defer it.Stop()
	rp.mu.Lock()
	rp.failing = nil
	rp.mu.Unlock()
	err = rp.pull(sctx, it)
	if sctx.Err() != nil {
		return context.Cause(sctx)
	}
	return err
}

// pull takes the pulled messages in sequence order until ctx ends or the pull fails.
func (rp *Partition) pull(ctx context.Context, it jetstream.MessagesContext) error {
	for {
		m, err := it.Next(jetstream.NextContext(ctx))
		if errors.Is(err, jetstream.ErrNoHeartbeat) && ctx.Err() == nil {
			// The server's heartbeats did not come (its consumer leader moved, say): the
			// iterator has pulled again by itself.
			continue
		}
		if err != nil {
			return fmt.Errorf("pull: %w", err)
		}
		md, err := m.Metadata()
		if err != nil {
			continue // not a JetStream message: nothing to take or ack
		}
		hdr := m.Headers()
		if pin := hdr.Get(pinIDHeader); pin != "" {
			// The server's, not the publisher's: the copies of the partition must not differ
			// by which engine held the pin.
			rp.pinID = pin
			delete(hdr, pinIDHeader)
		}
		seq := md.Sequence.Stream
		if seq < rp.exp {
			continue // a copy: its first delivery was taken
		}
		if seq > rp.exp {
			// The pin moved, or a restart: what lies between is read from the stream itself,
			// never acked past.
			if err := rp.catchUp(ctx, rp.exp, seq); err != nil {
				return err
			}
		}
		if err := rp.deliver(ctx, m.Subject(), hdr, m.Data(), seq, md.Timestamp, m); err != nil {
			return err
		}
	}
}

// pullExpiry is how long one pull request waits at the server. Short, so that a request the
// server lost (the consumer's leader moved while it waited) is noticed soon, by its missing
// heartbeats (half of it), and asked again.
const pullExpiry = 5 * time.Second

// pinIDHeader is the header in which the server tells a pinned pull its pin (ADR-42).
const pinIDHeader = "Nats-Pin-Id"

// catchUp takes the stream's messages from sequence from up to (not including) to, with an
// ordered consumer.
func (rp *Partition) catchUp(ctx context.Context, from, to uint64) error {
	oc, err := rp.r.js.OrderedConsumer(ctx, rp.r.src.StreamName(rp.part), jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: from})
	if err != nil {
		return fmt.Errorf("catch-up from %d: %w", from, err)
	}
	it, err := oc.Messages()
	if err != nil {
		return fmt.Errorf("catch-up from %d: %w", from, err)
	}
	defer it.Stop()
	for {
		m, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			return fmt.Errorf("catch-up from %d to %d: %w", from, to, err)
		}
		md, err := m.Metadata()
		if err != nil {
			continue
		}
		seq := md.Sequence.Stream
		if seq >= to {
			return nil
		}
		if err := rp.deliver(ctx, m.Subject(), m.Headers(), m.Data(), seq, md.Timestamp, nil); err != nil {
			return err
		}
	}
}

// deliver takes sequence seq: looked up when it may be stored already, else handed to its
// worker. Sequences the stream skipped (deleted) are done at once.
func (rp *Partition) deliver(ctx context.Context, subject string, hdr nats.Header, data []byte, seq uint64,
	ts time.Time, ack jetstream.Msg) error {
	if seq > rp.exp {
		if !rp.warnedGone {
			rp.r.log.Warn().Int("partition", rp.part).Uint64("from", rp.exp).Uint64("to", seq-1).
				Msg("ingress: replicated partition: sequences no longer in the stream (deleted, or past its retention): not stored here")
			rp.warnedGone = true
		}
		rp.skipRange(rp.exp, seq-1)
	}
	rp.exp, rp.lastDelivered = seq+1, seq
	rp.mu.Lock()
	rp.maxSeen = max(rp.maxSeen, seq)
	rp.mu.Unlock()
	m := &nats.Msg{Subject: subject, Header: hdr, Data: data}
	meta := &Meta{Part: rp, Seq: seq, TS: ts.UnixMilli(), Ack: ack}
	if seq <= rp.skipTo {
		if topic, ok := rp.r.sink.Topic(subject); ok && rp.r.src.Found(topic, replUniqKey(m, rp.r.src.StreamName(rp.part), seq)) {
			rp.DoneOne(seq, ack)
			return nil
		}
	}
	return rp.r.sink.Take(ctx, m, meta)
}

// replUniqKey is a replicated message's UNIQ_KEY: its Nats-Msg-Id, else "<stream>:<seq>".
func replUniqKey(m *nats.Msg, stream string, seq uint64) string {
	if id := m.Header.Get(nats.MsgIdHdr); id != "" {
		return id
	}
	return stream + ":" + strconv.FormatUint(seq, 10)
}

// Number is the partition's number; StreamName its stream's name.
func (rp *Partition) Number() int { return rp.part }

// StreamName: see Number.
func (rp *Partition) StreamName() string { return rp.r.src.StreamName(rp.part) }

// DoneOne is DoneMany of one sequence.
func (rp *Partition) DoneOne(seq uint64, ack jetstream.Msg) {
	rp.DoneMany([]Done{{Seq: seq, Ack: ack}})
}

// Done is a sequence done here: durable, refused for good, or not in the stream; Ack is its
// message to AckAll with (nil: none).
type Done struct {
	Seq uint64
	Ack jetstream.Msg
}

// DoneMany records sequences done, moves the floor over the contiguous ones and AckAll-s the
// consumer at the highest durable-consumer message under the floor.
func (rp *Partition) DoneMany(ds []Done) {
	rp.mu.Lock()
	for _, d := range ds {
		rp.done.add(d.Seq, d.Ack)
	}
	ack := rp.done.advance()
	rp.mu.Unlock()
	rp.progressed(ack)
}

// progressed tells stepDown that the floor may have moved, and acks the consumer at ack (nil:
// nothing to ack).
func (rp *Partition) progressed(ack jetstream.Msg) {
	select {
	case rp.progress <- struct{}{}:
	default:
	}
	if ack != nil {
		if err := ack.Ack(); err != nil && !errors.Is(err, jetstream.ErrMsgAlreadyAckd) {
			rp.r.log.Debug().Err(err).Int("partition", rp.part).Msg("ingress: replicated ack")
		}
	}
}

// skipRange marks sequences from..to done: the stream does not hold them. It costs one range
// whatever its length (doneSet).
func (rp *Partition) skipRange(from, to uint64) {
	rp.mu.Lock()
	rp.done.skip(from, to)
	ack := rp.done.advance()
	rp.mu.Unlock()
	rp.progressed(ack)
}

// Fail ends the session: the store did not take seq (it will be taken again from the floor).
func (rp *Partition) Fail(seq uint64) {
	select {
	case rp.failed <- seq:
	default:
	}
	rp.mu.Lock()
	if rp.cancel != nil {
		rp.cancel(fmt.Errorf("the store did not take sequence %d", seq))
	}
	rp.mu.Unlock()
}

// Floor is everything durable here of the partition, for tests and status.
func (rp *Partition) Floor() uint64 {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	return rp.done.floor
}
