package benchmarks

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"
)

// Issue 28's rebalance and duplicates: a group of 4 members (processes, engine/api's Member)
// reads a topic of 4 queues while a publisher keeps it growing (ChurnRate msgs/s). Then, Churn
// times each:
//
//  1. a member leaves cleanly (Close: it commits what it handled, then leaves); the time from the
//     start of its Close to its queues' first message handed out by the others; then a new
//     member joins, and the time from the start of its join to its first message of each queue
//     it gets;
//  2. a member is killed with SIGKILL; the time from the kill to its queues' first message
//     handed out by the others (the session timeout, 3 s by default, is most of it); then a new
//     member joins.
//
// Every member writes each message it handles, (queue, offset), to the parent before it asks
// for the next (the pipe keeps what was written when a member is killed), and what it committed
// once the commit is answered; members commit every second. At the end the publisher stops,
// the members read to the end and leave, and the parent checks from outside: every message
// handled at least once; none handled twice across the clean leaves and joins; after each kill,
// the messages handled twice are all the killed member's (handled past its last commit), and
// their count is set against the engine's rocketstore_group_redelivered_messages_total.

// ChurnReport is the churn part.
type ChurnReport struct {
	Rate      float64       `json:"rate"`
	Session   time.Duration `json:"session"`
	Leaves    []ChurnEvent  `json:"leaves"`
	Joins     []ChurnEvent  `json:"joins"`
	Kills     []ChurnEvent  `json:"kills"`
	KillJoins []ChurnEvent  `json:"kill_joins"`
	// Published and Handled: messages the publisher sent, and (queue, offset)s handled in all.
	Published, Handled int64
	// Missing: offsets below the queues' ends no member handled (at least once: must be 0).
	Missing int64
	// DupClean: offsets handled twice in the clean phase (must be 0); DupKill: in the kill
	// phase, in the killed members' windows; DupOutside: in the kill phase, outside them.
	DupClean, DupKill, DupOutside int64
	// Redelivered: the engine's count over the kill phase (and over the clean phase: 0).
	Redelivered, RedeliveredClean int64
	Problems                      []string `json:"problems,omitempty"`
	PublisherCPU                  time.Duration
	// Ends are the queues' end offsets once the load stopped.
	Ends map[int32]int64
}

// ChurnEvent is one leave, join or kill and how long until its queues were read.
type ChurnEvent struct {
	Member string        `json:"member"`
	Queues []int32       `json:"queues"`
	Took   time.Duration `json:"took"`
	// Window (kills): what the killed member handled past its last commit; Dups: of it, what
	// another member handled again; Redelivered: the engine's count for this kill.
	Window, Dups, Redelivered int64
	// Kills, per queue: the killed member's last commit it was told of, one past the last
	// message it handled, and where the next owner resumed (the engine's committed offset).
	Committed, Handled, Resumed map[int32]int64 `json:",omitempty"`
	Problem                     string          `json:"problem,omitempty"`
}

const (
	churnSubject = SubjectPrefix + ".churn"
	churnTopic   = "bench_churn"
)

// churnState is what the parent knows of the members, from their lines.
type churnState struct {
	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every change
	members map[string]*churnMember
	firsts  []churnFirst
}

type churnFirst struct {
	member string
	g28First
}

type churnMember struct {
	name      string
	p         *g28Proc
	joinMono  int64
	ready     bool
	held      []int32
	handled   map[int32][]g28Range // merged runs of offsets handled
	maxDone   map[int32]int64      // one past the highest offset handled
	committed map[int32]int64
	left      *g28Left
	ended     bool   // its output ended (it exited or was killed)
	err       string // an error line
}

func newChurnState() *churnState {
	return &churnState{changed: make(chan struct{}), members: map[string]*churnMember{}}
}

// notify wakes the waiters; st.mu held.
func (st *churnState) notify() {
	close(st.changed)
	st.changed = make(chan struct{})
}

// wait waits until cond (called under st.mu) holds, or the deadline.
func (st *churnState) wait(ctx context.Context, d time.Duration, what string, cond func() bool) error {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		st.mu.Lock()
		ok, ch := cond(), st.changed
		st.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-deadline.C:
			return fmt.Errorf("%s: not within %s", what, d)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// follow reads a member's lines into the state until its output ends.
func (st *churnState) follow(m *churnMember) {
	for l := range m.p.lines {
		st.mu.Lock()
		switch {
		case l.Error != "":
			m.err = l.Error
		case l.Ready:
			m.ready, m.joinMono = true, l.Mono
		case l.Assign != nil:
			m.held = l.Assign.Queues
		case l.Left != nil:
			m.left = l.Left
		}
		if l.First != nil {
			st.firsts = append(st.firsts, churnFirst{member: m.name, g28First: *l.First})
		}
		for _, h := range l.Handled {
			rs := m.handled[h.Queue]
			if n := len(rs); n > 0 && rs[n-1].To == h.From {
				rs[n-1].To = h.To
			} else {
				rs = append(rs, h)
			}
			m.handled[h.Queue] = rs
			m.maxDone[h.Queue] = max(m.maxDone[h.Queue], h.To)
		}
		for _, c := range l.Commit {
			m.committed[c.Queue] = max(m.committed[c.Queue], c.To)
		}
		st.notify()
		st.mu.Unlock()
	}
	st.mu.Lock()
	m.ended = true
	st.notify()
	st.mu.Unlock()
}

type churnRunner struct {
	o      *Issue28Options
	e      *g28Engine
	st     *churnState
	rep    *ChurnReport
	next   int // the next member's number
	rng    *rand.Rand
	killed map[string]bool
}

func runChurn(ctx context.Context, o *Issue28Options, dir string) (*ChurnReport, error) {
	rep := &ChurnReport{Rate: o.ChurnRate, Session: 3 * time.Second}
	e, err := startEngine(ctx, o.Exe, filepath.Join(dir, "engine"), "--flush", "async")
	if err != nil {
		return rep, err
	}
	defer func() { _ = e.stop() }()
	c := &churnRunner{o: o, e: e, st: newChurnState(), rep: rep, rng: rand.New(rand.NewPCG(28, 28)), killed: map[string]bool{}}
	pub, err := startG28(ctx, o.Exe, roleG28Publish, "load",
		g28PublishConfig{URL: e.url, Subject: churnSubject, Rate: o.ChurnRate, Body: 128}, o.Stderr)
	if err != nil {
		return rep, err
	}
	defer pub.kill()
	if _, err := pub.ready(ctx); err != nil {
		return rep, err
	}
	if err := pub.command("go"); err != nil {
		return rep, err
	}
	if _, err := waitStored(ctx, e.url, churnTopic, 4); err != nil {
		return rep, err
	}
	defer c.stopAll()
	for range 4 {
		if _, err := c.start(ctx); err != nil {
			return rep, err
		}
	}
	if err := c.stable(ctx, ""); err != nil {
		return rep, err
	}
	o.status("churn: 4 members reading, %d clean leaves and joins", o.Churn)
	for i := range o.Churn {
		c.leaveAndJoin(ctx, i)
		if ctx.Err() != nil {
			return rep, ctx.Err()
		}
	}
	rep.RedeliveredClean = c.redelivered()
	cleanEnd := c.handledCopy()
	o.status("churn: %d kills", o.Churn)
	for i := range o.Churn {
		c.killAndJoin(ctx, i)
		if ctx.Err() != nil {
			return rep, ctx.Err()
		}
	}
	rep.Redelivered = c.redelivered() - rep.RedeliveredClean

	// The end: the load stops, the members read to the end, leave; then the sums.
	if err := pub.command("stop"); err != nil {
		return rep, err
	}
	var pres g28PublishResult
	if err := pub.result(ctx, &pres); err != nil {
		return rep, err
	}
	_ = pub.wait()
	rep.Published, rep.PublisherCPU = pres.Sent.Count, pres.Usage.CPU()
	ends, err := waitStored(ctx, e.url, churnTopic, pres.Sent.Count)
	if err != nil {
		return rep, err
	}
	if err := c.st.wait(ctx, time.Minute, "the members reading to the end", func() bool { return c.coveredLocked(ends) }); err != nil {
		rep.Problems = append(rep.Problems, err.Error())
	}
	c.stopAll()
	rep.Ends = ends
	c.sums(ends, cleanEnd)
	return rep, nil
}

// start starts a member and waits for its join.
func (c *churnRunner) start(ctx context.Context) (*churnMember, error) {
	name := fmt.Sprintf("m%d", c.next)
	c.next++
	p, err := startG28(ctx, c.o.Exe, roleG28Member, name, g28MemberConfig{URL: c.e.url, Group: "churn", Topic: churnTopic,
		Mode: memberChurn, Name: name, CommitEvery: time.Second}, c.o.Stderr)
	if err != nil {
		return nil, err
	}
	m := &churnMember{name: name, p: p, handled: map[int32][]g28Range{}, maxDone: map[int32]int64{}, committed: map[int32]int64{}}
	c.st.mu.Lock()
	c.st.members[name] = m
	c.st.mu.Unlock()
	go c.st.follow(m)
	err = c.st.wait(ctx, 30*time.Second, name+" joining", func() bool { return m.ready || m.ended })
	if err == nil && !m.ready {
		err = fmt.Errorf("%s ended before it joined: %s", name, m.err)
	}
	return m, err
}

// live are the members running; st.mu held.
func (c *churnRunner) liveLocked() []*churnMember {
	var out []*churnMember
	for _, m := range c.st.members {
		if !m.ended && m.left == nil && !c.killed[m.name] {
			out = append(out, m)
		}
	}
	slices.SortFunc(out, func(a, b *churnMember) int { return cmp.Compare(a.joinMono, b.joinMono) })
	return out
}

// stable waits until 4 members hold one queue each, and fresh (if set) has handed out a message
// of its queue.
func (c *churnRunner) stable(ctx context.Context, fresh string) error {
	return c.st.wait(ctx, 30*time.Second, "4 members holding a queue each", func() bool {
		live := c.liveLocked()
		if len(live) != 4 {
			return false
		}
		for _, m := range live {
			if len(m.held) != 1 {
				return false
			}
			if m.name == fresh && len(m.handled[m.held[0]]) == 0 {
				return false
			}
		}
		return true
	})
}

// readBy waits until every queue of qs was handed out by a member other than gone, after
// since, and returns the latest of those first messages' times.
func (c *churnRunner) readBy(ctx context.Context, qs []int32, gone string, since int64, d time.Duration) (int64, error) {
	var last int64
	err := c.st.wait(ctx, d, fmt.Sprintf("queues %v read by others", qs), func() bool {
		last = 0
		for _, q := range qs {
			var at int64
			for _, f := range c.st.firsts {
				if f.Queue == q && f.member != gone && f.Mono > since {
					at = f.Mono
					break
				}
			}
			if at == 0 {
				return false
			}
			last = max(last, at)
		}
		return true
	})
	return last, err
}

// pick chooses a live member at random.
func (c *churnRunner) pick() *churnMember {
	c.st.mu.Lock()
	defer c.st.mu.Unlock()
	live := c.liveLocked()
	return live[c.rng.IntN(len(live))]
}

// leaveAndJoin: a clean leave, then a new member's join.
func (c *churnRunner) leaveAndJoin(ctx context.Context, i int) {
	m := c.pick()
	c.st.mu.Lock()
	qs := slices.Clone(m.held)
	c.st.mu.Unlock()
	ev := ChurnEvent{Member: m.name, Queues: qs}
	if err := m.p.command("leave"); err != nil {
		ev.Problem = err.Error()
	}
	err := c.st.wait(ctx, 30*time.Second, m.name+" leaving", func() bool { return m.left != nil || m.ended })
	if err == nil && m.left == nil {
		err = fmt.Errorf("%s ended without leaving: %s", m.name, m.err)
	}
	if err == nil && m.left.Err != "" {
		err = fmt.Errorf("%s: leave: %s", m.name, m.left.Err)
	}
	if err == nil {
		var at int64
		if at, err = c.readBy(ctx, qs, m.name, m.left.Start, 30*time.Second); err == nil {
			ev.Took = time.Duration(at - m.left.Start)
		}
	}
	if err != nil {
		ev.Problem = err.Error()
	}
	_ = m.p.wait()
	c.rep.Leaves = append(c.rep.Leaves, ev)
	c.join(ctx, &c.rep.Joins, i, "leave")
}

// killAndJoin: a kill -9, then a new member's join.
func (c *churnRunner) killAndJoin(ctx context.Context, i int) {
	before := c.redelivered()
	m := c.pick()
	c.st.mu.Lock()
	qs := slices.Clone(m.held)
	c.killed[m.name] = true
	c.st.mu.Unlock()
	ev := ChurnEvent{Member: m.name, Queues: qs}
	t0 := monoNanos(time.Now())
	if err := m.p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		ev.Problem = err.Error()
	}
	_ = m.p.wait()
	at, err := c.readBy(ctx, qs, m.name, t0, 30*time.Second)
	if err == nil {
		ev.Took = time.Duration(at - t0)
		ev.Committed, ev.Handled, ev.Resumed = map[int32]int64{}, map[int32]int64{}, map[int32]int64{}
		c.st.mu.Lock()
		for _, q := range qs {
			ev.Committed[q], ev.Handled[q] = m.committed[q], m.maxDone[q]
			for _, f := range c.st.firsts {
				if f.Queue == q && f.member != m.name && f.Mono > t0 {
					ev.Resumed[q] = f.Offset
					break
				}
			}
		}
		c.st.mu.Unlock()
		// Until the others have read past what it handled, the engine has not counted it all.
		err = c.st.wait(ctx, 30*time.Second, "the killed member's window read again", func() bool {
			for _, q := range qs {
				reached := false
				for _, o := range c.st.members {
					if o != m && o.maxDone[q] >= m.maxDone[q] {
						reached = true
					}
				}
				if !reached {
					return false
				}
			}
			return true
		})
	}
	if err != nil {
		ev.Problem = err.Error()
	}
	ev.Redelivered = c.redelivered() - before
	c.rep.Kills = append(c.rep.Kills, ev)
	c.join(ctx, &c.rep.KillJoins, i, "kill")
}

// join starts a new member and measures its join: from its join's start to its first message
// of every queue it was given.
func (c *churnRunner) join(ctx context.Context, evs *[]ChurnEvent, i int, after string) {
	m, err := c.start(ctx)
	ev := ChurnEvent{}
	if err == nil {
		ev.Member = m.name
		err = c.stable(ctx, m.name)
	}
	if err == nil {
		c.st.mu.Lock()
		ev.Queues = slices.Clone(m.held)
		var last int64
		for _, f := range c.st.firsts {
			if f.member == m.name {
				last = max(last, f.Mono)
			}
		}
		ev.Took = time.Duration(last - m.joinMono)
		c.st.mu.Unlock()
	}
	if err != nil {
		ev.Problem = err.Error()
	}
	*evs = append(*evs, ev)
	c.o.status("churn: %s %d: %s took %s, join %s took %s", after, i+1, lastEvent(c.rep, after).Member,
		lastEvent(c.rep, after).Took.Round(time.Millisecond), ev.Member, ev.Took.Round(time.Millisecond))
}

func lastEvent(r *ChurnReport, after string) ChurnEvent {
	evs := r.Leaves
	if after == "kill" {
		evs = r.Kills
	}
	if len(evs) == 0 {
		return ChurnEvent{}
	}
	return evs[len(evs)-1]
}

// redelivered reads the engine's count of redelivered messages (-1 if it cannot).
func (c *churnRunner) redelivered() int64 {
	v, err := c.e.metric("rocketstore_group_redelivered_messages_total")
	if err != nil {
		return -1
	}
	return int64(v)
}

// stopAll makes every live member leave and waits for them.
func (c *churnRunner) stopAll() {
	c.st.mu.Lock()
	live := c.liveLocked()
	c.st.mu.Unlock()
	for _, m := range live {
		_ = m.p.command("stop")
	}
	for _, m := range live {
		_ = m.p.wait()
	}
}

// coveredLocked: every queue's offsets up to its end were handled by someone.
func (c *churnRunner) coveredLocked(ends map[int32]int64) bool {
	for q, end := range ends {
		var top int64
		for _, m := range c.st.members {
			top = max(top, m.maxDone[q])
		}
		if top < end {
			return false
		}
	}
	return true
}

// handledCopy is a copy of every member's handled runs now.
func (c *churnRunner) handledCopy() map[string]map[int32][]g28Range {
	c.st.mu.Lock()
	defer c.st.mu.Unlock()
	out := map[string]map[int32][]g28Range{}
	for name, m := range c.st.members {
		out[name] = map[int32][]g28Range{}
		for q, rs := range m.handled {
			out[name][q] = slices.Clone(rs)
		}
	}
	return out
}

// churnWindow is a killed member's uncommitted window in a queue: what it handled from its last
// commit on.
type churnWindow struct {
	kill     int
	from, to int64
}

// sums counts, per queue, how many times each offset was handled (from every member's runs)
// and fills in the report's totals and each kill's window and duplicates.
func (c *churnRunner) sums(ends map[int32]int64, clean map[string]map[int32][]g28Range) {
	c.st.mu.Lock()
	defer c.st.mu.Unlock()
	r := c.rep
	windows := map[int32][]churnWindow{}
	for k := range r.Kills {
		ev := &r.Kills[k]
		m := c.st.members[ev.Member]
		if m == nil {
			continue
		}
		for _, q := range ev.Queues {
			// What it handled from its last commit on (a member killed before its first
			// commit: all it handled).
			for _, rg := range m.handled[q] {
				w := churnWindow{kill: k, from: max(rg.From, m.committed[q]), to: rg.To}
				if w.to > w.from {
					ev.Window += w.to - w.from
					windows[q] = append(windows[q], w)
				}
			}
		}
	}
	counts := func(members map[string]map[int32][]g28Range, q int32, end int64) []uint16 {
		n := make([]uint16, end)
		for _, byQ := range members {
			for _, rg := range byQ[q] {
				for off := rg.From; off < min(rg.To, end); off++ {
					n[off]++
				}
			}
		}
		return n
	}
	all := map[string]map[int32][]g28Range{}
	for name, m := range c.st.members {
		all[name] = m.handled
	}
	for q, end := range ends {
		n := counts(all, q, end)
		for _, k := range n {
			r.Handled += int64(k)
			if k == 0 {
				r.Missing++
			}
		}
		// Each kill's: the offsets of its window handled again (an offset in the windows of two
		// kills, a member killed while it caught up on another's, counts for both).
		for _, w := range windows[q] {
			for off := w.from; off < min(w.to, end); off++ {
				if n[off] > 1 {
					r.Kills[w.kill].Dups++
				}
			}
		}
		// The clean phase's duplicates, from its snapshot.
		cleanN := counts(clean, q, end)
		for _, k := range cleanN {
			if k > 1 {
				r.DupClean += int64(k - 1)
			}
		}
		for off, k := range n {
			extra := int64(k) - max(int64(cleanN[off]), 1)
			if k < 2 || extra <= 0 {
				continue // not a duplicate made in the kill phase
			}
			in := false
			for _, w := range windows[q] {
				if int64(off) >= w.from && int64(off) < w.to {
					in = true
					break
				}
			}
			if in {
				r.DupKill += extra
			} else {
				r.DupOutside += extra
			}
		}
	}
}
