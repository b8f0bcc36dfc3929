package benchmarks

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/nats-io/nats.go"

	"github.com/rocketstore/engine/engine/api"
)

// A consumer group member as a process of its own (engine/api's Member, the Go member): issue
// 28's throughput, rebalance, duplicates and tailing. It handles a message by counting it, and in
// churn mode also by writing its (queue, offset) to the parent before it asks for the next one,
// so that what a member handled is known outside it even after a kill -9: the pipe holds every
// line written. It commits by hand (ManualCommit), every CommitEvery, what it has handled, and
// says so after the commit is answered.

// Member modes.
const (
	memberThroughput = "throughput" // join at "go", read to the end, report, leave at "stop"
	memberChurn      = "churn"      // join at once, report each message handled, leave at "leave"/"stop"
	memberTail       = "tail"       // join at once, record publish-to-member latency, leave at "stop"
)

// g28MemberConfig configures a member child.
type g28MemberConfig struct {
	URL         string        `json:"url"`
	Group       string        `json:"group"`
	Topic       string        `json:"topic"`
	Mode        string        `json:"mode"`
	Name        string        `json:"name"`
	CommitEvery time.Duration `json:"commit_every"`
	MaxBatch    int           `json:"max_batch,omitempty"`
	// After (tail mode): only messages published from then on (monotonic ns) are timed.
	After int64 `json:"after,omitempty"`
	// CPUProfile, when set, is where the member writes a CPU profile of its run (join to end).
	CPUProfile string `json:"cpu_profile,omitempty"`
}

// g28MemberResult is a member's report.
type g28MemberResult struct {
	Got        Tally `json:"got"`
	Start, End int64 // "go" (throughput) or the join, and the last message handled (monotonic ns)
	Usage      Usage `json:"usage"`
	// Latency: publish to member, tail mode (encoded HdrHistogram, µs).
	Latency string `json:"latency,omitempty"`
	Commits int64  `json:"commits"`
}

type g28Member struct {
	cfg g28MemberConfig
	c   *g28Child
	m   *api.Member

	mu   sync.Mutex // held, first: from OnAssign (under the member's lock) and the loop
	held map[int32]bool
	// first: queues newly held whose first message is not handed out yet.
	first map[int32]bool
}

func g28MemberMain(ctx context.Context, raw json.RawMessage, c *g28Child) error {
	g := &g28Member{c: c, held: map[int32]bool{}, first: map[int32]bool{}}
	if err := json.Unmarshal(raw, &g.cfg); err != nil {
		return err
	}
	nc, err := nats.Connect(g.cfg.URL, nats.Name("bench-member-"+g.cfg.Name))
	if err != nil {
		return err
	}
	defer nc.Close()
	if g.cfg.Mode == memberThroughput {
		if err := c.send(g28Line{Ready: true}); err != nil {
			return err
		}
		if err := c.await(ctx, "go"); err != nil {
			return err
		}
	}
	stopProfile, err := startCPUProfile(g.cfg.CPUProfile)
	if err != nil {
		return err
	}
	defer stopProfile()
	before := selfUsage()
	start := time.Now()
	client := api.NewClient(nc, api.WithTimeout(5*time.Second))
	g.m, err = client.Join(ctx, api.MemberConfig{Group: g.cfg.Group, Topic: g.cfg.Topic, ClientID: g.cfg.Name,
		ManualCommit: true, MaxBatch: g.cfg.MaxBatch, OnAssign: g.onAssign})
	if err != nil {
		return err
	}
	if g.cfg.Mode != memberThroughput {
		if err := c.send(g28Line{Ready: true, Mono: monoNanos(start)}); err != nil {
			return err
		}
	}
	res, leaveStart, err := g.loop(ctx)
	res.Start, res.Usage = monoNanos(start), selfUsage().Sub(before)
	_ = stopProfile()
	if err != nil {
		g.m.Abandon()
		return err
	}
	if g.cfg.Mode == memberThroughput { // at the end: report, then leave when the others are done too
		if err := c.result(res); err != nil {
			return err
		}
		_ = c.await(ctx, "stop")
		leaveStart = time.Now()
	}
	cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lerr := g.m.Close(cctx)
	left := g28Left{Start: monoNanos(leaveStart), End: monoNanos(time.Now())}
	if lerr != nil {
		left.Err = lerr.Error()
	}
	if err := c.send(g28Line{Left: &left}); err != nil {
		return err
	}
	if g.cfg.Mode != memberThroughput {
		return c.result(res)
	}
	return nil
}

// onAssign notes the queues newly held (their first message is an event) and tells the parent.
// It runs under the member's lock: it only records and writes a line.
func (g *g28Member) onAssign(queues []int32) {
	g.mu.Lock()
	now := set(queues)
	for q := range now {
		if !g.held[q] {
			g.first[q] = true
		}
	}
	for q := range g.first {
		if !now[q] {
			delete(g.first, q)
		}
	}
	g.held = now
	g.mu.Unlock()
	_ = g.c.send(g28Line{Assign: &g28Assign{Queues: slices.Clone(queues), Mono: monoNanos(time.Now())}})
}

func set(qs []int32) map[int32]bool {
	m := make(map[int32]bool, len(qs))
	for _, q := range qs {
		m[q] = true
	}
	return m
}

// clockEvery is how many messages a throughput member hands out between two looks at the clock
// for its commits (every CommitEvery): at 2 M msgs/s, 0.1 ms.
const clockEvery = 256

// loop hands out messages until the end (throughput), or a "leave" or "stop" command. It
// returns when the member should leave, and when the leave began.
func (g *g28Member) loop(ctx context.Context) (g28MemberResult, time.Time, error) {
	var res g28MemberResult
	var last time.Time
	nctx, cancelNext := context.WithCancel(ctx)
	defer cancelNext()
	var leaveAt time.Time
	var leaveMu sync.Mutex
	go func() {
		if g.cfg.Mode == memberThroughput {
			return // it reads to the end; main waits for "stop" itself
		}
		for cmd := range g.c.cmds {
			if cmd == "leave" || cmd == "stop" {
				leaveMu.Lock()
				leaveAt = time.Now()
				leaveMu.Unlock()
				cancelNext()
				return
			}
		}
		cancelNext() // stdin ended: the parent is gone
	}()
	hist := newLatencyHistogram()
	lastCommit := time.Now()
	handedOut := 0
	handled := map[int32]int64{} // one past the last offset handled, per queue
	commit := func() error {
		if err := g.m.Commit(ctx); err != nil {
			g.c.log.Warn().Err(err).Str("member", g.cfg.Name).Msg("commit")
			return nil // fenced or a timeout: the next commit goes on, as engine consume's
		}
		res.Commits++
		lastCommit = time.Now()
		if g.cfg.Mode == memberChurn {
			g.mu.Lock()
			var c []g28Range
			for q, off := range handled {
				if g.held[q] {
					c = append(c, g28Range{Queue: q, To: off})
				}
			}
			g.mu.Unlock()
			return g.c.send(g28Line{Commit: c})
		}
		return nil
	}
	for {
		next := nctx
		var cancel context.CancelFunc = func() {}
		if g.cfg.Mode == memberThroughput && g.m.Buffered() == 0 {
			if g.m.AtEnd() { // (AtEnd is known with the last batch: now is when the last was handled)
				res.End = monoNanos(time.Now())
				return res, time.Time{}, nil
			}
			next, cancel = context.WithTimeout(nctx, 50*time.Millisecond)
		}
		rec, err := g.m.Next(next)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) && nctx.Err() == nil {
			continue
		}
		if err != nil {
			if nctx.Err() != nil && ctx.Err() == nil { // asked to leave
				leaveMu.Lock()
				at := leaveAt
				leaveMu.Unlock()
				res.End = monoNanos(last)
				return res, at, g.finish(&res, hist)
			}
			return res, time.Time{}, err
		}
		if g.cfg.Mode != memberThroughput {
			last = time.Now()
		}
		body := rec.Body()
		res.Got.Add(body)
		q, off := rec.QueueID(), rec.QueueOffset()
		switch g.cfg.Mode {
		case memberTail:
			if len(body) >= 16 {
				if sent := int64(binary.BigEndian.Uint64(body[8:])); sent >= g.cfg.After {
					recordLatency(hist, time.Duration(machineMonotonic(last)-sent))
				}
			}
		case memberChurn:
			l := g28Line{Handled: []g28Range{{Queue: q, From: off, To: off + 1}}}
			g.mu.Lock()
			if g.first[q] {
				delete(g.first, q)
				l.First = &g28First{Queue: q, Offset: off, Mono: monoNanos(last)}
			}
			g.mu.Unlock()
			if err := g.c.send(l); err != nil { // handled once the parent has it
				return res, time.Time{}, err
			}
			handled[q] = off + 1
		}
		// A throughput member looks at the clock every clockEvery messages, not at each: a
		// clock read per message (time.Since) was 9 % of its CPU, the harness's cost rather than
		// the member's (JetStream's reader reads no clock per message).
		handedOut++
		if g.cfg.CommitEvery > 0 && (g.cfg.Mode != memberThroughput || handedOut%clockEvery == 0) &&
			time.Since(lastCommit) >= g.cfg.CommitEvery {
			if err := commit(); err != nil {
				return res, time.Time{}, err
			}
		}
	}
}

// finish fills in the latency of a tail member.
func (g *g28Member) finish(res *g28MemberResult, hist *hdrhistogram.Histogram) error {
	if g.cfg.Mode != memberTail {
		return nil
	}
	enc, err := encodeHistogram(hist)
	res.Latency = enc
	return err
}
