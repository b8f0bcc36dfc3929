package engine

import (
	"container/list"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/rocketstore/engine/engine/api"
	"github.com/rocketstore/engine/internal/reader"
	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/stages/ingress"
)

// ErrInvalidRequest: a request field is missing or out of range.
var ErrInvalidRequest = reader.ErrInvalidRequest

// Errors that end a replay early.
var (
	// ErrNoReceiver: an acked replay's request found no subscriber on the subject.
	ErrNoReceiver = errors.New("engine: replay: no subscriber on the subject")
	// ErrAckTimeout: an acked replay sent a message MaxDeliver times without an ack.
	ErrAckTimeout = errors.New("engine: replay: message not acked")
)

// ReplayMode is how a replay paces itself.
type ReplayMode int

const (
	// ReplayAcked: every message is a request the receiver acks by responding; at most
	// MaxInFlight are unacked at a time.
	ReplayAcked ReplayMode = iota
	// ReplayPaced: messages go out at Rate per second, with no acks.
	ReplayPaced
)

func (m ReplayMode) String() string {
	if m == ReplayPaced {
		return api.ReplayPaced
	}
	return api.ReplayAcked
}

// ReplayRequest asks Engine.Replay to send a topic's messages onto a NATS subject. See the
// engine/api package doc for what the receiver sees.
type ReplayRequest struct {
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

	Mode ReplayMode
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

	// onWindowFull, when set (tests), is called each time an acked replay finds its window full
	// and is about to wait for an ack.
	onWindowFull func()
}

// ReplayRange is the part of one queue a replay sends: [Start, Stop).
type ReplayRange struct {
	QueueID     int32
	Start, Stop int64
}

// ReplayResult is what a replay did.
type ReplayResult struct {
	ID     string
	Queues []ReplayRange
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
// Engine.Replay does not limit how many replays run at once: the read API bounds its own
// (NATSOptions.MaxReplays); library callers bound theirs.
func (e *Engine) Replay(ctx context.Context, req ReplayRequest) (ReplayResult, error) {
	r, err := e.prepareReplay(req)
	if err != nil {
		return ReplayResult{}, err
	}
	return r.run(ctx)
}

// replay is one prepared replay. Only the goroutine that calls run uses it.
type replay struct {
	e      *Engine
	req    ReplayRequest
	queues []ReplayRange
	src    replaySource
	inbox  string // acked: the replies come to <inbox>.<seq>
}

// replayBatch is how many messages a replay reads from a queue at a time; replayBatchBytes is
// what the batches of all queues hold at most together (each Get returns its first message
// whatever its size).
const (
	replayBatch      = 32
	replayBatchBytes = 4 << 20
)

// prepareReplay checks req and captures the range of every queue: the stop offsets are the
// queues' max offsets now.
func (e *Engine) prepareReplay(req ReplayRequest) (*replay, error) {
	if req.Conn == nil {
		return nil, fmt.Errorf("%w: replay: no connection", ErrInvalidRequest)
	}
	if err := checkReplay(&req); err != nil {
		return nil, err
	}
	if req.ID == "" {
		req.ID = rand.Text()
	}
	bounds, err := e.QueueOffsets(req.Topic)
	if err != nil {
		return nil, err
	}
	r := &replay{e: e, req: req}
	for _, b := range bounds {
		if len(req.Queues) > 0 && !containsQueue(req.Queues, b.QueueID) {
			continue
		}
		start := max(req.StartOffset, b.Min)
		if req.StartTime > 0 {
			if start, err = e.OffsetForTime(req.Topic, b.QueueID, req.StartTime); err != nil {
				return nil, err
			}
			start = max(start, b.Min)
		}
		r.queues = append(r.queues, ReplayRange{QueueID: b.QueueID, Start: min(start, b.Max), Stop: b.Max})
	}
	for _, id := range req.Queues {
		if !containsRange(r.queues, id) {
			return nil, fmt.Errorf("%w: %s/%d", ErrUnknownQueue, req.Topic, id)
		}
	}
	r.src = replaySource{e: e, topic: req.Topic, tags: req.Tags,
		batchBytes: max(64<<10, replayBatchBytes/max(len(r.queues), 1))}
	for _, q := range r.queues {
		r.src.queues = append(r.src.queues, &replayQueue{id: q.QueueID, next: q.Start, stop: q.Stop})
	}
	return r, nil
}

// checkReplay checks what req says on its own (no store, no connection) and fills in the
// defaults. The error wraps ErrInvalidRequest.
func checkReplay(req *ReplayRequest) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: replay: %s", ErrInvalidRequest, fmt.Sprintf(format, args...))
	}
	if req.Topic == "" {
		return bad("no topic")
	}
	if err := commitlog.ValidateTopic(req.Topic); err != nil {
		return bad("%v", err)
	}
	switch {
	case !validPublishSubject(req.Subject):
		return bad("subject %.200q: want a subject to publish to (tokens, no wildcards or spaces)", req.Subject)
	case len(req.Subject) > maxSubjectLen:
		return bad("subject of %d bytes: at most %d", len(req.Subject), maxSubjectLen)
	case req.StartOffset < 0 || req.StartTime < 0:
		return bad("negative start (offset %d, time %d)", req.StartOffset, req.StartTime)
	case req.StartOffset > 0 && req.StartTime > 0:
		return bad("both a start offset and a start time")
	case req.Mode != ReplayAcked && req.Mode != ReplayPaced:
		return bad("unknown mode %d", req.Mode)
	case req.Mode == ReplayPaced && !(req.Rate > 0):
		return bad("paced mode needs a rate > 0 messages per second")
	case req.Mode == ReplayPaced && float64(time.Second)/req.Rate >= math.MaxInt64:
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
	req.KeysHeader = cmpOr(req.KeysHeader, ingress.DefaultKeysHeader)
	req.TagsHeader = cmpOr(req.TagsHeader, ingress.DefaultTagsHeader)
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

func containsRange(rs []ReplayRange, id int32) bool {
	for _, r := range rs {
		if r.QueueID == id {
			return true
		}
	}
	return false
}

// validPublishSubject: non-empty tokens, no wildcards, no whitespace.
func validPublishSubject(s string) bool {
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

// plannedCount is the number of queue offsets in the ranges.
func (r *replay) plannedCount() int64 {
	var n int64
	for _, q := range r.queues {
		n += q.Stop - q.Start
	}
	return n
}

// run sends everything, then the end message.
func (r *replay) run(ctx context.Context) (ReplayResult, error) {
	res := ReplayResult{ID: r.req.ID, Queues: r.queues}
	var err error
	if r.req.Mode == ReplayPaced {
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
func (r *replay) runPaced(ctx context.Context, res *ReplayResult) error {
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

// ackEvent is a response to one of an acked replay's requests.
type ackEvent struct {
	seq          int64
	noResponders bool
}

// inFlight is a message sent and not acked yet.
type inFlight struct {
	seq    int64
	msgID  string // "" for the end message
	sentAt time.Time
	sends  int
}

// ackWindow holds the unacked messages in the order of their last send, so that the front is
// the first to time out (every send waits the same AckWait). Owned by the replay's goroutine.
type ackWindow struct {
	order *list.List // of *inFlight
	bySeq map[int64]*list.Element
}

func newAckWindow() *ackWindow {
	return &ackWindow{order: list.New(), bySeq: make(map[int64]*list.Element)}
}

func (w *ackWindow) len() int { return w.order.Len() }

func (w *ackWindow) add(f *inFlight) { w.bySeq[f.seq] = w.order.PushBack(f) }

// ack drops seq; acks of unknown or already acked messages are ignored.
func (w *ackWindow) ack(seq int64) {
	if el, ok := w.bySeq[seq]; ok {
		w.order.Remove(el)
		delete(w.bySeq, seq)
	}
}

func (w *ackWindow) oldest() *inFlight { return w.order.Front().Value.(*inFlight) }

// resent moves f, just sent again, to the back.
func (w *ackWindow) resent(f *inFlight) { w.order.MoveToBack(w.bySeq[f.seq]) }

// runAcked sends each message as a request with the reply subject <inbox>.<seq>, keeping at most
// MaxInFlight unacked; then it waits for every ack, and sends the end message the same way.
//
// A request nobody subscribes to gets a "no responders" status from the server on the inbox,
// which fails the replay at once (ErrNoReceiver), but only if the server delivers that status to
// the inbox's subscription: it picks one subscription of the publishing connection that matches
// the inbox, and a connection that also subscribes to ">" (the engine's, with the default
// subjects) may get it there instead. The receiver missing then shows as ack timeouts.
func (r *replay) runAcked(ctx context.Context, res *ReplayResult) error {
	nc := r.req.Conn
	inbox := nc.NewInbox()
	r.inbox = inbox
	acks := make(chan ackEvent, r.req.MaxInFlight+1)
	done := make(chan struct{})
	defer close(done) // after the unsubscribe below: a callback blocked on acks returns
	sub, err := nc.Subscribe(inbox+".*", func(m *nats.Msg) {
		seq, err := strconv.ParseInt(m.Subject[len(inbox)+1:], 10, 64)
		if err != nil {
			return
		}
		ev := ackEvent{seq: seq, noResponders: len(m.Data) == 0 && m.Header.Get("Status") == "503"}
		select {
		case acks <- ev:
		case <-done:
		}
	})
	if err != nil {
		return fmt.Errorf("engine: replay: subscribe to the acks: %w", err)
	}
	defer func() { _ = sub.Unsubscribe() }()

	w := newAckWindow()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	seq := int64(0)
	for {
		m, err := r.src.next(ctx)
		if err != nil {
			return err
		}
		if m == nil {
			break
		}
		for w.len() >= r.req.MaxInFlight {
			if r.req.onWindowFull != nil {
				r.req.onWindowFull()
			}
			if err := r.await(ctx, w, acks, timer, res); err != nil {
				return err
			}
		}
		seq++
		if err := r.sendRequest(w, r.natsMsg(m, seq, 0), &inFlight{seq: seq, msgID: m.MsgID, sends: 1}); err != nil {
			return err
		}
		res.Sent++
	}
	// The end goes out once everything is acked: after it, nothing of the replay comes again.
	for w.len() > 0 {
		if err := r.await(ctx, w, acks, timer, res); err != nil {
			return err
		}
	}
	seq++
	if err := r.sendRequest(w, r.endMsg(seq, res.Sent, ""), &inFlight{seq: seq, sends: 1}); err != nil {
		return err
	}
	for w.len() > 0 {
		if err := r.await(ctx, w, acks, timer, res); err != nil {
			return err
		}
	}
	return nil
}

// sendRequest publishes msg with the reply subject of f's seq and records f as sent now.
func (r *replay) sendRequest(w *ackWindow, msg *nats.Msg, f *inFlight) error {
	msg.Reply = r.inbox + "." + strconv.FormatInt(f.seq, 10)
	if err := r.req.Conn.PublishMsg(msg); err != nil {
		return fmt.Errorf("engine: replay: publish: %w", err)
	}
	f.sentAt = time.Now()
	if f.sends == 1 {
		w.add(f)
	} else {
		w.resent(f)
	}
	return nil
}

// await waits for one ack, or for the oldest message to time out (then sends again every
// message that timed out, or fails once one was sent MaxDeliver times), or for ctx.
func (r *replay) await(ctx context.Context, w *ackWindow, acks <-chan ackEvent, timer *time.Timer, res *ReplayResult) error {
	timer.Reset(time.Until(w.oldest().sentAt.Add(r.req.AckWait)))
	select {
	case ev := <-acks:
		if ev.noResponders {
			return fmt.Errorf("%w %q", ErrNoReceiver, r.req.Subject)
		}
		w.ack(ev.seq)
		return nil
	case <-timer.C:
	case <-ctx.Done():
		return ctx.Err()
	}
	now := time.Now()
	for range w.len() { // bounded: each timed-out message moves to the back once
		f := w.oldest()
		if f.sentAt.Add(r.req.AckWait).After(now) {
			break
		}
		if f.sends >= r.req.MaxDeliver {
			return fmt.Errorf("%w: replay seq %d (message %s) sent %d times, no ack within %v",
				ErrAckTimeout, f.seq, cmpOr(f.msgID, "end"), f.sends, r.req.AckWait)
		}
		msg := r.endMsg(f.seq, res.Sent, "")
		if f.msgID != "" {
			m, err := r.e.Lookup(f.msgID) // read again rather than hold every body in flight
			if err != nil {
				return fmt.Errorf("engine: replay: read %s again to redeliver it: %w", f.msgID, err)
			}
			msg = r.natsMsg(&m, f.seq, f.sends)
		} else {
			msg.Header.Set(api.HeaderReplayRedelivered, strconv.Itoa(f.sends))
		}
		f.sends++
		if err := r.sendRequest(w, msg, f); err != nil {
			return err
		}
		res.Redelivered++
	}
	return nil
}
