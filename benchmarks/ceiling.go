package benchmarks

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/rocketstore/engine/internal/wire"
)

func init() {
	register(&Scenario{
		Name:        "ceiling-subscriber",
		Doc:         "embedded nats-server + one core NATS subscription that counts and checksums: the ceiling for fire-and-forget",
		Modes:       []AckMode{FireAndForget},
		CeilingFor:  FireAndForget,
		CountsDrops: true,
		New: func(cfg TargetConfig, log zerolog.Logger) (Target, error) {
			return &ceiling{cfg: cfg, log: log}, nil
		},
		Verify: checkReceived,
	})
	register(&Scenario{
		Name:       "ceiling-responder",
		Doc:        "embedded nats-server + one subscription that counts, checksums and replies with an ack-sized JSON, storing nothing: the ceiling for one reply per message",
		Modes:      []AckMode{RequestReply},
		CeilingFor: RequestReply,
		New: func(cfg TargetConfig, log zerolog.Logger) (Target, error) {
			return &ceiling{cfg: cfg, log: log, reply: true}, nil
		},
		Verify: checkReceived,
	})
}

// benchMaxPayload is what the embedded servers accept: the engine's default body limit plus
// its headroom, so that every target runs the same server configuration.
const benchMaxPayload = 4<<20 + 64<<10

// startServer runs an embedded nats-server on a free loopback port, configured as the engine
// configures its own (no signals, the same max payload).
func startServer(log zerolog.Logger) (*server.Server, error) {
	ns, err := server.NewServer(&server.Options{
		Host:       "127.0.0.1",
		Port:       server.RANDOM_PORT,
		NoSigs:     true,
		MaxPayload: benchMaxPayload,
		ServerName: "bench-ceiling",
	})
	if err != nil {
		return nil, fmt.Errorf("embedded nats: %w", err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		ns.Shutdown()
		return nil, errors.New("embedded nats: not ready within 10s")
	}
	log.Debug().Str("url", ns.ClientURL()).Msg("embedded nats-server ready")
	return ns, nil
}

// ceiling is the storage-free target: one subscription that counts and checksums every body
// and, as the responder, replies to every message with a JSON of the engine's ack's shape. Its
// callback does no more than that, so no subscriber that does anything with a message can beat
// it on the same server and connection setup.
type ceiling struct {
	cfg   TargetConfig
	log   zerolog.Logger
	reply bool

	ns     *server.Server
	nc     *nats.Conn
	sub    *nats.Subscription
	closed chan struct{}

	seen    int64 // messages delivered, the dropped one included; callback-owned
	got     atomicTally
	replies atomic.Int64
	ack     []byte
	prog    *progress
	// faultDrops counts the drops of Fault.TargetDropCounted; dropped is nats.go's drop count
	// as last read (it cannot be read once the subscription closed).
	faultDrops, dropped atomic.Int64
}

// Start runs the server, subscribes and returns once the server has the subscription.
func (c *ceiling) Start(context.Context) (string, error) {
	var err error
	if c.ns, err = startServer(c.log); err != nil {
		return "", err
	}
	c.prog = newProgress()
	c.closed = make(chan struct{})
	c.nc, err = nats.Connect(c.ns.ClientURL(), nats.Name("bench-ceiling"),
		nats.ClosedHandler(func(*nats.Conn) { close(c.closed) }))
	if err != nil {
		c.ns.Shutdown()
		return "", err
	}
	sub, err := c.nc.Subscribe(c.cfg.Run.Target.subject(), c.onMsg)
	if err == nil {
		c.sub = sub
		c.prog.drops = c.drops
		err = setPending(sub, c.cfg.Run.Target)
	}
	if err == nil {
		err = c.nc.Flush() // the server has the subscription
	}
	if err != nil {
		return "", errors.Join(err, c.Stop())
	}
	return c.ns.ClientURL(), nil
}

// setPending applies the run's pending limits to a subscription (nats.go's defaults for 0).
func setPending(sub *nats.Subscription, o TargetOptions) error {
	msgs, bytes := o.PendingMsgs, o.PendingBytes
	if msgs == 0 {
		msgs = nats.DefaultSubPendingMsgsLimit
	}
	if bytes == 0 {
		bytes = nats.DefaultSubPendingBytesLimit
	}
	return sub.SetPendingLimits(msgs, bytes)
}

// ackMsgID stands in for the engine's offset message id (32 hex digits), so that a reply has
// the size of the engine's.
const ackMsgID = "7F00000100002A9F0000000000000000"

// drops is what nats.go dropped for the subscription (and the fault's), kept past its close.
func (c *ceiling) drops() int64 {
	if d, err := c.sub.Dropped(); err == nil {
		c.dropped.Store(max(c.dropped.Load(), int64(d)))
	}
	return c.dropped.Load() + c.faultDrops.Load()
}

func (c *ceiling) onMsg(m *nats.Msg) {
	c.seen++
	if c.seen == c.cfg.Run.Fault.TargetDrop {
		return
	}
	if c.seen == c.cfg.Run.Fault.TargetDropCounted {
		c.faultDrops.Add(1)
		return
	}
	n := c.got.add(m.Data)
	if c.reply && m.Reply != "" {
		now := time.Now()
		c.ack = wire.AppendAck(c.ack[:0], &wire.Ack{
			Topic: m.Subject, QueueOffset: n - 1, MsgID: ackMsgID,
			CommitLogOffset: c.got.bytes.Load(), StoreTimestamp: now.UnixMilli(),
		})
		if err := c.nc.Publish(m.Reply, c.ack); err == nil {
			c.replies.Add(1)
		}
		c.prog.set(n, now)
		return
	}
	c.prog.set(n, time.Now())
}

// Await waits for n messages counted (and, for the responder, answered).
func (c *ceiling) Await(ctx context.Context, n int64, stall time.Duration) (time.Time, error) {
	return c.prog.await(ctx, n, stall)
}

// Stop drains the subscription (every delivered message goes through the callback), closes the
// connection and the server.
func (c *ceiling) Stop() error {
	var err error
	if c.sub != nil {
		c.drops() // Dropped cannot be read once the subscription is closed
	}
	if c.nc != nil {
		if err = c.nc.Drain(); err == nil {
			<-c.closed
		} else {
			c.nc.Close()
		}
	}
	if c.ns != nil {
		c.ns.Shutdown()
		c.ns.WaitForShutdown()
	}
	return err
}

// Report is the tally of what the callback counted and the replies it sent.
func (c *ceiling) Report() TargetReport {
	t := c.got.load()
	r := TargetReport{Received: &t, Replies: c.replies.Load()}
	if c.sub != nil {
		r.Dropped = c.drops()
	}
	return r
}
