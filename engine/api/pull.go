package api

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// EndpointPull is the pull endpoint: messages of a queue streamed as NATS messages to the
// request's reply subject, then an end message (see the package doc, "Pull").
const EndpointPull = "pull"

func init() { Endpoints = append(Endpoints, EndpointPull) }

// Bounds of a pull.
const (
	// DefaultPullMax is a pull's message bound when PullRequest.Max is 0.
	DefaultPullMax = 256
	// MaxPullMax caps PullRequest.Max.
	MaxPullMax = 4096
	// DefaultPullMaxBytes is a pull's byte bound (the records' sizes) when PullRequest.MaxBytes
	// is 0.
	DefaultPullMaxBytes = 4 << 20
	// MaxPullMaxBytes caps PullRequest.MaxBytes.
	MaxPullMaxBytes = 64 << 20
)

// StatusError is the Rs-Pull-Status of the end message of a pull that failed (its
// Rs-Pull-Error-Code and Rs-Pull-Error say why).
const StatusError = "ERROR"

// PulledPrefix starts the reply subject of every pulled message, which carries the message's
// position, as JetStream carries a message's metadata in its ack subject:
//
//	$RS.PULL.<queueOffset>.<storeTimestamp>.<msgId>
//
// numbers in decimal, the store timestamp in ms, msgId the offset message id, whose last 16 hex
// digits are the record's CommitLog offset (a replayed message carries the same in Rs-Queue-Offset,
// Rs-Store-Timestamp and Rs-Msg-Id). The topic and the queue are the request's. Nothing answers
// on these subjects: they are not to be responded to. The end message has no reply subject.
//
// Why not headers (Rs-Topic... as on replayed messages): a message stored without headers
// (Engine.Put) then travels without a header block, and the others with one line less. nats.go
// encodes and decodes header blocks through maps, at an allocation or two per header per
// message on each side; with the position in one compact header instead, a pull of 128-byte
// messages took about 15% more CPU per message end to end (engine, server and client), which
// put it below JetStream's pull consumer instead of level with it (BenchmarkConsume in package
// engine); with one header per field, more. And why so short: the NATS server and nats.go parse
// a message's protocol line byte by byte; with the topic, queue id and CommitLog offset in it
// too, the same pull took about 9% more CPU.
const PulledPrefix = "$RS.PULL."

// HeaderPartial is on a pulled message sent without its body (body and headers would exceed
// the connection's max payload): the length of the body left out. Read it with msg (Client.Body).
const HeaderPartial = "Rs-Partial"

// Headers of the end message of a pull. It has no body and no reply subject.
const (
	// HeaderPullStatus is a Status* name, or StatusError.
	HeaderPullStatus = "Rs-Pull-Status"
	// HeaderPullNextOffset is the offset to pull from next.
	HeaderPullNextOffset = "Rs-Pull-Next-Offset"
	// HeaderPullCount is the number of messages the pull sent before the end message.
	HeaderPullCount = "Rs-Pull-Count"
	// HeaderPullMinOffset and HeaderPullMaxOffset are the queue's bounds when it was read (absent
	// when the pull failed before reading).
	HeaderPullMinOffset = "Rs-Pull-Min-Offset"
	HeaderPullMaxOffset = "Rs-Pull-Max-Offset"
	// HeaderPullWaitSkipped ("true"): the pull asked to wait, but every long-poll slot was
	// taken, so it was answered at once.
	HeaderPullWaitSkipped = "Rs-Pull-Wait-Skipped"
	// HeaderPullScanStopped ("true"): a filtered pull stopped at its scan limit (65,536 queue
	// units) before the head of the queue: later offsets may still match; pull again from the
	// next offset.
	HeaderPullScanStopped = "Rs-Pull-Scan-Stopped"
	// HeaderApplied, on a pull's end message and a batched read's reply, lists the bounds the
	// engine applied where the request asked for more ("max=4096,maxBytes=67108864,waitMs=60000":
	// a larger value is lowered, not refused); get's reply has them as "applied".
	HeaderApplied = "Rs-Applied"
	// HeaderPullErrorCode and HeaderPullError, on the end message of a failed pull, are the
	// error's code (as in error replies) and description.
	HeaderPullErrorCode = "Rs-Pull-Error-Code"
	HeaderPullError     = "Rs-Pull-Error"
)

// PullRequest asks for messages of one queue from Offset (endpoint pull). Its fields are those
// of GetRequest; the messages come back one NATS message each.
type PullRequest struct {
	Topic   string `json:"topic"`
	QueueID int32  `json:"queueId"`
	Offset  int64  `json:"offset"`
	// Max bounds the number of messages (DefaultPullMax when 0, at most MaxPullMax).
	Max int `json:"max,omitempty"`
	// MaxBytes bounds the sum of the records' sizes (DefaultPullMaxBytes when 0, at most
	// MaxPullMaxBytes); the first message is sent whatever its size.
	MaxBytes int `json:"maxBytes,omitempty"`
	// Tags keeps only messages whose TAGS is one of them; empty or "*": every message.
	Tags []string `json:"tags,omitempty"`
	// Subject keeps only messages whose NATS subject (NATS_SUBJECT) matches it: a subject, or a
	// pattern with '*' and '>' ("device.*.temp"); empty: every message.
	Subject string `json:"subject,omitempty"`
	// WaitMs > 0 makes a pull at the head of the queue wait that long for a message (long
	// polling), at most MaxWaitMs.
	WaitMs int64 `json:"waitMs,omitempty"`
}

// PullMax is the number of messages a pull with max n sends at most.
func PullMax(n int) int {
	if n <= 0 {
		return DefaultPullMax
	}
	return min(n, MaxPullMax)
}

// PulledMessage is one message of a pull.
type PulledMessage struct {
	// Topic and QueueID are the pull's.
	Topic       string
	QueueID     int32
	QueueOffset int64
	// CommitLogOffset is the record's physical offset in the CommitLog (from MsgID).
	CommitLogOffset int64
	// MsgID is RocketMQ's offset message id (for msg).
	MsgID string
	// StoreTimestamp is the engine's clock when it stored the message, in ms.
	StoreTimestamp int64
	// Body is the body as stored; empty when Partial.
	Body []byte
	// BodySize is the length of the body, also when Partial.
	BodySize int
	// Partial: the body was left out (too large for the connection's max payload with its
	// headers); Client.Body(ctx, MsgID) reads it. A Consumer reads it itself unless told not to.
	Partial bool
	// Header is the message's NATS headers as received: the original headers rebuilt from the
	// record's properties (as a replay does: Rs-Subject, Nats-Msg-Id or Rs-Uniq-Key, the keys and
	// tags headers, the publisher's own headers) and, when Partial, Rs-Partial. Nil when the
	// message has none.
	Header nats.Header
}

// Subject is the subject the message was published on (Rs-Subject), "" if it did not come
// through NATS.
func (m *PulledMessage) Subject() string { return m.Header.Get(HeaderSubject) }

// PullResult is what a pull found.
type PullResult struct {
	// Status is one of the Status* names (FOUND when Messages is not empty).
	Status   string
	Messages []PulledMessage
	// NextOffset is the offset to pull from next.
	NextOffset int64
	// MinOffset and MaxOffset are the queue's bounds when it was read.
	MinOffset, MaxOffset int64
	// WaitSkipped: the pull asked to wait, but every long-poll slot was taken, so it was
	// answered at once (pause before asking again).
	WaitSkipped bool
	// ScanStopped: a filtered pull stopped at its scan limit before the head of the queue;
	// later offsets may still match (pull again from NextOffset).
	ScanStopped bool
}

// Pull reads messages of a queue through the pull endpoint: the engine sends each message as a
// NATS message of its own to an inbox of this call, body as stored and headers rebuilt, then an
// end message with the status and the next offset. Messages come in queue order. With WaitMs > 0,
// ctx's deadline (if any) must leave room for the wait.
//
// A pull that fails after sending messages returns them with the error (an *Error): the
// result's NextOffset is then the offset after the last of them. Messages too large for the
// connection come Partial (see PulledMessage).
func (c *Client) Pull(ctx context.Context, req PullRequest) (*PullResult, error) {
	subject := c.queueSubject(EndpointPull, req.QueueID)
	data, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("api: %s: %w", subject, err)
	}
	if _, ok := ctx.Deadline(); !ok {
		wait := time.Duration(min(max(req.WaitMs, 0), MaxWaitMs)) * time.Millisecond
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout+wait)
		defer cancel()
	}
	// The engine sends at most PullMax(req.Max) messages and the end message: the channel never
	// fills (a full channel would make nats.go drop messages, as a slow consumer).
	limit := PullMax(req.Max)
	ch := make(chan *nats.Msg, limit+1)
	inbox := c.nc.NewInbox()
	sub, err := c.nc.ChanSubscribe(inbox, ch)
	if err != nil {
		return nil, fmt.Errorf("api: %s: %w", subject, err)
	}
	defer sub.Unsubscribe() //nolint:errcheck // nothing to do about it
	if err := c.nc.PublishRequest(subject, inbox, data); err != nil {
		return nil, fmt.Errorf("api: %s: %w", subject, err)
	}
	res := &PullResult{}
	for {
		var m *nats.Msg
		select {
		case m = <-ch: // while messages are queued, without select's full cost
		default:
			select {
			case m = <-ch:
			case <-ctx.Done():
				return nil, fmt.Errorf("api: %s: after %d messages: %w", subject, len(res.Messages), ctx.Err())
			}
		}
		if strings.HasPrefix(m.Reply, PulledPrefix) {
			pm, err := pulledMessage(m, &req)
			if err != nil {
				return nil, fmt.Errorf("api: %s: %w", subject, err)
			}
			if len(res.Messages) == cap(res.Messages) {
				// Room for 1024 first, then for all the pull may send: one copy at most.
				n := min(limit, 1024)
				if cap(res.Messages) >= n {
					n = max(limit, 2*cap(res.Messages))
				}
				res.Messages = append(make([]PulledMessage, 0, n), res.Messages...)
			}
			res.Messages = append(res.Messages, pm)
			continue
		}
		if m.Header.Get(HeaderPullStatus) == "" {
			if len(m.Data) == 0 && m.Header.Get("Status") == "503" {
				return nil, fmt.Errorf("api: %s: no engine answers (is its read API on, with the prefix %q?): %w",
					subject, c.prefix, nats.ErrNoResponders)
			}
			// Not the pull protocol: an error reply of the JSON API, or another service.
			if err := decodeReply(m, &struct{}{}); err != nil {
				return nil, err
			}
			return nil, fmt.Errorf("api: %s: unexpected reply %q", subject, m.Data)
		}
		return pullEnd(m, res)
	}
}

// pullEnd completes res with what the end message m says.
func pullEnd(m *nats.Msg, res *PullResult) (*PullResult, error) {
	h := m.Header
	res.Status = h.Get(HeaderPullStatus)
	var bad error
	num := func(name string) int64 {
		v := h.Get(name)
		if v == "" {
			return 0
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil && bad == nil {
			bad = fmt.Errorf("api: pull: end message: %s %q: %w", name, v, err)
		}
		return n
	}
	res.NextOffset = num(HeaderPullNextOffset)
	res.MinOffset = num(HeaderPullMinOffset)
	res.MaxOffset = num(HeaderPullMaxOffset)
	res.WaitSkipped = h.Get(HeaderPullWaitSkipped) == "true"
	res.ScanStopped = h.Get(HeaderPullScanStopped) == "true"
	count := num(HeaderPullCount)
	if bad != nil {
		return nil, bad
	}
	if count != int64(len(res.Messages)) {
		return nil, fmt.Errorf("api: pull: the engine sent %d messages, %d arrived", count, len(res.Messages))
	}
	if code := h.Get(HeaderPullErrorCode); code != "" || res.Status == StatusError {
		n, err := strconv.Atoi(code)
		if err != nil {
			n = CodeInternal
		}
		return res, &Error{Code: n, Description: h.Get(HeaderPullError)}
	}
	return res, nil
}

// pulledMessage reads a pulled message of a pull of req, its position from its reply subject
// (see PulledPrefix).
func pulledMessage(m *nats.Msg, req *PullRequest) (PulledMessage, error) {
	pm := PulledMessage{Topic: req.Topic, QueueID: req.QueueID, Body: m.Data, BodySize: len(m.Data), Header: m.Header}
	f := fields{s: m.Reply[len(PulledPrefix):], ok: true}
	pm.QueueOffset = f.num()
	pm.StoreTimestamp = f.num()
	pm.MsgID = f.s
	if !f.ok || len(pm.MsgID) < 16 {
		return pm, fmt.Errorf("pulled message: reply subject %q: want %s<queueOffset>.<storeTimestamp>.<msgId>",
			m.Reply, PulledPrefix)
	}
	for _, c := range []byte(pm.MsgID[len(pm.MsgID)-16:]) { // the CommitLog offset, in hex
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return pm, fmt.Errorf("pulled message: message id %q: want uppercase hex", pm.MsgID)
		}
		pm.CommitLogOffset = pm.CommitLogOffset<<4 | int64(c)
	}
	if pm.CommitLogOffset < 0 {
		return pm, fmt.Errorf("pulled message: message id %q: a negative CommitLog offset", pm.MsgID)
	}
	if size := m.Header.Get(HeaderPartial); size != "" {
		n, err := strconv.Atoi(size)
		if err != nil || n < 0 {
			return pm, fmt.Errorf("pulled message %s: %s %q: want a body size", pm.MsgID, HeaderPartial, size)
		}
		pm.Partial, pm.BodySize = true, n
	}
	return pm, nil
}

// fields reads the tokens of a pulled message's reply subject without allocating: s is what
// is left, ok false once a token was malformed.
type fields struct {
	s  string
	ok bool
}

// num is the next token, a decimal of 1 to 18 digits (an int64 then cannot overflow).
func (f *fields) num() int64 {
	var n int64
	i := 0
	for ; i < len(f.s) && f.s[i] != '.'; i++ {
		c := f.s[i]
		if c < '0' || c > '9' || i == 18 {
			f.ok = false
			return 0
		}
		n = n*10 + int64(c-'0')
	}
	if i == 0 || i == len(f.s) {
		f.ok = false
		return 0
	}
	f.s = f.s[i+1:]
	return n
}

// ConsumerConfig sets up a Consumer: the queue, where to start, and each pull's bounds.
type ConsumerConfig struct {
	Topic   string
	QueueID int32
	// Offset is the queue offset of the first message wanted.
	Offset int64
	// Max and MaxBytes bound each pull (PullRequest's; DefaultConsumerMax and
	// DefaultPullMaxBytes when 0).
	Max      int
	MaxBytes int
	// Tags keeps only messages whose TAGS is one of them.
	Tags []string
	// Subject keeps only messages whose NATS subject matches it (a subject or a pattern).
	Subject string
	// WaitMs > 0: a pull at the head of the queue waits that long for a message; the Consumer
	// then follows the head, with a pull always waiting there.
	WaitMs int64
	// KeepPartial leaves messages whose body did not fit in a NATS message Partial; by default
	// Next reads their bodies with msg (Client.Body) before returning them.
	KeepPartial bool
}

// DefaultConsumerMax is a Consumer's pull size when ConsumerConfig.Max is 0: the largest, as
// a Consumer is for throughput (DefaultPullMaxBytes bounds a pull of large messages).
const DefaultConsumerMax = MaxPullMax

// Consumer reads a queue in order, pull after pull, with the next pull in flight while the
// caller handles the current batch (double buffering): when Next hands out a batch, the pull
// from the batch's NextOffset is already under way. It is not safe for concurrent use.
type Consumer struct {
	c      *Client
	cfg    ConsumerConfig
	offset int64       // where the next pull starts: after the batches taken so far
	done   int64       // after the batches Next returned
	ahead  chan pulled // the pull in flight (capacity 1), nil when none
	held   *PullResult // a batch taken whose partial bodies are still to be read
	ctx    context.Context
	cancel context.CancelFunc
}

type pulled struct {
	res *PullResult
	err error
}

// NewConsumer returns a consumer of cfg's queue from cfg.Offset. Close it when done.
func (c *Client) NewConsumer(cfg ConsumerConfig) *Consumer {
	if cfg.Max <= 0 {
		cfg.Max = DefaultConsumerMax
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Consumer{c: c, cfg: cfg, offset: cfg.Offset, done: cfg.Offset, ctx: ctx, cancel: cancel}
}

// Offset is the queue offset the next batch starts from: past every batch Next returned (what
// a consumer group would commit once it handled them).
func (k *Consumer) Offset() int64 { return k.done }

// Next returns the next batch of messages, in queue order: the result of the pull in flight,
// or of a pull made now. It may be empty (the head of the queue, a tag filter, a wait that ran
// out; see Status). Unless the batch is empty without having waited, the following pull starts
// before Next returns.
//
// On an error nothing is lost: the next call pulls again from the same offset, or, when the
// error came from reading a partial body, returns the same batch once that read succeeds. ctx
// bounds this call only; the pull in flight goes on until Close.
func (k *Consumer) Next(ctx context.Context) (*PullResult, error) {
	if k.held == nil {
		var res *PullResult
		var err error
		if k.ahead != nil {
			select {
			case p := <-k.ahead:
				k.ahead = nil
				res, err = p.res, p.err
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		} else {
			res, err = k.c.Pull(ctx, k.request())
		}
		if err != nil {
			return nil, err
		}
		k.offset = res.NextOffset
		k.held = res
		if len(res.Messages) > 0 || (k.cfg.WaitMs > 0 && !res.WaitSkipped) {
			k.prefetch()
		}
	}
	if !k.cfg.KeepPartial {
		for i := range k.held.Messages {
			m := &k.held.Messages[i]
			if !m.Partial {
				continue
			}
			body, err := k.c.Body(ctx, m.MsgID)
			if err != nil {
				return nil, fmt.Errorf("api: consumer: body of %s: %w", m.MsgID, err)
			}
			m.Body, m.BodySize, m.Partial = body, len(body), false
		}
	}
	res := k.held
	k.held, k.done = nil, res.NextOffset
	return res, nil
}

func (k *Consumer) request() PullRequest {
	return PullRequest{Topic: k.cfg.Topic, QueueID: k.cfg.QueueID, Offset: k.offset, Max: k.cfg.Max,
		MaxBytes: k.cfg.MaxBytes, Tags: k.cfg.Tags, Subject: k.cfg.Subject, WaitMs: k.cfg.WaitMs}
}

// prefetch starts the pull from k.offset on a goroutine of its own; Next or Close collects it.
func (k *Consumer) prefetch() {
	ch := make(chan pulled, 1)
	k.ahead = ch
	req := k.request()
	go func() {
		res, err := k.c.Pull(k.ctx, req)
		ch <- pulled{res, err}
	}()
}

// Close stops the pull in flight, if any, and waits for it. Next must not be called after.
func (k *Consumer) Close() {
	k.cancel()
	if k.ahead != nil {
		<-k.ahead
		k.ahead = nil
	}
}
