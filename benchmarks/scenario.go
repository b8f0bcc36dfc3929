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
}

// VerifyInput is what a scenario's Verify checks, in the parent, after both children exited.
type VerifyInput struct {
	Run Run
	Dir string
	// Sent is the publishers' tally (what they claim to have sent, a skipped message included).
	Sent   Tally
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

// checkReceived is Verify for targets that count what they receive (the ceilings).
func checkReceived(_ context.Context, in VerifyInput) (Tally, []string) {
	if in.Target.Received == nil {
		return Tally{}, []string{"the target reported no tally"}
	}
	got := *in.Target.Received
	if d := in.Sent.Diff(got); d != "" {
		return got, []string{"received: " + d}
	}
	return got, nil
}

// progress is how many messages a target holds and when the last one came, with a wake-up for
// Await once a wanted count is reached. The target calls set as it takes messages; nothing
// polls the count except Await's stall check.
type progress struct {
	n    atomic.Int64
	last atomic.Int64 // unix nanoseconds of the last set that raised n
	// busy counts work a target did that does not raise n yet (an engine dispatching a
	// backlog): the stall check takes it as progress.
	busy atomic.Int64
	want atomic.Int64
	once sync.Once
	done chan struct{}
}

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
	p.last.Store(now.UnixNano()) // before n: whoever sees n sees its time
	p.n.Store(n)
	if n >= p.want.Load() {
		p.once.Do(func() { close(p.done) })
	}
}

// await waits for n messages; see Target.Await.
func (p *progress) await(ctx context.Context, n int64, stall time.Duration) (time.Time, error) {
	p.want.Store(n)
	if p.n.Load() >= n {
		p.once.Do(func() { close(p.done) })
	}
	tick := time.NewTicker(max(stall/8, time.Millisecond))
	defer tick.Stop()
	seen, busy, since := p.n.Load(), p.busy.Load(), time.Now()
	for {
		select {
		case <-p.done:
			return time.Unix(0, p.last.Load()), nil
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("holds %d of %d messages: %w", p.n.Load(), n, ctx.Err())
		case now := <-tick.C:
			if cur, b := p.n.Load(), p.busy.Load(); cur != seen || b != busy {
				seen, busy, since = cur, b, now
			} else if now.Sub(since) >= stall {
				return time.Time{}, fmt.Errorf("holds %d of %d messages, no progress for %s", cur, n, stall)
			}
		}
	}
}
