package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/rocketstore/engine/engine/api"
)

// replayCmd is `engine replay`: a running engine sends a topic onto a subject (the read API's
// replay endpoint). It is online only. engine.Replay's logic would run over an offline Reader
// (it reads only through Engine.QueueOffsets, OffsetForTime, Get and Lookup, which are the
// Reader's methods behind the engine's read gate), but it is bound to *Engine: offline replay
// needs engine to take those four methods as an interface (and to expose a Replay over it).
//
// The command starts the replay, prints its plan, and (unless --no-wait) follows it to its end
// by subscribing to the subject too: it counts the messages and reads the end message
// (Rs-Replay-End), drawing progress on stderr when that is a terminal. It never acks: in acked
// mode another subscriber on the subject must.
type replayCmd struct {
	Online readNATSFlags `embed:""`
	Store  string        `hidden:"" help:"Not supported: replay is online only."`

	Topic  string   `placeholder:"TOPIC" help:"Topic to replay." required:""`
	Queue  []int32  `aliases:"queue-id" short:"q" placeholder:"ID" help:"Only these queues (comma-separated); default: every queue of the topic."`
	Offset int64    `placeholder:"N" help:"Start each queue at this queue offset (raised to the queue's first)." xor:"start" required:""`
	Time   timeArg  `help:"Start each queue at its first message stored at or after TIME (RFC 3339, Unix ms, now, or relative: --time=-1h)." placeholder:"TIME" xor:"start" required:""`
	To     string   `help:"Subject to publish the messages on (no wildcards). In acked mode a receiver there must respond to each message: this command only watches." required:"" placeholder:"SUBJECT"`
	Tags   []string `help:"Only messages whose TAGS is one of these, comma-separated."`
	Subj   string   `name:"subject" placeholder:"SUBJECT" help:"Only messages whose NATS subject matches this subject or pattern (device.*.temp)."`

	Acked       bool          `help:"Acked mode (the default): each message is a request the receiver acks by responding; unacked ones are sent again." xor:"mode"`
	MaxInFlight int           `placeholder:"N" help:"Acked mode: unacked messages at most (default 256)."`
	AckWait     time.Duration `help:"Acked mode: send a message again when not acked within this (default 30s)."`
	MaxDeliver  int           `placeholder:"N" help:"Acked mode: sends of a message at most before the replay fails (default 5)."`
	Rate        float64       `placeholder:"R" help:"Paced mode: publish this many messages per second, no acks (a slower receiver loses messages)." xor:"mode"`

	NoWait bool `help:"Return once the replay has started: print the plan, do not follow the replay to its end."`
	JSON   bool `name:"json" help:"Print the outcome as one JSON object instead of text."`
}

func (c *replayCmd) name() string { return "replay" }
func (c *replayCmd) Run() error   { return readMain(c) }

func (c *replayCmd) Validate() error {
	switch {
	case c.Store != "":
		return errors.New("replay is online only: a running engine publishes the messages (give --nats URL); " +
			"offline replay from a store directory is not supported")
	case c.Offset < 0:
		return errors.New("--offset must be a queue offset (>= 0)")
	case c.Time.set && c.Time.ms <= 0:
		return errors.New("--time must be after 1970-01-01T00:00:00Z")
	case c.Rate < 0:
		return errors.New("--rate must be positive")
	case c.Rate > 0 && (c.MaxInFlight != 0 || c.AckWait != 0 || c.MaxDeliver != 0):
		return errors.New("--max-in-flight, --ack-wait and --max-deliver are for acked mode, not with --rate")
	case c.MaxInFlight < 0 || c.MaxInFlight > api.MaxMaxInFlight:
		return fmt.Errorf("--max-in-flight must be between 1 and %d", api.MaxMaxInFlight)
	case c.AckWait < 0 || c.MaxDeliver < 0:
		return errors.New("--ack-wait and --max-deliver must be positive")
	case c.To == "" || strings.ContainsAny(c.To, "*> \t\r\n"):
		return fmt.Errorf("--to %q: want a subject to publish on, without wildcards or spaces", c.To)
	}
	if err := c.Online.resolve(); err != nil {
		return err
	}
	if c.Online.NATS == "" {
		return errors.New("replay needs a running engine: give --nats URL (or set $NATS_URL)")
	}
	return nil
}

// replayOutcome is the JSON output: the plan, and what the end message said.
type replayOutcome struct {
	api.ReplayReply
	Topic string `json:"topic"`
	// Sent is the number of messages sent (the end message's count); absent with --no-wait.
	Sent  *int64 `json:"sent,omitempty"`
	Error string `json:"error,omitempty"`
}

func (c *replayCmd) request() api.ReplayRequest {
	req := api.ReplayRequest{Topic: c.Topic, Queues: c.Queue, Subject: c.To, StartOffset: c.Offset, Tags: c.Tags, FilterSubject: c.Subj,
		MaxInFlight: c.MaxInFlight, AckWaitMs: c.AckWait.Milliseconds(), MaxDeliver: c.MaxDeliver}
	if c.Time.set {
		req.StartOffset, req.StartTime = 0, c.Time.ms
	}
	if c.Rate > 0 {
		req.Mode, req.Rate = api.ReplayPaced, c.Rate
	}
	return req
}

func (c *replayCmd) execute(ctx context.Context, stdout, stderr io.Writer) error {
	src, err := c.Online.dial("replay")
	if err != nil {
		return err
	}
	defer src.close()
	var w *replayWatch
	if !c.NoWait {
		// Subscribe before the replay starts, so that nothing of it is missed.
		if w, err = watchReplays(src.nc, c.To); err != nil {
			return err
		}
		defer w.stop()
	}
	plan, err := src.c.Replay(ctx, c.request())
	if err != nil {
		return c.replayError(ctx, src, err)
	}
	if plan.ReplayID == "" {
		return src.notAPI(api.EndpointReplay)
	}
	out := replayOutcome{ReplayReply: *plan, Topic: c.Topic}
	if !c.JSON {
		c.printPlan(stdout, plan)
	}
	if c.NoWait {
		if c.JSON {
			return newJSONLines(stdout).put(out)
		}
		return nil
	}
	bar := replayProgress{w: stderr, on: isTTY(stderr), total: plan.MaxCount}
	end, err := w.wait(ctx, plan.ReplayID, bar.draw)
	bar.clear()
	if err != nil {
		return fmt.Errorf("stopped following replay %s (%w); the replay goes on in the engine", plan.ReplayID, err)
	}
	out.Sent, out.Error = &end.Count, end.Error
	if c.JSON {
		if err := newJSONLines(stdout).put(out); err != nil {
			return err
		}
	} else if end.Error == "" {
		fmt.Fprintf(stdout, "replay %s done: %d messages sent onto %s\n", plan.ReplayID, end.Count, plan.Subject)
	}
	if end.Error != "" {
		return fmt.Errorf("replay %s failed after %d messages: %s", plan.ReplayID, end.Count, end.Error)
	}
	return nil
}

// replayError explains why a replay did not start.
func (c *replayCmd) replayError(ctx context.Context, src *onlineSource, err error) error {
	switch api.CodeOf(err) {
	case api.CodeNotFound:
		if len(c.Queue) == 1 {
			return unknownQueue(ctx, src, c.Topic, c.Queue[0])
		}
		if _, oerr := src.offsets(ctx, c.Topic); isUnknownQueue(oerr) {
			return unknownTopic(ctx, src, c.Topic)
		}
	case api.CodeTooManyReplays:
		return fmt.Errorf("the engine at %s runs as many replays as it may: try again when one ends (%w)", src.url, err)
	}
	return src.explain(err)
}

func (c *replayCmd) printPlan(w io.Writer, plan *api.ReplayReply) {
	fmt.Fprintf(w, "replay %s: topic %s onto %s, %s, up to %d messages\n", plan.ReplayID, c.Topic, plan.Subject, plan.Mode, plan.MaxCount)
	tw := newTable(w)
	fmt.Fprintln(tw, "QUEUE\tFROM\tTO (EXCLUDED)")
	for _, q := range plan.Queues {
		fmt.Fprintf(tw, "%d\t%d\t%d\n", q.QueueID, q.StartOffset, q.StopOffset)
	}
	tw.Flush()
}

// replayWatch follows the replays on a subject: the highest sequence number seen and the end
// message of each, by replay id (the replay's id is known only once its plan is back, and its
// first messages may come before that).
type replayWatch struct {
	sub *nats.Subscription

	mu      sync.Mutex
	seqs    map[string]int64
	ends    map[string]api.ReplayEnd
	changed chan struct{} // a value after each change (capacity 1)
}

func watchReplays(nc *nats.Conn, subject string) (*replayWatch, error) {
	w := &replayWatch{seqs: map[string]int64{}, ends: map[string]api.ReplayEnd{}, changed: make(chan struct{}, 1)}
	sub, err := nc.Subscribe(subject, w.receive)
	if err != nil {
		return nil, fmt.Errorf("subscribe to %s: %w", subject, err)
	}
	// Counting is all the callback does: no limit on what may wait for it.
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		sub.Unsubscribe()
		return nil, err
	}
	if err := nc.Flush(); err != nil { // the server has the subscription before the replay starts
		sub.Unsubscribe()
		return nil, fmt.Errorf("subscribe to %s: %w", subject, err)
	}
	w.sub = sub
	return w, nil
}

func (w *replayWatch) receive(m *nats.Msg) {
	id := m.Header.Get(api.HeaderReplayID)
	if id == "" {
		return // not a replay's message
	}
	w.mu.Lock()
	if end, ok := api.ParseReplayEnd(m); ok {
		w.ends[id] = end
	} else if seq, err := strconv.ParseInt(m.Header.Get(api.HeaderReplaySeq), 10, 64); err == nil && seq > w.seqs[id] {
		w.seqs[id] = seq
	}
	w.mu.Unlock()
	select {
	case w.changed <- struct{}{}:
	default:
	}
}

// wait returns the end message of replay id, calling progress with the messages seen so far
// as they come.
func (w *replayWatch) wait(ctx context.Context, id string, progress func(seen int64)) (api.ReplayEnd, error) {
	for {
		w.mu.Lock()
		end, done := w.ends[id]
		seen := w.seqs[id]
		w.mu.Unlock()
		if done {
			return end, nil
		}
		progress(seen)
		select {
		case <-w.changed:
		case <-ctx.Done():
			return api.ReplayEnd{}, context.Cause(ctx)
		}
	}
}

func (w *replayWatch) stop() { _ = w.sub.Unsubscribe() }

// replayProgress draws "replay: 1234 / 5000 (24%)" on a terminal, at most ten times a second.
type replayProgress struct {
	w     io.Writer
	on    bool
	total int64
	last  time.Time
	drawn bool
}

func (p *replayProgress) draw(seen int64) {
	if !p.on || time.Since(p.last) < 100*time.Millisecond {
		return
	}
	p.last = time.Now()
	pct := 100.0
	if p.total > 0 {
		pct = float64(seen) * 100 / float64(p.total)
	}
	fmt.Fprintf(p.w, "\rreplay: %d / %d messages (%.0f%%)\x1b[K", seen, p.total, pct)
	p.drawn = true
}

func (p *replayProgress) clear() {
	if p.drawn {
		fmt.Fprint(p.w, "\r\x1b[K")
		p.drawn = false
	}
}
