package benchmarks

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	rspub "github.com/rocketstore/engine/engine/publisher"
)

// The child roles of the issue28 preset (`engine bench --child=ROLE`). Each reads its
// configuration line, then commands; see issue28proc.go for the protocol.
const (
	roleG28JetStream = "g28-jetstream" // a JetStream server with the BENCH stream
	roleG28Fill      = "g28-fill"      // fills the engine or JetStream with N messages
	roleG28Publish   = "g28-publish"   // publishes at a rate until told to stop (the load)
	roleG28Reader    = "g28-reader"    // reads a topic: JetStream, pull, the batched read
	roleG28Responder = "g28-responder" // answers pull and read storage-free: the ceiling
	roleG28Member    = "g28-member"    // a consumer group member (engine/api)
	roleG28Sub       = "g28-sub"       // a plain NATS subscriber measuring latency
	roleG28Idle      = "g28-idle"      // many idle members of as many groups
)

// G28Roles are the child roles of the issue28 preset.
var G28Roles = []string{roleG28JetStream, roleG28Fill, roleG28Publish, roleG28Reader, roleG28Responder, roleG28Member, roleG28Sub, roleG28Idle}

// g28Child is a child's side of the protocol.
type g28Child struct {
	cmds chan string // commands after the configuration line; closed at the end of stdin
	w    *lineWriter
	log  zerolog.Logger
}

func (c *g28Child) send(l g28Line) error { return c.w.send(l) }

func (c *g28Child) result(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return c.send(g28Line{Result: b})
}

// await waits for command want (or the end of stdin, or ctx).
func (c *g28Child) await(ctx context.Context, want string) error {
	for {
		select {
		case cmd, ok := <-c.cmds:
			if !ok {
				return errors.New("stdin ended")
			}
			if cmd == want {
				return nil
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// g28ChildMain runs one of the issue28 roles.
func g28ChildMain(ctx context.Context, role string, in io.Reader, out io.Writer, log zerolog.Logger) error {
	w := newLineWriter(out)
	dec := json.NewDecoder(in)
	var cfg json.RawMessage
	if err := dec.Decode(&cfg); err != nil {
		return fmt.Errorf("reading the configuration: %w", err)
	}
	c := &g28Child{cmds: make(chan string, 16), w: w, log: log}
	go func() {
		defer close(c.cmds)
		for {
			var cmd g28Cmd
			if err := dec.Decode(&cmd); err != nil {
				return
			}
			c.cmds <- cmd.Cmd
		}
	}()
	var err error
	switch role {
	case roleG28JetStream:
		err = g28JetStreamMain(ctx, cfg, c)
	case roleG28Fill:
		err = g28FillMain(ctx, cfg, c)
	case roleG28Publish:
		err = g28PublishMain(ctx, cfg, c)
	case roleG28Reader:
		err = g28ReaderMain(ctx, cfg, c)
	case roleG28Responder:
		err = g28ResponderMain(ctx, cfg, c)
	case roleG28Member:
		err = g28MemberMain(ctx, cfg, c)
	case roleG28Sub:
		err = g28SubMain(ctx, cfg, c)
	case roleG28Idle:
		err = g28IdleMain(ctx, cfg, c)
	default:
		err = fmt.Errorf("unknown child role %q", role)
	}
	if err != nil {
		_ = c.send(g28Line{Error: err.Error()})
	}
	return err
}

// g28JetStreamConfig configures the JetStream server child.
type g28JetStreamConfig struct {
	Dir string `json:"dir"`
}

// g28JetStreamMain runs a JetStream server (the ingest benchmarks' startJetStream) with the BENCH
// stream on bench.>, until stdin ends or "stop".
func g28JetStreamMain(ctx context.Context, raw json.RawMessage, c *g28Child) error {
	var cfg g28JetStreamConfig
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return err
	}
	ns, err := startJetStream(c.log, cfg.Dir, false, true)
	if err != nil {
		return err
	}
	defer func() { ns.Shutdown(); ns.WaitForShutdown() }()
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		return err
	}
	js, err := jetstream.New(nc)
	if err == nil {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		_, err = js.CreateOrUpdateStream(cctx, jetstream.StreamConfig{Name: jsStream, Subjects: []string{SubjectPrefix + ".>"},
			Storage: jetstream.FileStorage, Retention: jetstream.LimitsPolicy, MaxMsgs: -1, MaxBytes: -1, Replicas: 1})
		cancel()
	}
	nc.Close()
	if err != nil {
		return fmt.Errorf("the BENCH stream: %w", err)
	}
	if err := c.send(g28Line{Ready: true, URL: ns.ClientURL()}); err != nil {
		return err
	}
	_ = c.await(ctx, "stop")
	return nil
}

// g28FillConfig configures a fill: N messages of Body bytes on Subject, into the engine (through
// the engine's publisher package, batched acks) or into JetStream (PublishAsync, PubAcks).
type g28FillConfig struct {
	URL       string `json:"url"`
	JetStream bool   `json:"jetstream"`
	Subject   string `json:"subject"`
	N         int64  `json:"n"`
	Body      int    `json:"body"`
}

// g28FillResult is what a fill sent, every message acknowledged.
type g28FillResult struct {
	Sent    Tally         `json:"sent"`
	Elapsed time.Duration `json:"elapsed"`
}

func g28FillMain(ctx context.Context, raw json.RawMessage, c *g28Child) error {
	var cfg g28FillConfig
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return err
	}
	nc, err := nats.Connect(cfg.URL, nats.Name("bench-fill"))
	if err != nil {
		return err
	}
	defer nc.Close()
	start := time.Now()
	var sent Tally
	body := newBody(cfg.Body, 0)
	if cfg.JetStream {
		js, err := nc.JetStream(nats.PublishAsyncMaxPending(4096))
		if err != nil {
			return err
		}
		for i := range cfg.N {
			b := append([]byte(nil), body...)
			setSeq(b, seqOf(0, i))
			if _, err := js.PublishAsync(cfg.Subject, b, nats.StallWait(30*time.Second)); err != nil {
				return err
			}
			sent.Add(b)
		}
		select {
		case <-js.PublishAsyncComplete():
		case <-ctx.Done():
			return ctx.Err()
		}
		if n := js.PublishAsyncPending(); n > 0 {
			return fmt.Errorf("%d publishes unanswered", n)
		}
	} else {
		var failed atomic.Int64
		var firstErr atomic.Value
		p, err := rspub.New(nc, rspub.Options{Window: 4096, OnResult: func(_ *rspub.Future, _ rspub.Ack, err error) {
			if err != nil {
				failed.Add(1)
				firstErr.CompareAndSwap(nil, err.Error())
			}
		}})
		if err != nil {
			return err
		}
		for i := range cfg.N {
			b := append([]byte(nil), body...)
			setSeq(b, seqOf(0, i))
			if _, err := p.Publish(ctx, cfg.Subject, b, nil); err != nil {
				return err
			}
			sent.Add(b)
		}
		if err := p.Flush(ctx); err != nil {
			return err
		}
		if err := p.Close(ctx); err != nil {
			return err
		}
		if n := failed.Load(); n > 0 {
			return fmt.Errorf("%d messages refused: %v", n, firstErr.Load())
		}
	}
	return c.result(g28FillResult{Sent: sent, Elapsed: time.Since(start)})
}

// g28PublishConfig configures the load: Rate messages a second on Subject (plain NATS
// publishes, fire-and-forget, paced on an open-loop schedule), each body carrying its sequence
// (bytes 0-8) and the machine's monotonic time of its publish (bytes 8-16).
type g28PublishConfig struct {
	URL     string  `json:"url"`
	Subject string  `json:"subject"`
	Rate    float64 `json:"rate"`
	Body    int     `json:"body"`
	// Pub is the publisher index in the sequence numbers (distinct per publisher of a run).
	Pub int `json:"pub"`
}

// g28PublishResult: what was published.
type g28PublishResult struct {
	Sent Tally `json:"sent"`
	// Behind is the most the publisher fell behind its schedule.
	Behind time.Duration `json:"behind"`
	Usage  Usage         `json:"usage"`
}

// g28PublishMain publishes at the rate from "go" until "stop", then flushes and reports.
func g28PublishMain(ctx context.Context, raw json.RawMessage, c *g28Child) error {
	var cfg g28PublishConfig
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return err
	}
	nc, err := nats.Connect(cfg.URL, nats.Name("bench-load"))
	if err != nil {
		return err
	}
	defer nc.Close()
	if err := c.send(g28Line{Ready: true}); err != nil {
		return err
	}
	if err := c.await(ctx, "go"); err != nil {
		return err
	}
	before := selfUsage()
	stop := make(chan struct{})
	go func() { _ = c.await(ctx, "stop"); close(stop) }()
	body := newBody(max(cfg.Body, 16), cfg.Pub)
	var res g28PublishResult
	interval := time.Duration(float64(time.Second) / cfg.Rate)
	start := time.Now()
	for i := int64(0); ; i++ {
		due := start.Add(time.Duration(i) * interval)
		if d := time.Until(due); d > 0 {
			select {
			case <-stop:
				return g28PublishDone(nc, c, &res, before)
			case <-time.After(d):
			}
		} else {
			res.Behind = max(res.Behind, -d)
			select {
			case <-stop:
				return g28PublishDone(nc, c, &res, before)
			default:
			}
		}
		b := append([]byte(nil), body...)
		setSeq(b, seqOf(cfg.Pub, i))
		binary.BigEndian.PutUint64(b[8:], uint64(machineMonotonic(time.Now())))
		if err := nc.Publish(cfg.Subject, b); err != nil {
			return err
		}
		res.Sent.Add(b)
	}
}

func g28PublishDone(nc *nats.Conn, c *g28Child, res *g28PublishResult, before Usage) error {
	if err := nc.FlushTimeout(10 * time.Second); err != nil {
		return err
	}
	res.Usage = selfUsage().Sub(before)
	return c.result(res)
}
