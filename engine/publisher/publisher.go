package publisher

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"runtime/pprof"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/rocketstore/engine/internal/wire"
)

// MaxWindow bounds Options.Window: the publisher keeps a ring of Window pointers, and the engine
// tracks far fewer sequences ahead of a stream's cumulative ack (65,536 by default).
const MaxWindow = 1 << 24

// Defaults of Options.
const (
	DefaultWindow     = 4096
	DefaultAckTimeout = 5 * time.Second
	DefaultMaxRetries = 10
	DefaultRetryDelay = 100 * time.Millisecond
)

// Options configure a Publisher. The zero value of every field has a default.
type Options struct {
	// StreamID names the stream: 1 to 64 bytes of [A-Za-z0-9_-], by default 22 random ones. A
	// stream's sequences start at 1 with each Publisher and its messages' ids are
	// "<stream>:<seq>" (unless they carry a Nats-Msg-Id): never give two publishers, or two
	// lives of one, the same stream id, or the dedupe would take new messages for resends of
	// old ones.
	StreamID string
	// AckSubject is where the engine sends the stream's acks; by default a new inbox of the
	// connection.
	AckSubject string
	// Window bounds the messages in flight (4096): Publish waits while the message it would send
	// is Window or more sequences past the oldest one not answered. It bounds the publisher's
	// memory (Window messages kept for resending) and the engine's tracking of the stream. At
	// most MaxWindow: New refuses more.
	Window int
	// AckTimeout is how long a message may go unanswered before it is sent again (5 s). The
	// engine reports messages it never got as missing, so a timeout only covers what that
	// cannot: the last messages of a burst, acks that were lost, an engine that restarted.
	AckTimeout time.Duration
	// MaxRetries bounds the resends of one message (10); after that it fails with ErrNotAcked.
	MaxRetries int
	// RetryDelay is the wait before resending a message the engine refused as unavailable (503,
	// 507): 100 ms.
	RetryDelay time.Duration
	// OnResult, when set, is called with every future as it is answered, and its outcome, in no
	// particular order, on the publisher's goroutines: it must not block (benchmarks time acks
	// with it). The outcome is Result's but for Ack.MsgID, set only for a message with a
	// Nats-Msg-Id: the default id, "<stream>:<seq>", would cost a string per message, so
	// f.MsgID() makes it when it is wanted.
	OnResult func(f *Future, a Ack, err error)
	// MaxPack bounds the messages of one pack (256): consecutive messages of one subject go out
	// as one NATS message, which the engine splits again (see pack.go and docs/BATCHED-ACKS.md,
	// "Packs"). 1 turns packing off: one NATS message per message. More than MaxPackEntries is
	// taken as MaxPackEntries, the engine's bound.
	MaxPack int
	// MaxPackBytes bounds a pack's body (64 KiB, and never more than half the server's max
	// payload). A message bigger than that is sent alone.
	MaxPackBytes int
	// Linger is how long a pack that is not full waits for more messages before it is sent
	// (500 µs). A pack that fills up goes at once, so under load packs are full and Linger does
	// not count; at a low rate it adds up to Linger to each message's ack latency.
	Linger time.Duration
	// PublishMsg sends a message; nc.PublishMsg by default. Tests replace it to lose, reorder or
	// duplicate messages on their way to the engine. The message (and its header map) is reused
	// once it returns: a hook that keeps it must copy it.
	PublishMsg func(*nats.Msg) error

	// clock, when set, is the publisher's clock (time since its start): tests move it by hand
	// (export_test.go).
	clock func() time.Duration
	// firstSeq, when set, is the stream's first sequence instead of 1 (its floor the one below):
	// tests start a stream at the end of the sequence space (export_test.go).
	firstSeq uint64
}

// Stats are a publisher's counters.
type Stats struct {
	// Published counts Publish calls that sent a message; Acked the messages answered as
	// stored (Duplicates of them answered as already stored); Failed the messages that failed.
	Published, Acked, Duplicates, Failed int64
	// Resent counts every resend; by cause: reported missing by the engine, not answered within
	// AckTimeout, covered by a cumulative ack whose positions were lost, refused as unavailable.
	Resent, ResentMissing, ResentTimeout, ResentLost, ResentRefused int64
	// AckMessages counts the acks received; SendErrors the sends nats.go refused (retried);
	// Evictions the times the engine dropped the stream's state for room.
	AckMessages, SendErrors, Evictions int64
	// Packs counts the packs sent, Packed the messages they carried (first sends in packs).
	Packs, Packed int64
	// InFlight is the number of messages not answered yet.
	InFlight int
}

// Publisher publishes one stream of messages with batched acks (see the package doc). Safe for
// concurrent use; the messages of concurrent Publish calls are numbered in the order the calls
// get the publisher's lock.
type Publisher struct {
	nc         *nats.Conn
	opts       Options
	stream     string
	ackSubject string
	window     uint64
	publish    func(*nats.Msg) error
	sub        *nats.Subscription
	stop       chan struct{} // closed by Close: the timer loop exits
	loopDone   chan struct{}
	retry      chan struct{} // capacity 1: a retry was scheduled (the timer loop speeds up)
	packKick   chan struct{} // capacity 1: a pack was started (its linger starts)
	packDone   chan struct{}

	// start is the zero of the publisher's clock (clock.go); clock replaces time.Since(start)
	// in tests.
	start time.Time
	clock func() time.Duration

	mu    sync.Mutex
	next  uint64    // the next sequence to give out
	floor uint64    // every sequence up to it is answered
	ring  []*Future // the futures in (floor, next), at seq & mask
	// mask is len(ring)-1: the ring is the window rounded up to a power of two, so that finding
	// a future is a mask, not a division (once per message, and again per ack).
	mask     uint64
	moved    chan struct{}
	closed   bool
	fatal    error // the engine does not do batched acks: every Publish fails
	failures []Failure
	futures  []Future // the rest of the current slab (futureSlab)
	failed   int      // failures since the last report (failures holds the first maxFailures)
	stats    Stats
	hdrBuf   []byte
	msg      nats.Msg    // the message being sent (sendLocked)
	header   nats.Header // its headers
	seqValue [1]string   // its Rs-Seq value
	// Packs (pack.go): the open pack of each subject, in open order (oldest first), and
	// spares to reuse.
	packs     map[string]*pack
	open      []*pack
	spare     []*pack
	spareOpen []*pack
	unsent    int // messages in the open packs (not numbered yet)
	// lingerFrom is when the oldest open pack took its first message: the packs go Linger
	// after it.
	lingerFrom instant
	packCount  [1]string // the Rs-Pack value of the pack being sent
	packBody   []byte    // the body of the pack being sent, reused
	ack        wire.BatchAck
	answered   []*Future // resolved by the current call, for OnResult outside the lock
}

// New starts a publisher on nc: it subscribes to its ack subject (and confirms the subscription
// with the server) and starts its timer goroutine. Close stops it.
func New(nc *nats.Conn, opts Options) (*Publisher, error) {
	if opts.StreamID == "" {
		var b [16]byte
		_, _ = rand.Read(b[:])
		opts.StreamID = base64.RawURLEncoding.EncodeToString(b[:])
	}
	if !wire.ValidStreamID(opts.StreamID) {
		return nil, fmt.Errorf("publisher: stream id %q: want 1 to %d bytes of [A-Za-z0-9_-]", opts.StreamID, MaxStreamID)
	}
	if opts.AckSubject == "" {
		opts.AckSubject = nc.NewInbox()
	}
	if opts.Window <= 0 {
		opts.Window = DefaultWindow
	}
	if opts.Window > MaxWindow {
		return nil, fmt.Errorf("publisher: window %d: at most %d", opts.Window, MaxWindow)
	}
	if opts.AckTimeout <= 0 {
		opts.AckTimeout = DefaultAckTimeout
	}
	if opts.MaxRetries <= 0 {
		opts.MaxRetries = DefaultMaxRetries
	}
	if opts.RetryDelay <= 0 {
		opts.RetryDelay = DefaultRetryDelay
	}
	if opts.MaxPack == 0 {
		opts.MaxPack = DefaultMaxPack
	}
	opts.MaxPack = min(opts.MaxPack, MaxPackEntries) // a longer pack is refused whole
	if opts.MaxPackBytes <= 0 {
		opts.MaxPackBytes = DefaultMaxPackBytes
	}
	if mp := nc.MaxPayload(); mp > 0 && int64(opts.MaxPackBytes) > mp/2 {
		opts.MaxPackBytes = int(mp / 2)
	}
	if opts.Linger <= 0 {
		opts.Linger = DefaultLinger
	}
	ring := ringSize(opts.Window)
	p := &Publisher{
		nc: nc, opts: opts, stream: opts.StreamID, ackSubject: opts.AckSubject, start: time.Now(), clock: opts.clock,
		window: uint64(opts.Window), publish: opts.PublishMsg,
		stop: make(chan struct{}), loopDone: make(chan struct{}), retry: make(chan struct{}, 1),
		packKick: make(chan struct{}, 1), packDone: make(chan struct{}), packs: map[string]*pack{},
		next: max(opts.firstSeq, 1), ring: make([]*Future, ring), mask: uint64(ring - 1), moved: make(chan struct{}), header: nats.Header{},
	}
	p.floor = p.next - 1
	if p.publish == nil {
		p.publish = nc.PublishMsg
	}
	sub, err := nc.Subscribe(p.ackSubject, p.onAck)
	if err != nil {
		return nil, fmt.Errorf("publisher: subscribe to %s: %w", p.ackSubject, err)
	}
	// Acks are bounded by the window (each answers messages in flight): never drop one.
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		_ = sub.Unsubscribe()
		return nil, err
	}
	if err := nc.Flush(); err != nil {
		_ = sub.Unsubscribe()
		return nil, fmt.Errorf("publisher: confirm the ack subscription: %w", err)
	}
	p.sub = sub
	go pprof.Do(context.Background(), pprof.Labels("stage", "publisher-timer"), func(context.Context) { p.timerLoop() })
	if opts.MaxPack > 1 {
		go pprof.Do(context.Background(), pprof.Labels("stage", "publisher-pack"), func(context.Context) { p.packLoop() })
	} else {
		close(p.packDone)
	}
	return p, nil
}

// StreamID is the stream's id.
func (p *Publisher) StreamID() string { return p.stream }

// AckSubject is where the stream's acks come.
func (p *Publisher) AckSubject() string { return p.ackSubject }

// Publish sends data on subject with the headers hdr (which may be nil; a Nats-Msg-Id among
// them becomes the message's id) and returns its future. It waits while the window is full. data
// and hdr must not change until the future is answered: a resend sends them again.
func (p *Publisher) Publish(ctx context.Context, subject string, data []byte, hdr nats.Header) (*Future, error) {
	return p.PublishMsg(ctx, &nats.Msg{Subject: subject, Data: data, Header: hdr})
}

// PublishMsg is Publish with a message (its Reply is ignored: the ack subject replaces it).
func (p *Publisher) PublishMsg(ctx context.Context, m *nats.Msg) (*Future, error) {
	if p.nc.IsClosed() {
		return nil, nats.ErrConnectionClosed
	}
	if err := wire.CheckHeader(m.Header); err != nil {
		return nil, fmt.Errorf("publisher: %w", err)
	}
	p.mu.Lock()
	for p.next-1-p.floor+uint64(p.unsent) >= p.window {
		if err := p.refuseLocked(); err != nil {
			p.mu.Unlock()
			return nil, err
		}
		// The window is full: what waits in the packs goes now, its acks are what frees room.
		p.flushPacksLocked(p.now())
		moved := p.moved
		p.mu.Unlock()
		select {
		case <-moved:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		p.mu.Lock()
	}
	if err := p.refuseLocked(); err != nil {
		p.mu.Unlock()
		return nil, err
	}
	now := p.now()
	if len(p.futures) == 0 {
		// Futures come in slabs: one allocation per futureSlab messages instead of one each.
		// A slab stays in memory while any of its futures is referenced, a few KiB.
		p.futures = make([]Future, futureSlab)
	}
	f := &p.futures[0]
	p.futures = p.futures[1:]
	*f = Future{p: p, subject: m.Subject, data: m.Data, header: m.Header, published: now}
	if ids := m.Header[nats.MsgIdHdr]; len(ids) > 0 {
		f.msgID = ids[0] // else "<stream>:<seq>", made when asked for (MsgID)
	}
	p.stats.Published++
	p.queueLocked(f, now)
	p.mu.Unlock()
	return f, nil
}

// refuseLocked is why Publish cannot send now, if it cannot. p.mu must be held.
func (p *Publisher) refuseLocked() error {
	switch {
	case p.fatal != nil:
		return p.fatal
	case p.closed:
		return ErrClosed
	case p.next+uint64(p.unsent) > MaxSeq:
		return ErrStreamExhausted // the messages waiting in packs are numbered first
	}
	return nil
}

// sendLocked (re)sends f with the current floor. A send that nats.go refuses counts as a loss:
// the timeout sends it again. p.mu must be held (it keeps the sequences in publish order).
//
// The message and its header map are the publisher's, reused from send to send (nats.go encodes
// them before PublishMsg returns): no map per message, which costs more than the message's
// other allocations together.
func (p *Publisher) sendLocked(f *Future, resend bool, now instant) {
	p.flushPacksLocked(now) // what was published before goes first
	h := p.header
	clear(h)
	for k, v := range f.header {
		h[k] = v
	}
	p.hdrBuf = wire.AppendSeqHeader(p.hdrBuf[:0], p.stream, f.seq, p.floor, resend)
	p.seqValue[0] = string(p.hdrBuf)
	h[HeaderSeq] = p.seqValue[:]
	p.msg = nats.Msg{Subject: f.subject, Reply: p.ackSubject, Header: h, Data: f.data}
	f.sends++
	f.sentAt, f.retryAt = now, 0
	if err := p.publish(&p.msg); err != nil {
		f.lastErr = err
		p.stats.SendErrors++
	}
}

// resendLocked sends f again, or fails it once it has been sent MaxRetries+1 times.
func (p *Publisher) resendLocked(f *Future, cause *int64, now instant) {
	if f.sends > p.opts.MaxRetries {
		err := fmt.Errorf("%w after %d sends", ErrNotAcked, f.sends)
		if f.lastErr != nil {
			err = fmt.Errorf("%w (last: %w)", err, f.lastErr)
		}
		p.failLocked(f, err)
		return
	}
	p.stats.Resent++
	*cause++
	p.sendLocked(f, true, now)
}

// pendingLocked is the unanswered future of seq, or nil.
func (p *Publisher) pendingLocked(seq uint64) *Future {
	if seq <= p.floor || seq >= p.next {
		return nil
	}
	f := p.ring[seq&p.mask]
	if f == nil || f.seq != seq || f.resolved {
		return nil
	}
	return f
}

func (p *Publisher) ackLocked(f *Future, a Ack, now instant) {
	p.stats.Acked++
	if a.Duplicate {
		p.stats.Duplicates++
	}
	f.resolve(a, nil, now)
	p.answered = append(p.answered, f)
}

func (p *Publisher) failLocked(f *Future, err error) {
	p.stats.Failed++
	if len(p.failures) < maxFailures {
		p.failures = append(p.failures, Failure{Seq: f.seq, MsgID: f.msgIDLocked(), Err: err})
	}
	p.failed++
	f.resolve(Ack{}, err, p.now())
	p.answered = append(p.answered, f)
}

// advanceLocked moves the floor over the answered futures and wakes whoever waits for it.
func (p *Publisher) advanceLocked() {
	old := p.floor
	for p.floor+1 < p.next {
		i := (p.floor + 1) & p.mask
		if f := p.ring[i]; f != nil && !f.resolved {
			break
		}
		p.ring[i] = nil
		p.floor++
	}
	if p.floor != old {
		close(p.moved)
		p.moved = make(chan struct{})
	}
}

// callbacks runs OnResult for what the last locked section answered. p.mu must not be held.
func (p *Publisher) callbacks(answered []*Future) {
	if p.opts.OnResult == nil {
		return
	}
	for _, f := range answered {
		// Resolved, f's outcome no longer changes, and it was set before the lock this goroutine
		// just released: no need to take it again, once per message, as Result would.
		a, err := f.ack, f.err
		if err == nil {
			a.MsgID = f.msgID // the Nats-Msg-Id, or "": see Options.OnResult
		}
		p.opts.OnResult(f, a, err)
	}
}

// takeAnswered returns the futures answered under the lock and resets the list. p.mu must be
// held.
func (p *Publisher) takeAnswered() []*Future {
	if p.opts.OnResult == nil || len(p.answered) == 0 {
		clear(p.answered)
		p.answered = p.answered[:0]
		return nil
	}
	a := p.answered
	p.answered = nil
	return a
}

// Flush waits until every message published before the call is answered. It returns nil when
// all of them were acknowledged, else a *FailedError with every failure since the last report
// (messages refused, not acked after MaxRetries, or failed by a protocol error). ctx bounds the
// wait (its error is returned, and nothing is failed).
func (p *Publisher) Flush(ctx context.Context) error {
	p.mu.Lock()
	p.flushPacksLocked(p.now())
	target := p.next - 1
	for p.floor < target {
		moved := p.moved
		p.mu.Unlock()
		select {
		case <-moved:
		case <-ctx.Done():
			return ctx.Err()
		}
		p.mu.Lock()
	}
	err := p.reportLocked()
	p.mu.Unlock()
	return err
}

// reportLocked returns the failures since the last report and forgets them.
func (p *Publisher) reportLocked() error {
	if p.failed == 0 {
		return nil
	}
	e := &FailedError{Failures: p.failures, Count: p.failed}
	p.failures, p.failed = nil, 0
	return e
}

// Close stops taking messages, waits (bounded by ctx) until every message is answered, then
// unsubscribes and stops. Messages still unanswered when ctx ends fail with ErrClosed: they may
// or may not be stored. It returns the failures since the last report, as Flush does (and ctx's
// error with them if it ended the wait).
func (p *Publisher) Close(ctx context.Context) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return ErrClosed
	}
	p.closed = true
	close(p.moved) // Publish waiters return ErrClosed
	p.moved = make(chan struct{})
	p.mu.Unlock()

	waitErr := p.Flush(ctx)
	var ferr *FailedError
	if waitErr != nil && !errors.As(waitErr, &ferr) {
		waitErr = fmt.Errorf("publisher: close: %w", waitErr)
	} else {
		waitErr = nil
	}
	close(p.stop)
	<-p.loopDone
	<-p.packDone
	unsubErr := p.sub.Unsubscribe()
	if errors.Is(unsubErr, nats.ErrConnectionClosed) {
		unsubErr = nil
	}
	p.mu.Lock()
	p.failUnsentLocked(ErrClosed)
	for seq := p.floor + 1; seq < p.next; seq++ {
		if f := p.pendingLocked(seq); f != nil {
			p.failLocked(f, ErrClosed)
		}
	}
	p.advanceLocked()
	report := p.reportLocked()
	answered := p.takeAnswered()
	p.mu.Unlock()
	p.callbacks(answered)
	return errors.Join(report, waitErr, unsubErr)
}

// Stats returns the counters.
func (p *Publisher) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.stats
	s.InFlight = p.unsent
	for seq := p.floor + 1; seq < p.next; seq++ {
		if p.pendingLocked(seq) != nil {
			s.InFlight++
		}
	}
	return s
}
