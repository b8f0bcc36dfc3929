package benchmarks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
)

// PublishConfig is what the publisher child process is given.
type PublishConfig struct {
	URL   string        `json:"url"`
	Load  Load          `json:"load"`
	Fault Fault         `json:"fault"`
	Stall time.Duration `json:"stall"`
	// CPUProfile, when set, is where the publisher process writes a pprof CPU profile of its
	// publishing: on 2 cores the publishers' CPU is half of what a run measures.
	CPUProfile string `json:"cpu_profile,omitempty"`
}

// PublishResult is what the publisher process reports.
type PublishResult struct {
	// Sent is the tally of what the publishers sent (a message skipped by a Fault included:
	// they claim it). Published counts what really went out.
	Sent      Tally `json:"sent"`
	Published int64 `json:"published"`
	// SentBy is what each publisher claims, by its index (its messages' sequence numbers run
	// from 0 below it): verification of a run with drops checks each message it finds against it.
	SentBy []int64 `json:"sent_by,omitempty"`
	// Acked and AckErrors count the replies (an error reply is a JSON {"error":...}); Missing
	// is what never got a reply before the wait for replies stalled. In batched mode they count
	// the futures: resolved with an ack, failed, and given up on when the wait stalled.
	Acked     int64 `json:"acked"`
	AckErrors int64 `json:"ack_errors"`
	Missing   int64 `json:"missing"`
	// Resent and AckMessages are the batched-ack publishers' resends and the acks they received
	// (publisher.Stats; 0 in the other modes).
	Resent      int64 `json:"resent,omitempty"`
	AckMessages int64 `json:"ack_messages,omitempty"`
	// WindowWaits counts the publishes that had to wait for a free slot in the window
	// (request/reply: a batched-ack publisher waits inside Publish, uncounted).
	WindowWaits int64 `json:"window_waits"`
	// Start is when the publishers started (unix ns); Flushed when the last one's messages were
	// all at the server; LastReply when the last reply came (request/reply) or the last future
	// resolved with an ack (batched).
	Start     int64 `json:"start"`
	Flushed   int64 `json:"flushed"`
	LastReply int64 `json:"last_reply"`
	// LastPublishMono is when the last publisher's last publish returned, on the machine's
	// monotonic clock (monoNanos): with the target's TargetResult.DoneMono, the lag from the
	// last publish to the last message held.
	LastPublishMono int64 `json:"last_publish_mono,omitempty"`
	// Latency is the encoded histogram of the ack latencies (µs), publish to reply (batched:
	// first send to the future's ack).
	Latency string `json:"latency"`
	// Usage is the publisher process's CPU from the start to the end of publishing.
	Usage Usage  `json:"usage"`
	Err   string `json:"err,omitempty"`
}

// Publish runs the publishers of cfg against cfg.URL and returns what they did. progress, when
// not nil, is called now and then with the messages published and acked so far. Publishers
// connect first; the clock starts once every connection is up.
func Publish(ctx context.Context, cfg PublishConfig, log zerolog.Logger, progress func(published, acked int64)) (PublishResult, error) {
	var res PublishResult
	l := cfg.Load
	if err := l.Validate(); err != nil {
		return res, err
	}
	if err := loopbackURL(cfg.URL); err != nil {
		return res, err
	}
	stall := cfg.Stall
	if stall <= 0 {
		stall = 10 * time.Second
	}
	pubs := make([]*publisher, l.Publishers)
	defer func() {
		for _, p := range pubs {
			if p != nil && p.nc != nil {
				p.nc.Close()
			}
		}
	}()
	subs := subjects(l.Topics)
	for i := range pubs {
		p, err := newPublisher(i, cfg, subs, stall)
		if err != nil {
			return res, err
		}
		pubs[i] = p
	}
	if progress != nil {
		stop := make(chan struct{})
		defer close(stop)
		go reportProgress(pubs, progress, stop)
	}

	before := selfUsage()
	start := time.Now()
	var deadline time.Time
	if l.Duration > 0 {
		deadline = start.Add(l.Duration)
	}
	errs := make([]error, len(pubs))
	var wg sync.WaitGroup
	for i, p := range pubs {
		wg.Go(func() { errs[i] = p.run(ctx, start, deadline) })
	}
	wg.Wait()
	res.Usage = selfUsage().Sub(before)
	res.Start = start.UnixNano()

	merged := newLatencyHistogram()
	for _, p := range pubs {
		res.Sent.Merge(p.sent)
		res.SentBy = append(res.SentBy, p.sent.Count)
		res.LastPublishMono = max(res.LastPublishMono, p.lastPublish)
		res.Published += p.published.Load()
		res.Acked += p.acked.Load()
		res.AckErrors += p.ackErrors.Load()
		res.WindowWaits += p.windowWaits
		res.Missing += p.missing
		res.Resent += p.resent
		res.AckMessages += p.ackMessages
		res.Flushed = max(res.Flushed, p.flushed)
		res.LastReply = max(res.LastReply, p.lastReply)
		if p.repliesStopped {
			merged.Merge(p.hist)
		}
	}
	var err error
	res.Latency, err = encodeHistogram(merged)
	err = errors.Join(append(errs, err)...)
	if err != nil {
		res.Err = err.Error()
	}
	log.Debug().Int64("published", res.Published).Int64("acked", res.Acked).Msg("publishers done")
	return res, err
}

// reportProgress calls fn every quarter second until stop is closed.
func reportProgress(pubs []*publisher, fn func(published, acked int64), stop <-chan struct{}) {
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			var pub, acked int64
			for _, p := range pubs {
				pub += p.published.Load()
				acked += p.acked.Load() + p.ackErrors.Load()
			}
			fn(pub, acked)
		}
	}
}

// publisher is one connection and the goroutine that publishes on it. In request/reply mode it
// also has a reply subscription (its own inbox, one callback goroutine) and a window; in batched
// mode, a publisher.Publisher on the connection (ba, batched.go).
type publisher struct {
	id    int
	cfg   PublishConfig
	stall time.Duration
	nc    *nats.Conn
	subs  []string
	body  []byte
	quota int64 // messages to send; -1 until the deadline

	sent        Tally // publishing goroutine
	published   atomic.Int64
	lastPublish int64 // monoNanos of the last publish's return
	flushed     int64 // unix ns

	// Request/reply. The reply subject is inbox.<publish time>, so the reply callback needs no
	// per-message state to measure the latency.
	inbox       string
	window      chan struct{}
	windowWaits int64
	acked       atomic.Int64
	ackErrors   atomic.Int64
	replies     *progress
	sub         *nats.Subscription
	subClosed   chan struct{}           // closed after the reply callback's last call
	hist        *hdrhistogram.Histogram // reply callback only, until subClosed
	// repliesStopped says the reply callback is over: hist may be read.
	repliesStopped bool
	lastReply      int64
	missing        int64

	// Batched acks: the stream (it counts into acked and ackErrors, and sets hist, lastReply and
	// missing when it finishes) and its publisher.Stats.
	ba                  *batched
	resent, ackMessages int64
}

func newPublisher(id int, cfg PublishConfig, subs []string, stall time.Duration) (*publisher, error) {
	l := cfg.Load
	p := &publisher{id: id, cfg: cfg, stall: stall, subs: subs, body: newBody(l.BodySize, id), quota: -1}
	if l.Messages > 0 {
		p.quota = l.Messages / int64(l.Publishers)
		if int64(id) < l.Messages%int64(l.Publishers) {
			p.quota++
		}
	}
	var err error
	p.nc, err = nats.Connect(cfg.URL, nats.Name(fmt.Sprintf("bench-publisher-%d", id)),
		nats.MaxReconnects(0))
	if err != nil {
		return nil, fmt.Errorf("publisher %d: connect to %s: %w", id, cfg.URL, err)
	}
	if l.Ack == Batched {
		if p.ba, err = newBatched(p); err != nil {
			p.nc.Close()
			return nil, err
		}
		return p, nil
	}
	if l.Ack != RequestReply {
		return p, nil
	}
	p.inbox = nats.NewInbox()
	p.window = make(chan struct{}, l.Window)
	p.replies = newProgress()
	p.hist = newLatencyHistogram()
	p.subClosed = make(chan struct{})
	p.sub, err = p.nc.Subscribe(p.inbox+".*", p.onReply)
	if err == nil {
		p.sub.SetClosedHandler(func(string) { close(p.subClosed) })
		err = p.sub.SetPendingLimits(-1, -1) // the window bounds what can be pending
	}
	if err == nil {
		err = p.nc.Flush()
	}
	if err != nil {
		return nil, fmt.Errorf("publisher %d: reply subscription: %w", id, err)
	}
	return p, nil
}

var errorReplyPrefix = []byte(`{"error"`)

// onReply takes one reply: its latency, its kind, a slot back in the window.
func (p *publisher) onReply(m *nats.Msg) {
	now := time.Since(epoch)
	if t0, err := strconv.ParseInt(m.Subject[len(p.inbox)+1:], 10, 64); err == nil {
		recordLatency(p.hist, now-time.Duration(t0))
	}
	if bytes.HasPrefix(m.Data, errorReplyPrefix) {
		p.ackErrors.Add(1)
	} else {
		p.acked.Add(1)
	}
	select {
	case <-p.window:
	default: // a reply to nothing outstanding: counted, and verification sees the excess
	}
	p.replies.set(p.acked.Load()+p.ackErrors.Load(), time.Now())
}

// run publishes the publisher's share, then flushes, then (request/reply) waits for the
// replies or (batched) for the futures. Message i of publisher p goes to topic (i·P + p) mod T.
func (p *publisher) run(ctx context.Context, start, deadline time.Time) (err error) {
	l := p.cfg.Load
	var interval time.Duration
	if l.Rate > 0 {
		interval = time.Duration(float64(time.Second) * float64(l.Publishers) / l.Rate)
	}
	skip := int64(-1)
	if p.id == 0 && p.cfg.Fault.PublisherSkip > 0 {
		skip = p.cfg.Fault.PublisherSkip - 1
	}
	rr, ba := l.Ack == RequestReply, p.ba
	if rr {
		defer func() { err = errors.Join(err, p.stopReplies()) }()
	}
	if ba != nil {
		var unwatch func()
		ctx, unwatch = ba.watch(ctx)
		defer unwatch()
		defer func() { _ = ba.close(true) }() // after an error: stop its goroutines
	}
	msg := &nats.Msg{Data: p.body}
	var replyBuf []byte
	topic := int64(p.id)
	for i := int64(0); p.quota < 0 || i < p.quota; i++ {
		if interval > 0 {
			// Open-loop schedule: message i is due at start + i·interval; a publisher that fell
			// behind catches up without sleeping.
			if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
				time.Sleep(d)
			}
		}
		if (interval > 0 || i&255 == 0) && stop(ctx, deadline) {
			break
		}
		body := p.body
		if ba != nil {
			body = ba.body()
		}
		setSeq(body, seqOf(p.id, i))
		msg.Subject = p.subs[topic%int64(len(p.subs))]
		topic += int64(l.Publishers)
		if i == skip {
			p.sent.Add(body) // claimed, never sent: the loss verification must find
			continue
		}
		if ba != nil {
			if err := ba.publish(ctx, msg.Subject, body); err != nil {
				return fmt.Errorf("publisher %d: publish: %w", p.id, err)
			}
			p.sent.Add(body)
			p.published.Add(1)
			continue
		}
		if rr {
			if err := p.acquire(ctx); err != nil {
				return err // not counted as sent: the run is invalid for the missing replies
			}
		}
		p.sent.Add(p.body)
		if rr {
			replyBuf = strconv.AppendInt(append(append(replyBuf[:0], p.inbox...), '.'), int64(time.Since(epoch)), 10)
			msg.Reply = string(replyBuf)
		}
		if err := p.nc.PublishMsg(msg); err != nil {
			return fmt.Errorf("publisher %d: publish: %w", p.id, err)
		}
		p.published.Add(1)
	}
	p.lastPublish = monoNanos(time.Now())
	if err := p.nc.FlushTimeout(p.stall); err != nil {
		return fmt.Errorf("publisher %d: flush: %w", p.id, err)
	}
	p.flushed = time.Now().UnixNano()
	if ba != nil {
		return ba.finish(ctx)
	}
	if !rr {
		return nil
	}
	n := p.published.Load()
	last, err := p.replies.await(ctx, n, p.stall)
	if err != nil {
		p.missing = n - p.acked.Load() - p.ackErrors.Load()
		return fmt.Errorf("publisher %d: waiting for replies: %w", p.id, err)
	}
	p.lastReply = last.UnixNano()
	return nil
}

// stopReplies ends the reply subscription and returns once its callback will not run again, so
// that the histogram and the counters can be read: nats.go calls the closed handler on the
// callback goroutine after the last callback returned.
func (p *publisher) stopReplies() error {
	err := p.sub.Unsubscribe()
	select {
	case <-p.subClosed:
		p.repliesStopped = true
		return err
	case <-time.After(p.stall):
		return errors.Join(err, fmt.Errorf("publisher %d: reply subscription did not close", p.id))
	}
}

// stop says whether publishing must end: ctx is done or the deadline passed.
func stop(ctx context.Context, deadline time.Time) bool {
	return ctx.Err() != nil || (!deadline.IsZero() && !time.Now().Before(deadline))
}

// acquire takes a slot in the window, waiting at most the stall time for a reply to free one.
func (p *publisher) acquire(ctx context.Context) error {
	select {
	case p.window <- struct{}{}:
		return nil
	default:
	}
	p.windowWaits++
	t := time.NewTimer(p.stall)
	defer t.Stop()
	select {
	case p.window <- struct{}{}:
		return nil
	case <-t.C:
		return fmt.Errorf("publisher %d: window of %d full and no reply for %s", p.id, cap(p.window), p.stall)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// loopbackURL checks that a URL a child reports points at the loopback interface: runs are
// loopback only.
func loopbackURL(url string) error {
	host := url
	for _, p := range []string{"nats://", "tls://"} {
		if len(host) > len(p) && host[:len(p)] == p {
			host = host[len(p):]
		}
	}
	h, port, err := net.SplitHostPort(host)
	if err != nil {
		return fmt.Errorf("target url %q: %w", url, err)
	}
	if _, err := strconv.Atoi(port); err != nil {
		return fmt.Errorf("target url %q: port: %w", url, err)
	}
	if ip := net.ParseIP(h); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("target url %q is not on the loopback interface", url)
	}
	return nil
}
