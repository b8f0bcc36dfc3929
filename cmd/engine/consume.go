package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/rocketstore/engine/engine/api"
)

// consumeCmd is `engine consume`: it joins a consumer group as a member and writes the messages
// of the queues it is assigned to stdout, for shell pipelines, committing what it has written
// (docs/GROUPS.md). Several of them share a topic; a second signal, or --count, or --until-end
// stops it: it commits what it wrote and leaves, and the others take its queues at once.
//
// What is committed is what was written: the output is flushed before each commit, so a kill
// loses nothing, and what was written after the last commit is written again by whoever reads
// the queue next (at least once).
type consumeCmd struct {
	Online readNATSFlags `embed:""`

	Group    string `required:"" help:"The consumer group." placeholder:"GROUP"`
	Topic    string `required:"" help:"The topic to read (as stored: orders_eu for subject orders.eu)." placeholder:"TOPIC"`
	Subj     string `name:"subject" placeholder:"SUBJECT" help:"Only messages whose NATS subject matches this subject or pattern (the group's members share it)."`
	Start    string `help:"Where a group new to a queue starts: earliest (its first message) or latest (what comes after the group's first join)." enum:"earliest,latest" default:"earliest"`
	Format   string `help:"ndjson: one JSON object a message (get --json's); raw: each body followed by a newline." enum:"ndjson,raw" default:"ndjson"`
	Count    int64  `placeholder:"N" help:"Stop after N messages (0: no limit)."`
	UntilEnd bool   `name:"until-end" help:"Stop once every queue held is read to its end: drain a topic."`
	ClientID string `name:"client-id" placeholder:"NAME" help:"The member's name in engine groups describe (default: host and process id)."`
	Batch    int    `placeholder:"N" help:"Messages per batched read (default 2048, api.DefaultMemberMaxBatch)."`
}

func (c *consumeCmd) name() string { return "consume" }
func (c *consumeCmd) Run() error   { return readMain(c) }

func (c *consumeCmd) Validate() error {
	if c.Count < 0 || c.Batch < 0 {
		return errors.New("--count and --batch must be positive")
	}
	if err := c.Online.resolve(); err != nil {
		return err
	}
	if c.Online.NATS == "" {
		return errors.New("consume needs a running engine: give --nats URL (or set $NATS_URL)")
	}
	return nil
}

func (c *consumeCmd) execute(ctx context.Context, stdout, stderr io.Writer) error {
	// A member lives as long as it runs: it rides through reconnects (an engine restarting its
	// embedded server), unlike the one-shot read commands.
	opts := []nats.Option{nats.Name("rocketstore engine consume"), nats.Timeout(c.Online.Timeout), nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond)}
	if c.Online.Creds != "" {
		opts = append(opts, nats.UserCredentials(c.Online.Creds))
	}
	nc, err := nats.Connect(c.Online.NATS, opts...)
	if err != nil {
		return fmt.Errorf("cannot connect to NATS at %s: %w", c.Online.NATS, err)
	}
	defer nc.Close()
	copts := []api.Option{api.WithPrefix(c.Online.APIPrefix), api.WithTimeout(c.Online.Timeout)}
	if c.Online.Partitions > 0 {
		copts = append(copts, api.WithPartitions(c.Online.Partitions))
	}
	client := api.NewClient(nc, copts...)
	id := c.ClientID
	if id == "" {
		host, _ := os.Hostname()
		id = fmt.Sprintf("%s pid %d", host, os.Getpid())
	}
	m, err := client.Join(ctx, api.MemberConfig{Group: c.Group, Topic: c.Topic, Subject: c.Subj, ClientID: id,
		Start: c.Start, ManualCommit: true, MaxBatch: c.Batch})
	if err != nil {
		return explainJoin(c.Online.NATS, err)
	}
	w := bufio.NewWriterSize(stdout, 64<<10)
	n, runErr := c.copy(ctx, m, w, stderr)
	// Whatever stopped it: what was written is flushed, committed, and the member leaves.
	closeCtx, cancel := context.WithTimeout(context.Background(), c.Online.Timeout)
	defer cancel()
	flushErr := w.Flush()
	if flushErr != nil {
		runErr = errors.Join(runErr, flushErr) // not all written: do not commit the rest
		m.Abandon()
	} else if err := m.Close(closeCtx); err != nil {
		runErr = errors.Join(runErr, fmt.Errorf("commit and leave: %w", err))
	}
	if isTTY(stderr) {
		fmt.Fprintf(stderr, "\r%d messages\n", n)
	}
	if errors.Is(runErr, context.Canceled) && ctx.Err() != nil {
		return nil // a signal: a clean stop
	}
	return runErr
}

// copy writes messages to w until the count, the end (--until-end) or an error, flushing and
// committing after every batch it had at hand. It returns how many it wrote.
func (c *consumeCmd) copy(ctx context.Context, m *api.Member, w *bufio.Writer, stderr io.Writer) (int64, error) {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	tty := isTTY(stderr)
	var n int64
	last := time.Now()
	next := ctx
	if c.UntilEnd {
		// A watcher ends the wait for messages once every queue held is read to its end, rather
		// than a timeout on every Next: a context with a timer per message was a third of the
		// command's CPU.
		var atEnd context.CancelFunc
		next, atEnd = context.WithCancel(ctx)
		defer atEnd()
		go watchEnd(next, m, atEnd)
	}
	for c.Count == 0 || n < c.Count {
		rec, err := m.Next(next)
		if err != nil && next.Err() != nil && ctx.Err() == nil {
			break // at the end (what was handed out is written and committed: Next asks only then)
		}
		if err != nil {
			return n, err
		}
		if c.Format == "raw" {
			w.Write(rec.Body())
			err = w.WriteByte('\n')
		} else {
			err = enc.Encode(rec.Message())
		}
		if err != nil {
			return n, err
		}
		n++
		// The batch at hand is written: flush it, then commit it (Commit marks the message
		// just written as handled too).
		if m.Buffered() == 0 || w.Buffered() > 48<<10 || (c.Count > 0 && n == c.Count) {
			if err := w.Flush(); err != nil {
				return n, err
			}
			if err := m.Commit(ctx); err != nil && ctx.Err() == nil {
				fmt.Fprintf(stderr, "engine consume: commit: %v (committed again with the next batch)\n", err)
			}
		}
		if tty && time.Since(last) > 200*time.Millisecond {
			fmt.Fprintf(stderr, "\r%d messages", n)
			last = time.Now()
		}
	}
	return n, nil
}

// explainJoin turns a join's refusal into what to do.
func explainJoin(url string, err error) error {
	switch api.CodeOf(err) {
	case api.CodeNotFound:
		return fmt.Errorf("%w (engine topics lists the topics)", err)
	case api.CodeConflict:
		return fmt.Errorf("%w (the group's members read with that filter: use it, or another group)", err)
	case api.CodeTooMany:
		return fmt.Errorf("%w (the engine's group settings bound it: docs/GROUPS.md, Settings)", err)
	}
	if errors.Is(err, nats.ErrNoResponders) {
		return fmt.Errorf("no engine answers at %s (is it running with the read API on?)", url)
	}
	return err
}

// endPoll is how often --until-end looks whether the member is at the end.
const endPoll = 25 * time.Millisecond

// watchEnd calls atEnd once the member has read every queue it holds to its end and has nothing
// left to hand out, or ctx ends.
func watchEnd(ctx context.Context, m *api.Member, atEnd context.CancelFunc) {
	t := time.NewTicker(endPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if m.AtEnd() {
				atEnd()
				return
			}
		}
	}
}
