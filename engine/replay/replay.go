// Package replay sends a topic's stored messages onto a NATS subject (acked or paced), with
// their original headers rebuilt from the record's properties: what the read API's replay
// endpoint runs, and library callers too. It declares what it reads of the store (Store).
package replay

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/rocketstore/engine/engine/api"
	"github.com/rocketstore/engine/internal/reader"
	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/stages/ingress"
)

// Store is what a replay reads (engine.Engine implements it).
type Store interface {
	Get(ctx context.Context, req reader.GetRequest) (reader.GetResult, error)
	Lookup(msgID string) (reader.Message, error)
	QueueOffsets(topic string) ([]reader.QueueOffsets, error)
	OffsetForTime(topic string, queueID int32, ts int64) (int64, error)
}

// MaxSubjectLen bounds the subjects the engine publishes to because a request named them (a
// replay's subject, a pull's reply subject). The server closes a connection that sends a
// protocol line longer than its max_control_line (4 KiB by default), and that connection is the
// engine's: a subject near that length, plus the reply subject the engine adds, would cut the
// engine off NATS at the request of any client.
const MaxSubjectLen = 1024

// Errors that end a replay early.
var (
	// ErrNoReceiver: an acked replay's request found no subscriber on the subject.
	ErrNoReceiver = errors.New("engine: replay: no subscriber on the subject")
	// ErrAckTimeout: an acked replay sent a message MaxDeliver times without an ack.
	ErrAckTimeout = errors.New("engine: replay: message not acked")
)

// Mode is how a replay paces itself.
type Mode int

const (
	// Acked: every message is a request the receiver acks by responding; at most
	// MaxInFlight are unacked at a time.
	Acked Mode = iota
	// Paced: messages go out at Rate per second, with no acks.
	Paced
)

func (m Mode) String() string {
	if m == Paced {
		return api.ReplayPaced
	}
	return api.ReplayAcked
}

// Request asks Run to send a topic's messages onto a NATS subject. See the
// engine/api package doc for what the receiver sees.
type Request struct {
	// Conn publishes the messages (and, acked, receives the acks on an inbox of its own).
	// Messages the engine stores from a connection that also publishes replays are stored
	// again if the subject is one it stores, unless the connection was made with nats.NoEcho
	// (as engine.Serve's is).
	Conn *nats.Conn
	// Subject receives the messages; no wildcards.
	Subject string
	Topic   string
	// Queues to replay; nil: every queue of the topic.
	Queues []int32
	// StartOffset (raised to each queue's min offset) or StartTime (ms: each queue's first
	// message stored at or after it); with neither, from each queue's min offset.
	StartOffset int64
	StartTime   int64
	// Tags keeps only messages whose TAGS is one of them (empty: every message).
	Tags []string
	// FilterSubject keeps only messages whose NATS subject matches it ("": every message).
	FilterSubject string

	Mode Mode
	// Acked: MaxInFlight unacked messages at most (api.DefaultMaxInFlight); a message not acked
	// within AckWait (api.DefaultAckWaitMs) is sent again, with Rs-Replay-Redelivered, up to
	// MaxDeliver sends in all (api.DefaultMaxDeliver); then the replay fails with ErrAckTimeout.
	MaxInFlight int
	AckWait     time.Duration
	MaxDeliver  int
	// Rate is the paced mode's messages per second (required there).
	Rate float64

	// KeysHeader and TagsHeader name the headers KEYS and TAGS go back to (the ingress
	// defaults, Rmq-Keys and Rmq-Tags).
	KeysHeader, TagsHeader string
	// ID names the replay in its messages' Rs-Replay-Id; a random one when empty.
	ID string

	// OnWindowFull, when set, is called each time an acked replay finds its window full and is
	// about to wait for an ack (the read API's tests wait on it).
	OnWindowFull func()
}

// Range is the part of one queue a replay sends: [Start, Stop).
type Range struct {
	QueueID     int32
	Start, Stop int64
}

// Result is what a replay did.
type Result struct {
	ID     string
	Queues []Range
	// Sent counts the messages sent once at least; Redelivered the extra sends (acked).
	Sent, Redelivered int64
}

// Replay sends the messages of a topic onto req.Subject, from an offset or a time up to the end
// each queue had when it started (later messages are not sent), then an end message
// (Rs-Replay-End: true, Rs-Replay-Count). It returns when the replay is over: everything sent
// (and, acked, acked), or it failed, or ctx ended; on failure the end message carries
// Rs-Replay-Error and the result counts what was sent.
//
// Order: the messages of one queue are sent in queue order. Several queues are merged in
// CommitLog order, the order the engine stored them, by reading each queue in small batches
// and always sending the lowest CommitLog offset among their heads. (Queue by queue would be
// simpler, but a receiver that restores the original order across queues would then have to
// buffer whole queues.)
//
// A message too large for the connection's max payload (body and headers) fails the replay.
// Run does not limit how many replays run at once: the read API bounds its own
// (NATSOptions.MaxReplays); library callers bound theirs.
func Run(ctx context.Context, st Store, req Request) (Result, error) {
	r, err := Prepare(st, req)
	if err != nil {
		return Result{}, err
	}
	return r.Run(ctx)
}

// Replay is one prepared replay (Prepare): its ranges are fixed. Only the goroutine that calls
// Run uses it.
type Replay struct {
	store  Store
	req    Request
	queues []Range
	src    source
	inbox  string // acked: the replies come to <inbox>.<seq>
}

// replayBatch is how many messages a replay reads from a queue at a time; replayBatchBytes is
// what the batches of all queues hold at most together (each Get returns its first message
// whatever its size).
const (
	replayBatch      = 32
	replayBatchBytes = 4 << 20
)

// Prepare checks req and captures the range of every queue: the stop offsets are the queues'
// max offsets now.
func Prepare(st Store, req Request) (*Replay, error) {
	if req.Conn == nil {
		return nil, fmt.Errorf("%w: replay: no connection", reader.ErrInvalidRequest)
	}
	if err := Check(&req); err != nil {
		return nil, err
	}
	if req.ID == "" {
		req.ID = rand.Text()
	}
	bounds, err := st.QueueOffsets(req.Topic)
	if err != nil {
		return nil, err
	}
	r := &Replay{store: st, req: req}
	for _, b := range bounds {
		if len(req.Queues) > 0 && !containsQueue(req.Queues, b.QueueID) {
			continue
		}
		start := max(req.StartOffset, b.Min)
		if req.StartTime > 0 {
			if start, err = st.OffsetForTime(req.Topic, b.QueueID, req.StartTime); err != nil {
				return nil, err
			}
			start = max(start, b.Min)
		}
		r.queues = append(r.queues, Range{QueueID: b.QueueID, Start: min(start, b.Max), Stop: b.Max})
	}
	for _, id := range req.Queues {
		if !containsRange(r.queues, id) {
			return nil, fmt.Errorf("%w: %s/%d", reader.ErrUnknownQueue, req.Topic, id)
		}
	}
	r.src = source{store: st, topic: req.Topic, tags: req.Tags, subject: req.FilterSubject,
		batchBytes: max(64<<10, replayBatchBytes/max(len(r.queues), 1))}
	for _, q := range r.queues {
		r.src.queues = append(r.src.queues, &queue{id: q.QueueID, next: q.Start, stop: q.Stop})
	}
	return r, nil
}

// Check checks what req says on its own (no store, no connection) and fills in the
// defaults. The error wraps reader.ErrInvalidRequest.
func Check(req *Request) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: replay: %s", reader.ErrInvalidRequest, fmt.Sprintf(format, args...))
	}
	if req.Topic == "" {
		return bad("no topic")
	}
	if err := commitlog.ValidateTopic(req.Topic); err != nil {
		return bad("%v", err)
	}
	switch {
	case !ValidSubject(req.Subject):
		return bad("subject %.200q: want a subject to publish to (tokens, no wildcards or spaces)", req.Subject)
	case len(req.Subject) > MaxSubjectLen:
		return bad("subject of %d bytes: at most %d", len(req.Subject), MaxSubjectLen)
	case req.StartOffset < 0 || req.StartTime < 0:
		return bad("negative start (offset %d, time %d)", req.StartOffset, req.StartTime)
	case req.StartOffset > 0 && req.StartTime > 0:
		return bad("both a start offset and a start time")
	case req.Mode != Acked && req.Mode != Paced:
		return bad("unknown mode %d", req.Mode)
	case req.Mode == Paced && !(req.Rate > 0):
		return bad("paced mode needs a rate > 0 messages per second")
	case req.Mode == Paced && float64(time.Second)/req.Rate >= math.MaxInt64:
		return bad("rate %g messages per second: too low (the interval between two messages overflows)", req.Rate)
	case req.MaxInFlight < 0 || req.MaxInFlight > api.MaxMaxInFlight:
		return bad("maxInFlight %d: at most %d", req.MaxInFlight, api.MaxMaxInFlight)
	case req.MaxDeliver < 0 || req.AckWait < 0:
		return bad("negative maxDeliver or ackWait")
	}
	for _, id := range req.Queues {
		if id < 0 {
			return bad("queue id %d: queue ids are 0 or more", id)
		}
	}
	if req.MaxInFlight == 0 {
		req.MaxInFlight = api.DefaultMaxInFlight
	}
	if req.AckWait == 0 {
		req.AckWait = api.DefaultAckWaitMs * time.Millisecond
	}
	if req.MaxDeliver == 0 {
		req.MaxDeliver = api.DefaultMaxDeliver
	}
	req.KeysHeader = cmp.Or(req.KeysHeader, ingress.DefaultKeysHeader)
	req.TagsHeader = cmp.Or(req.TagsHeader, ingress.DefaultTagsHeader)
	return nil
}

func containsQueue(ids []int32, id int32) bool {
	for _, v := range ids {
		if v == id {
			return true
		}
	}
	return false
}

func containsRange(rs []Range, id int32) bool {
	for _, r := range rs {
		if r.QueueID == id {
			return true
		}
	}
	return false
}

// ValidSubject: non-empty tokens, no wildcards, no whitespace.
func ValidSubject(s string) bool {
	if s == "" {
		return false
	}
	for tok := range strings.SplitSeq(s, ".") {
		if tok == "" || tok == "*" || tok == ">" || strings.ContainsAny(tok, " \t\r\n") {
			return false
		}
	}
	return true
}

// Request is the request as checked, with its defaults and its ID filled in.
func (r *Replay) Request() Request { return r.req }

// Queues are the ranges the replay sends, by queue.
func (r *Replay) Queues() []Range { return r.queues }

// PlannedCount is the number of queue offsets in the ranges.
func (r *Replay) PlannedCount() int64 {
	var n int64
	for _, q := range r.queues {
		n += q.Stop - q.Start
	}
	return n
}

// Run sends everything, then the end message.
func (r *Replay) Run(ctx context.Context) (Result, error) {
	res := Result{ID: r.req.ID, Queues: r.queues}
	var err error
	if r.req.Mode == Paced {
		err = r.runPaced(ctx, &res)
	} else {
		err = r.runAcked(ctx, &res)
	}
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("engine: replay stopped: %w", context.Cause(ctx))
		}
		// Best effort: tell the receiver it will get no more.
		end := r.endMsg(res.Sent+1, res.Sent, err.Error())
		if perr := r.req.Conn.PublishMsg(end); perr == nil {
			_ = r.req.Conn.FlushTimeout(5 * time.Second)
		}
	}
	return res, err
}

// runPaced publishes at Rate messages per second from the start, catching up after a slow read
// (it sends what is due, never faster on average).
func (r *Replay) runPaced(ctx context.Context, res *Result) error {
	nc := r.req.Conn
	interval := float64(time.Second) / r.req.Rate
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	start := time.Now()
	for seq := int64(1); ; seq++ {
		m, err := r.src.next(ctx)
		if err != nil {
			return err
		}
		if m == nil {
			break
		}
		if d := time.Until(start.Add(time.Duration(float64(seq-1) * interval))); d > 0 {
			timer.Reset(d)
			select {
			case <-timer.C:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if err := nc.PublishMsg(r.natsMsg(m, seq, 0)); err != nil {
			return fmt.Errorf("engine: replay: publish: %w", err)
		}
		res.Sent++
	}
	if err := nc.PublishMsg(r.endMsg(res.Sent+1, res.Sent, "")); err != nil {
		return fmt.Errorf("engine: replay: publish the end: %w", err)
	}
	fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return nc.FlushWithContext(fctx)
}
