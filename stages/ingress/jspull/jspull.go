// Package jspull is ingress's JetStream source: a durable pull consumer on an existing stream,
// bound (or created) at the start and fetched from in a loop that hands each message to ingress,
// and the settling of each message once the store answered (Settle). Ingress imports it; it
// never imports ingress.
package jspull

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/rocketstore/engine/internal/wire"
	"github.com/rocketstore/engine/stages/ingress/internal/bounded"
)

// Config makes ingress a lossless bridge from an existing JetStream stream instead of
// core subscriptions: it pulls through a durable consumer and acks each message only once it is
// durable here (the engine waits for its Durable offset whatever the flush mode). A crash before
// that leaves the message unacked, and JetStream delivers it again after AckWait.
//
// Only messages pulled this way are stored: ingress's Config.Subjects is not subscribed to. Replies go to
// JetStream, not to publishers: a stored message is acked (+ACK), one refused as invalid (400,
// 413) is terminated (+TERM, it can never succeed), one the store could not take (disk full,
// stopping) is not acked, so that JetStream delivers it again; an excluded subject is acked.
//
// Each message has a dedupe key (Key): its Nats-Msg-Id header, or without one its stream and
// stream sequence ("$JS:<stream>:<seq>"). It is stored as the record's UNIQ_KEY, so the IndexFile
// holds it. A redelivery is not stored twice: while the engine runs, the dedupe window holds the
// key; a redelivery (JetStream's delivery count above 1) is also looked up in the store (Found),
// so that one of a message stored before a crash or a restart, whose ack never reached
// JetStream, is acked from the store instead of being stored again.
type Config struct {
	// Stream is the stream to read; Consumer the durable pull consumer (created with explicit
	// acks, delivering everything, when it does not exist).
	Stream, Consumer string
	// FilterSubject narrows a new consumer to part of the stream.
	FilterSubject string
	// Batch is how many messages one pull asks for (256); MaxAckPending bounds the messages
	// delivered but not yet acked, for a new consumer (4096); AckWait is how long JetStream waits
	// for an ack before delivering again, for a new consumer (30 s); FetchWait is how long one
	// pull waits for messages (1 s).
	Batch         int
	MaxAckPending int
	AckWait       time.Duration
	FetchWait     time.Duration
	// Found says whether a message with the dedupe key key is stored in topic already, at or
	// after the store time since (Unix ms; its UNIQ_KEY, through the IndexFile; the engine sets
	// it). A redelivered message found there is acked, not stored again. Nil: redeliveries are
	// not looked up (the dedupe window alone holds them, within one run).
	Found func(topic, key string, since int64) bool
}

// WithDefaults checks s and returns it with its defaults.
func (s *Config) WithDefaults() (*Config, error) {
	c := *s
	if c.Stream == "" || c.Consumer == "" {
		return nil, errors.New("ingress: a JetStream source needs a stream and a consumer name")
	}
	if c.Batch <= 0 {
		c.Batch = 256
	}
	if c.MaxAckPending <= 0 {
		c.MaxAckPending = 4096
	}
	if c.AckWait <= 0 {
		c.AckWait = 30 * time.Second
	}
	if c.FetchWait <= 0 {
		c.FetchWait = time.Second
	}
	return &c, nil
}

// Puller is a running pull loop.
type Puller struct {
	cfg     *Config
	sub     *nats.Subscription
	log     zerolog.Logger
	warn    *bounded.LogLimiter
	deliver func(*nats.Msg)
	halt    context.CancelFunc
	pulled  chan struct{} // closed when the pull loop has returned
}

// Start binds (or creates) the durable consumer of cfg (with its defaults) on conn and starts
// the pull loop, which hands each message to deliver (blocking it blocks the loop: nothing more
// is pulled); warn rate-limits its warnings with ingress's of the same kind.
func Start(ctx context.Context, conn *nats.Conn, cfg *Config, log zerolog.Logger, warn *bounded.LogLimiter,
	deliver func(*nats.Msg)) (*Puller, error) {
	js, err := conn.JetStream()
	if err != nil {
		return nil, fmt.Errorf("ingress: jetstream: %w", err)
	}
	if _, err := js.ConsumerInfo(cfg.Stream, cfg.Consumer, nats.Context(ctx)); errors.Is(err, nats.ErrConsumerNotFound) {
		_, err = js.AddConsumer(cfg.Stream, &nats.ConsumerConfig{
			Durable:       cfg.Consumer,
			AckPolicy:     nats.AckExplicitPolicy,
			DeliverPolicy: nats.DeliverAllPolicy,
			FilterSubject: cfg.FilterSubject,
			MaxAckPending: cfg.MaxAckPending,
			AckWait:       cfg.AckWait,
		}, nats.Context(ctx))
		if err != nil {
			return nil, fmt.Errorf("ingress: create consumer %s on stream %s: %w", cfg.Consumer, cfg.Stream, err)
		}
	} else if err != nil {
		return nil, fmt.Errorf("ingress: consumer %s on stream %s: %w", cfg.Consumer, cfg.Stream, err)
	}
	sub, err := js.PullSubscribe(cfg.FilterSubject, cfg.Consumer, nats.Bind(cfg.Stream, cfg.Consumer))
	if err != nil {
		return nil, fmt.Errorf("ingress: bind to consumer %s on stream %s: %w", cfg.Consumer, cfg.Stream, err)
	}
	pctx, halt := context.WithCancel(ctx)
	p := &Puller{cfg: cfg, sub: sub, log: log, warn: warn, deliver: deliver, halt: halt, pulled: make(chan struct{})}
	go p.pull(pctx)
	return p, nil
}

// pull fetches batches and hands each message over, as a subscription callback would. A full
// worker blocks it, so nothing more is pulled: MaxAckPending and this bound what is in flight.
func (p *Puller) pull(ctx context.Context) {
	defer close(p.pulled)
	for ctx.Err() == nil {
		fctx, cancel := context.WithTimeout(ctx, p.cfg.FetchWait)
		msgs, err := p.sub.Fetch(p.cfg.Batch, nats.Context(fctx))
		cancel()
		for _, m := range msgs {
			p.deliver(m)
		}
		if err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) &&
			!errors.Is(err, nats.ErrTimeout) && ctx.Err() == nil {
			if ok, held := p.warn.Allow(time.Now()); ok {
				p.log.Warn().Err(err).Int64("more", held).Msg("ingress: jetstream pull failed; retrying")
			}
			select { // a pull that failed at once must not spin
			case <-time.After(p.cfg.FetchWait):
			case <-ctx.Done():
			}
		}
	}
}

// Stop stops pulling and waits until the pull loop has handed over its last message.
func (p *Puller) Stop() {
	p.halt()
	<-p.pulled
	if err := p.sub.Unsubscribe(); err != nil {
		p.log.Debug().Err(err).Msg("unsubscribe from the jetstream consumer")
	}
}

// Key is a JetStream message's dedupe key (see Config): its Nats-Msg-Id when it has one, else
// "$JS:<stream>:<stream sequence>", and whether JetStream delivered it before (its delivery count
// is above 1). The key is "" when the message has neither (its reply subject is not JetStream's).
func Key(m *nats.Msg) (key string, redelivered bool) {
	md, err := m.Metadata()
	if err == nil {
		redelivered = md.NumDelivered > 1
	}
	if id := m.Header.Get(nats.MsgIdHdr); id != "" {
		return id, redelivered
	}
	if err != nil {
		return "", false
	}
	return "$JS:" + md.Stream + ":" + strconv.FormatUint(md.Sequence.Stream, 10), redelivered
}

// clockSkew is how far the engine's clock may be behind the JetStream server's.
const clockSkew = time.Minute

// FoundSince is where a redelivery's first copy can be in the store: not before the message
// entered its stream (its JetStream timestamp), less clockSkew; 0 (anywhere) when m carries no
// JetStream metadata. Without the bound, a stream deleted and made again, whose sequences start
// at 1 again, would have its messages' keys ($JS:<stream>:<seq>) found on records of the old
// stream, and those messages acked without being stored.
func FoundSince(m *nats.Msg) int64 {
	md, err := m.Metadata()
	if err != nil || md.Timestamp.IsZero() {
		return 0
	}
	return max(md.Timestamp.Add(-clockSkew).UnixMilli(), 0)
}

// Settle acks or terminates a JetStream message after the store answered: stored (failed false)
// is acked, refused as invalid (code 400 or 413) is terminated (it can never succeed), and
// anything else is left unanswered, so that JetStream delivers it again after AckWait. It returns
// the error of the ack's publish.
func Settle(m *nats.Msg, failed bool, code int) error {
	switch {
	case !failed:
		return m.Ack()
	case code == wire.CodeInvalid || code == wire.CodeTooLarge:
		return m.Term()
	}
	return nil
}
