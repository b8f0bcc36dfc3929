package ingress

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/rocketstore/engine/internal/wire"
)

// JetStreamSource makes ingress a lossless bridge from an existing JetStream stream instead of
// core subscriptions: it pulls through a durable consumer and acks each message only once it is
// durable here (the engine waits for its Durable offset whatever the flush mode). A crash before
// that leaves the message unacked, and JetStream delivers it again after AckWait.
//
// Only messages pulled this way are stored: Config.Subjects is not subscribed to. Replies go to
// JetStream, not to publishers: a stored message is acked (+ACK), one refused as invalid (400,
// 413) is terminated (+TERM, it can never succeed), one the store could not take (disk full,
// stopping) is not acked, so that JetStream delivers it again; an excluded subject is acked.
// Without a Nats-Msg-Id header, the stream and sequence ("$JS:<stream>:<seq>") are the dedupe key,
// so a redelivery inside the dedupe window is not stored twice.
type JetStreamSource struct {
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
}

func (s *JetStreamSource) withDefaults() (*JetStreamSource, error) {
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

// jetStream is the state of a running JetStream source.
type jetStream struct {
	src  *JetStreamSource
	sub  *nats.Subscription
	stop context.CancelFunc
	done chan struct{} // closed when the pull loop has returned
}

// startJetStream binds (or creates) the durable consumer and starts the pull loop.
func (in *Ingress) startJetStream(ctx context.Context) error {
	src := in.cfg.JetStream
	js, err := in.cfg.Conn.JetStream()
	if err != nil {
		return fmt.Errorf("ingress: jetstream: %w", err)
	}
	if _, err := js.ConsumerInfo(src.Stream, src.Consumer, nats.Context(ctx)); errors.Is(err, nats.ErrConsumerNotFound) {
		_, err = js.AddConsumer(src.Stream, &nats.ConsumerConfig{
			Durable:       src.Consumer,
			AckPolicy:     nats.AckExplicitPolicy,
			DeliverPolicy: nats.DeliverAllPolicy,
			FilterSubject: src.FilterSubject,
			MaxAckPending: src.MaxAckPending,
			AckWait:       src.AckWait,
		}, nats.Context(ctx))
		if err != nil {
			return fmt.Errorf("ingress: create consumer %s on stream %s: %w", src.Consumer, src.Stream, err)
		}
	} else if err != nil {
		return fmt.Errorf("ingress: consumer %s on stream %s: %w", src.Consumer, src.Stream, err)
	}
	sub, err := js.PullSubscribe(src.FilterSubject, src.Consumer, nats.Bind(src.Stream, src.Consumer))
	if err != nil {
		return fmt.Errorf("ingress: bind to consumer %s on stream %s: %w", src.Consumer, src.Stream, err)
	}
	pctx, stop := context.WithCancel(ctx)
	in.js = &jetStream{src: src, sub: sub, stop: stop, done: make(chan struct{})}
	go in.pull(pctx)
	return nil
}

// pull fetches batches and hands each message to its worker, as a subscription callback would.
// A full worker blocks it, so nothing more is pulled: MaxAckPending and this bound what is in
// flight.
func (in *Ingress) pull(ctx context.Context) {
	defer close(in.js.done)
	for ctx.Err() == nil {
		fctx, cancel := context.WithTimeout(ctx, in.js.src.FetchWait)
		msgs, err := in.js.sub.Fetch(in.js.src.Batch, nats.Context(fctx))
		cancel()
		for _, m := range msgs {
			in.onMsg(m)
		}
		if err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) &&
			!errors.Is(err, nats.ErrTimeout) && ctx.Err() == nil {
			if ok, held := in.replyLog.Allow(time.Now()); ok {
				in.log.Warn().Err(err).Int64("more", held).Msg("ingress: jetstream pull failed; retrying")
			}
			select { // a pull that failed at once must not spin
			case <-time.After(in.js.src.FetchWait):
			case <-ctx.Done():
			}
		}
	}
}

// stopJetStream stops pulling and waits until the pull loop has handed over its last message.
func (in *Ingress) stopJetStream() {
	in.js.stop()
	<-in.js.done
	if err := in.js.sub.Unsubscribe(); err != nil {
		in.log.Debug().Err(err).Msg("unsubscribe from the jetstream consumer")
	}
}

// jsMsg is the JetStream message a record came from, or nil.
func jsMsg(ctx any) *nats.Msg {
	m, _ := ctx.(*nats.Msg)
	return m
}

// jsDedupeKey is the dedupe key of a JetStream message without a Nats-Msg-Id.
func jsDedupeKey(m *nats.Msg) string {
	md, err := m.Metadata()
	if err != nil {
		return ""
	}
	return "$JS:" + md.Stream + ":" + strconv.FormatUint(md.Sequence.Stream, 10)
}

// settleJetStream acks, terminates or leaves a JetStream message after the store answered.
func (in *Ingress) settleJetStream(m *nats.Msg, err error) {
	var aerr error
	switch {
	case err == nil:
		aerr = m.Ack()
	case ReplyCode(err) == wire.CodeInvalid || ReplyCode(err) == wire.CodeTooLarge:
		aerr = m.Term()
	default:
		return // not stored: JetStream delivers it again after AckWait
	}
	if aerr != nil {
		in.counters.replyFailures.Add(1)
		if ok, held := in.replyLog.Allow(time.Now()); ok {
			in.log.Warn().Err(aerr).Int64("more", held).Msg("ingress: a jetstream ack could not be sent")
		}
	}
}
