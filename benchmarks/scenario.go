package benchmarks

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
)

// TargetConfig is what the target child process is given.
type TargetConfig struct {
	Run Run `json:"run"`
	// Dir is the run's scratch directory; the parent removes it after verification.
	Dir string `json:"dir"`
}

// Target is a system under test. It runs in the target child process, so that its CPU time and
// peak RSS are its own; the publishers are another process.
type Target interface {
	// Start brings the target up and returns the NATS URL publishers connect to. It returns once
	// the target takes messages (its subscriptions are confirmed by the server).
	Start(ctx context.Context) (url string, err error)
	// Await returns once the target holds n messages, with the time it took the n-th (for an
	// engine: stored and dispatched). It fails when nothing progresses for stall, or when ctx
	// ends; what is missing is then what verification reports.
	Await(ctx context.Context, n int64, stall time.Duration) (time.Time, error)
	// Stop shuts the target down cleanly (an engine drains, syncs and closes its store).
	Stop() error
	// Report is what the target counted; called after Stop.
	Report() TargetReport
}

// TargetReport is what a target counted itself.
type TargetReport struct {
	// Received is the tally of the bodies a ceiling took (nil for a store, which verification
	// reads back instead); Replies counts the replies it published.
	Received *Tally `json:"received,omitempty"`
	Replies  int64  `json:"replies,omitempty"`
	// Preloaded is what the target stored itself before it was ready (one message per queue of
	// every topic, see TargetOptions.Cold); verification takes it out of what it finds.
	Preloaded Tally `json:"preloaded"`
	// Syncs and Synced count the syncs of a target that counts them (not the ceilings, not
	// JetStream) and the messages they covered, over the measurement.
	Syncs  int64 `json:"syncs,omitempty"`
	Synced int64 `json:"synced,omitempty"`
	// Generated is, for a self-loaded scenario (no publishers), what the target produced
	// itself, from Start (unix ns) on.
	Generated *Tally `json:"generated,omitempty"`
	Start     int64  `json:"start,omitempty"`
	// Engine is set for an engine target.
	Engine *EngineReport `json:"engine,omitempty"`
	// Dropped counts the messages the target's NATS client dropped past its pending limits
	// (for a target that counts them: Scenario.CountsDrops).
	Dropped int64 `json:"dropped,omitempty"`
}

// VerifyInput is what a scenario's Verify checks, in the parent, after both children exited.
type VerifyInput struct {
	Run Run
	Dir string
	// Sent is the publishers' tally (what they claim to have sent, a skipped message included);
	// SentBy the messages each publisher claims, by its index (message i of publisher p, for i
	// below SentBy[p], has sequence number seqOf(p, i)).
	Sent   Tally
	SentBy []int64
	Target TargetReport
}

// preloadedOut takes what the target preloaded out of what verification found, so that found
// and sent can be compared (tallies add, so they subtract exactly).
func (in VerifyInput) preloadedOut(found Tally) Tally {
	p := in.Target.Preloaded
	return Tally{Count: found.Count - p.Count, Bytes: found.Bytes - p.Bytes, Sum: found.Sum - p.Sum}
}

// Scenario is a kind of target: how to run it (in the target child) and how to check what it
// kept (in the parent). New scenarios (a JetStream stream, a one-file-per-topic baseline) add
// one Scenario each; the publisher, the runner, the result record and the writers stay as they
// are.
type Scenario struct {
	Name string
	// Doc says in a line what the scenario measures.
	Doc string
	// Modes are the ack modes the target answers.
	Modes []AckMode
	// CeilingFor, when set, makes the scenario the reference of that ack mode: every other run
	// of the same load (Load.Key) in the invocation gets its rate as a ratio to this one's.
	CeilingFor AckMode
	// Engine marks targets that report engine stats (syncs per message).
	Engine bool
	// CountsDrops marks targets that report what their NATS client dropped
	// (TargetReport.Dropped), whose fire-and-forget runs may tolerate drops (Run.TolerateDrops).
	CountsDrops bool
	// SelfLoaded marks a scenario that makes its own load (the disk ceiling): no publisher
	// process runs, the target produces it in Await and reports it as TargetReport.Generated.
	SelfLoaded bool
	// Reference, when set, makes the scenario a reference of another kind than the ceilings
	// (RefJetStream, RefJetStreamSync): runs of the same load get a ratio to it too.
	Reference string
	// New makes the target in the child process.
	New func(cfg TargetConfig, log zerolog.Logger) (Target, error)
	// Verify checks, in the parent, that the target kept exactly what was sent. It returns the
	// tally of what it found and the problems (none for a valid run).
	Verify func(ctx context.Context, in VerifyInput) (Tally, []string)
}

func (s *Scenario) supports(m AckMode) bool { return slices.Contains(s.Modes, m) }

var scenarios = map[string]*Scenario{}

// register adds a scenario; each scenario's file registers itself in an init function.
func register(s *Scenario) {
	if _, dup := scenarios[s.Name]; dup {
		panic("benchmarks: scenario registered twice: " + s.Name)
	}
	scenarios[s.Name] = s
}

// ScenarioNames lists the registered scenarios, sorted.
func ScenarioNames() []string {
	names := make([]string, 0, len(scenarios))
	for n := range scenarios {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// checkReceived is Verify for targets that count what they receive (the ceilings). What the
// target dropped makes the run invalid unless the run tolerates drops: then it must have
// received the rest, no more and no less. (A ceiling keeps no set of what it received, only
// its tally, so with drops only the count is checked; with none, the tally.)
func checkReceived(_ context.Context, in VerifyInput) (Tally, []string) {
	if in.Target.Received == nil {
		return Tally{}, []string{"the target reported no tally"}
	}
	got, dropped := *in.Target.Received, in.Target.Dropped
	switch {
	case dropped > 0 && !in.Run.TolerateDrops:
		return got, []string{fmt.Sprintf("nats.go dropped %d messages (slow consumer)", dropped)}
	case dropped > 0:
		if want := in.Sent.Count - dropped; got.Count != want {
			return got, []string{fmt.Sprintf("received %d messages: %d sent less %d dropped is %d, %s",
				got.Count, in.Sent.Count, dropped, want, uncounted(want-got.Count))}
		}
		return got, nil
	}
	if d := in.Sent.Diff(got); d != "" {
		return got, []string{"received: " + d}
	}
	return got, nil
}

// uncounted says what a difference between what should be held (sent less dropped) and what is
// held means.
func uncounted(n int64) string {
	if n > 0 {
		return fmt.Sprintf("%d lost without being counted as dropped", n)
	}
	return fmt.Sprintf("%d more than that (drops over-counted, or messages held twice)", -n)
}

// progress is how many messages a target holds and when the last one came, with a wake-up for
// Await once a wanted count is reached. The target calls set as it takes messages; nothing
// polls the count except Await's stall check (and, when drops counts, its check of the drops).
type progress struct {
	n    atomic.Int64
	last atomic.Int64 // of the last set that raised n: nanoseconds since epoch (monotonic)
	// busy counts work a target did that does not raise n yet (an engine dispatching a
	// backlog): the stall check takes it as progress.
	busy atomic.Int64
	want atomic.Int64
	once sync.Once
	done chan struct{}
	// drops, when set, counts the messages the target's client dropped (nats.go's pending
	// limits): a dropped message is never held, so Await is done once held and dropped reach
	// the count. nats.go signals no event per drop, so Await polls it (dropsPoll).
	drops func() int64
}

// dropsPoll is how often Await reads the drop count. Only the wall time of a run with drops
// depends on it, never a figure: the run ends at the last message held, whenever the poll sees it.
const dropsPoll = 5 * time.Millisecond

func newProgress() *progress {
	p := &progress{done: make(chan struct{})}
	p.want.Store(math.MaxInt64)
	return p
}

// set records that the target holds n messages as of now. One goroutine calls it.
func (p *progress) set(n int64, now time.Time) {
	if n <= p.n.Load() {
		return
	}
	p.last.Store(int64(now.Sub(epoch))) // before n: whoever sees n sees its time
	p.n.Store(n)
	if n >= p.want.Load() {
		p.once.Do(func() { close(p.done) })
	}
}

// lastTime is the time of the last set that raised n, with Go's monotonic reading (monoNanos
// takes it to the machine's clock).
func (p *progress) lastTime() time.Time { return epoch.Add(time.Duration(p.last.Load())) }

// await waits for n messages held (or, with drops, held or dropped); see Target.Await.
func (p *progress) await(ctx context.Context, n int64, stall time.Duration) (time.Time, error) {
	p.want.Store(n)
	if p.n.Load() >= n {
		p.once.Do(func() { close(p.done) })
	}
	tick := time.NewTicker(max(stall/8, time.Millisecond))
	defer tick.Stop()
	var poll <-chan time.Time
	dropped := func() int64 { return 0 }
	if p.drops != nil {
		t := time.NewTicker(dropsPoll)
		defer t.Stop()
		poll, dropped = t.C, p.drops
	}
	seen, busy, drops, since := p.n.Load(), p.busy.Load(), dropped(), time.Now()
	for {
		select {
		case <-p.done:
			return p.lastTime(), nil
		case <-poll:
			if held, d := p.n.Load(), dropped(); held+d >= n && held > 0 {
				return p.lastTime(), nil
			}
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("holds %d of %d messages, %d dropped: %w", p.n.Load(), n, dropped(), ctx.Err())
		case now := <-tick.C:
			if cur, b, d := p.n.Load(), p.busy.Load(), dropped(); cur != seen || b != busy || d != drops {
				seen, busy, drops, since = cur, b, d, now
			} else if now.Sub(since) >= stall {
				return time.Time{}, fmt.Errorf("holds %d of %d messages, %d dropped, no progress for %s", cur, n, d, stall)
			}
		}
	}
}
