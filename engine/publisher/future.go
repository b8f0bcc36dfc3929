package publisher

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/rocketstore/engine/internal/wire"
)

// Ack is where a message is stored.
type Ack struct {
	// Seq is the message's sequence number in its stream.
	Seq uint64
	// MsgID is the message's id, its UNIQ_KEY property (RocketMQ's SendResult.msgId): its
	// Nats-Msg-Id, or "<stream>:<seq>" when it had none.
	MsgID string
	// Topic, QueueID and QueueOffset name the message in the store: its ConsumeQueue unit (the
	// engine's read API reads it back by them, and gives its offset message id).
	Topic       string
	QueueID     int32
	QueueOffset int64
	// Duplicate says the engine already held the message (a resend, or the same Nats-Msg-Id
	// within the dedupe window): this is the first copy's position, nothing was stored again.
	Duplicate bool
}

var (
	// ErrClosed: the publisher is closed, or was closed before the message was answered (it may
	// or may not be stored).
	ErrClosed = errors.New("publisher: closed")
	// ErrNotAcked: the message was sent MaxRetries+1 times without an answer. It may or may not
	// be stored: an ack may have been lost with the engine that sent it.
	ErrNotAcked = errors.New("publisher: no ack")
	// ErrStreamExhausted: the stream has used its last sequence (MaxSeq); a new Publisher, with a
	// new stream id, goes on.
	ErrStreamExhausted = errors.New("publisher: the stream's sequences are used up (2^63-1): publish on a new stream")
)

// RefusedError is the engine's refusal of a message: nothing of it was stored. Codes as in the
// plain replies: 400 invalid, 413 too large (never retried), 503 unavailable and 507 disk full
// (retried after RetryDelay, then returned), 500 anything else.
type RefusedError struct {
	Code        int
	Description string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("publisher: the store refused the message (%d): %s", e.Code, e.Description)
}

// retriable says whether a refusal may go away (the store stopping, a full disk).
func (e *RefusedError) retriable() bool { return e.Code == 503 || e.Code == 507 }

// Future is the outcome of one Publish. Its methods may be called from any goroutine.
type Future struct {
	p     *Publisher
	seq   uint64
	msgID string // the Nats-Msg-Id, "" for the default id
	// answered is the instant it was resolved: atomic, so that OnResult callbacks and latency
	// counters read it without the lock.
	answered atomic.Int64

	// Guarded by p.mu.
	subject string
	data    []byte
	header  nats.Header // the caller's, never modified
	sentAt  instant
	retryAt instant // a retriable refusal: resend then
	sends   int
	lastErr error // the last send error or refusal, for ErrNotAcked
	// published is when Publish took the message (after any wait for the window).
	published instant
	resolved  bool
	ack       Ack
	err       error
	done      chan struct{} // made by Done on demand, closed at resolution
}

// Seq is the message's sequence number in its stream: 0 until the message is sent (a message
// waiting in a pack is numbered when the pack goes).
func (f *Future) Seq() uint64 {
	f.p.mu.Lock()
	defer f.p.mu.Unlock()
	return f.seq
}

// Published is when Publish took the message: after it waited for room in the window, before
// any wait in a pack. Latency from it to the answer is what the caller sees.
func (f *Future) Published() time.Time { return f.p.timeOf(f.published) }

// Answered is when the message was answered (the arrival of its ack, or its failure), the zero
// time before. Answered().Sub(Published()) is its latency as the caller sees it; OnResult gets it
// without reading the clock once per message.
func (f *Future) Answered() time.Time { return f.p.timeOf(instant(f.answered.Load())) }

// MsgID is the message's id (Ack.MsgID): "" until the message is sent when it has no
// Nats-Msg-Id (its default id derives from its sequence).
func (f *Future) MsgID() string {
	f.p.mu.Lock()
	defer f.p.mu.Unlock()
	return f.msgIDLocked()
}

func (f *Future) msgIDLocked() string {
	if f.msgID != "" {
		return f.msgID
	}
	if f.seq == 0 {
		return ""
	}
	return wire.DerivedMsgID(f.p.stream, f.seq)
}

// Done is closed once the message is answered (Result then returns its outcome).
func (f *Future) Done() <-chan struct{} {
	f.p.mu.Lock()
	defer f.p.mu.Unlock()
	if f.done == nil {
		f.done = make(chan struct{})
		if f.resolved {
			close(f.done)
		}
	}
	return f.done
}

// Result is the outcome if the message is answered (ok), without waiting.
func (f *Future) Result() (a Ack, err error, ok bool) {
	f.p.mu.Lock()
	defer f.p.mu.Unlock()
	a, err, ok = f.ack, f.err, f.resolved
	if ok && err == nil {
		a.MsgID = f.msgIDLocked()
	}
	return a, err, ok
}

// Wait waits for the outcome: where the message is stored (at the engine's promised level:
// durable in sync mode), or why it is not known to be (a *RefusedError: not stored; ErrNotAcked,
// ErrClosed, or the engine's protocol error: maybe stored).
func (f *Future) Wait(ctx context.Context) (Ack, error) {
	select {
	case <-f.Done():
		a, err, _ := f.Result()
		return a, err
	case <-ctx.Done():
		return Ack{}, ctx.Err()
	}
}

// resolve settles f at now. p.mu must be held.
func (f *Future) resolve(a Ack, err error, now instant) {
	f.resolved, f.ack, f.err = true, a, err
	f.answered.Store(int64(now))
	f.data, f.header = nil, nil // not needed any more
	if f.done != nil {
		close(f.done)
	}
}

// Failure is a message that was not acknowledged.
type Failure struct {
	Seq   uint64
	MsgID string
	Err   error
}

// FailedError is what Flush and Close return when messages failed: every failure since the last
// report (the first maxFailures of them, and how many there were).
type FailedError struct {
	Failures []Failure
	Count    int
}

const maxFailures = 1024

func (e *FailedError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "publisher: %d messages not acknowledged", e.Count)
	for i, f := range e.Failures {
		if i == 3 {
			fmt.Fprintf(&b, "; ...")
			break
		}
		fmt.Fprintf(&b, "; seq %d (%s): %v", f.Seq, f.MsgID, f.Err)
	}
	return b.String()
}

// Unwrap gives the failures' errors (errors.Is(err, ErrNotAcked) and errors.As a *RefusedError
// work on the report).
func (e *FailedError) Unwrap() []error {
	errs := make([]error, 0, len(e.Failures))
	for _, f := range e.Failures {
		errs = append(errs, f.Err)
	}
	return errs
}

// futureSlab is how many futures one allocation makes.
const futureSlab = 64

// ringSize is the smallest power of two that holds a window of n futures.
func ringSize(n int) int {
	size := 1
	for size < n {
		size <<= 1
	}
	return size
}
