package benchmarks

import (
	"fmt"
	"slices"
	"time"
)

// PresetOptions adjust a preset.
type PresetOptions struct {
	// CommitLogSize is the engine's CommitLog segment size (256 MiB when 0: the engine's 1 GiB
	// default is more than a short run writes).
	CommitLogSize int64
	// Scale multiplies every run's duration and message count (1 when 0).
	Scale float64
	// Publishers, Topics and BodySize replace the base load's (4, 16 and 128 B) when set; the
	// sweeps still vary their own dimension around it.
	Publishers, Topics, BodySize int
	// Cold starts the store targets without their topics (TargetOptions.Cold).
	Cold bool
}

// DefaultCommitLogSize is the presets' CommitLog segment size.
const DefaultCommitLogSize = 256 << 20

// The sweeps of the full preset (the issue's), each around the base load.
var (
	SweepTopics     = []int{1, 64, 256, 1024, 10_000}
	SweepBodies     = []int{128, 1 << 10, 16 << 10}
	SweepPublishers = []int{1, 4, 16}
	SweepWindows    = []int{1, 64, 4096}
	// BatchedBodies are the body sizes (issue 8's) at which the full preset's body sweep runs
	// batched acks too; its base load always has them.
	BatchedBodies = []int{128, 1 << 10}
)

// Presets lists the preset names.
func Presets() []string { return []string{"quick", "issue3", "issue8", "issue18", "issue19", "full"} }

// BaseLoad is the load every preset starts from: 4 publishers, 16 topics, 128 B bodies (or
// what o says), fire-and-forget; request/reply runs use a window of 4096.
func BaseLoad(o PresetOptions) Load {
	l := Load{Publishers: 4, Topics: 16, BodySize: 128, Ack: FireAndForget}
	if o.Publishers > 0 {
		l.Publishers = o.Publishers
	}
	if o.Topics > 0 {
		l.Topics = o.Topics
	}
	if o.BodySize > 0 {
		l.BodySize = o.BodySize
	}
	return l
}

// groupTitles are the headings of the report's sections, by Run.Group.
var groupTitles = map[string]string{
	"disk":        "Disk: sequential write + fdatasync, 1 MiB batches",
	"base":        "Base load",
	"topics":      "Topic count (the per-topic-log experiment)",
	"body":        "Body size",
	"publishers":  "Publishers",
	"window":      "Messages in flight (request/reply window)",
	"latency":     "Ack latency at half the engine-sync rate (request/reply, batched acks)",
	"ff-burst":    "Fire-and-forget bursts, default pending limits (interleaved rounds)",
	"ff-1KiB":     "Fire-and-forget bursts of 1 KiB bodies, default pending limits (interleaved rounds)",
	"ff-paced":    "Fire-and-forget paced at 0.75x the ceiling's median rate, default pending limits",
	"ff-own-rate": "Fire-and-forget paced at fractions of engine-sync's own burst median, 60 s, default pending limits",
	"ff-overload": "Fire-and-forget overload: publishers at full speed, default pending limits",
}

// Preset returns the runs of a named preset.
//
//   - quick (under two minutes): the disk ceiling; fire-and-forget and request/reply with 4096 in
//     flight at the base load for the ceilings, the engine in both flush modes, kafka-style and
//     JetStream (default and sync-always), a few seconds each; and engine-sync with batched acks
//     (window 4096), packed (the publisher package's default) and unpacked, compared with the
//     fire-and-forget ceiling and JetStream's request/reply.
//   - issue3: the figures issue 3 asks for: fire-and-forget 128 B, engine async vs
//     ceiling-subscriber; acked with 4096 in flight, 128 B, engine async and sync vs
//     ceiling-responder; syncs per message under that load; and the sync engine's ack latency
//     with the publishers limited to half the rate engine-sync just measured. So that the
//     latency can be read against what NATS and the publishers alone cost at that rate,
//     ceiling-responder runs at the same limited rate just before it. Then issue 8's: JetStream's
//     request/reply (the async-acked reference), engine-sync with batched acks (unpacked, then
//     packed), and the packed one at half its rate for the ack latency.
//   - issue8: only issue 8's goals (about 80 s): the fire-and-forget ceiling, JetStream's
//     request/reply, engine-sync request/reply and at half its rate (the latency reference),
//     and engine-sync with batched acks unpacked, packed, and packed at half its rate.
//   - issue18: issue 18's fire-and-forget runs with nats.go's default pending limits and drops
//     counted: bursts in 3 interleaved rounds (ceiling, engine sync and async, the engines'
//     cold twins; 128 B and 1 KiB), the sync engine paced at 0.75x the ceiling's median rate
//     for 60 s, at 0.5x and 0.75x its own burst median for 60 s each, and at full speed for
//     60 s (see issue18).
//   - issue19: issue 19's wide subject spaces: 1 to 1,000,000 subjects, the engine with one
//     declared topic (cold and warm) and with a topic per subject (to 10,000), and JetStream,
//     on the same fire-and-forget loads (see issue19).
//   - full: the benchmarks issue's sweeps, one dimension at a time around the base load (see
//     fullPreset).
func Preset(name string, o PresetOptions) ([]Run, error) {
	if o.CommitLogSize == 0 {
		o.CommitLogSize = DefaultCommitLogSize
	}
	if o.Scale <= 0 {
		o.Scale = 1
	}
	p := presetBuilder{o: o, base: BaseLoad(o)}
	switch name {
	case "quick":
		p.group = "disk"
		p.disk(time.Second)
		p.group = "base"
		for _, sc := range []string{"ceiling-subscriber", "engine-async", "engine-sync", "kafka-style", "jetstream-default", "jetstream-syncalways"} {
			p.ff(sc, p.base, 1_000_000)
		}
		for _, sc := range []string{"ceiling-responder", "engine-async", "engine-sync"} {
			p.rr(sc, p.base, 4096, 3*time.Second)
		}
		for _, sc := range []string{"kafka-style", "jetstream-default", "jetstream-syncalways"} {
			p.rr(sc, p.base, 4096, 2*time.Second)
		}
		p.ba("engine-sync", p.base, 4096, 3*time.Second)
		p.ba("engine-sync", unpacked(p.base), 4096, 3*time.Second)
	case "issue3":
		p.ff("ceiling-subscriber", p.base, 3_000_000)
		p.ff("engine-async", p.base, 3_000_000)
		p.rr("ceiling-responder", p.base, 4096, 10*time.Second)
		p.rr("engine-async", p.base, 4096, 10*time.Second)
		peak := p.rr("engine-sync", p.base, 4096, 10*time.Second).ID
		p.halfRate(peak, 10*time.Second)
		p.rr("jetstream-default", p.base, 4096, 10*time.Second)
		p.ba("engine-sync", unpacked(p.base), 4096, 10*time.Second)
		peak = p.ba("engine-sync", p.base, 4096, 10*time.Second).ID
		p.halfRateBatched(peak, 10*time.Second)
	case "issue8":
		p.ff("ceiling-subscriber", p.base, 3_000_000)
		p.rr("jetstream-default", p.base, 4096, 10*time.Second)
		peak := p.rr("engine-sync", p.base, 4096, 10*time.Second).ID
		p.halfRate(peak, 10*time.Second)
		p.ba("engine-sync", unpacked(p.base), 4096, 10*time.Second)
		peak = p.ba("engine-sync", p.base, 4096, 10*time.Second).ID
		p.halfRateBatched(peak, 10*time.Second)
	case "issue18":
		p.issue18()
	case "issue19":
		p.issue19()
	case "full":
		p.full()
	default:
		return nil, fmt.Errorf("unknown preset %q (have %v)", name, Presets())
	}
	return slices.Clone(p.runs), Check(p.runs)
}

// The targets of the full preset's loads, in the order they run (the references first).
var (
	fullTargets = []string{"engine-async", "engine-sync", "kafka-style", "jetstream-default", "jetstream-syncalways"}
	// topicTargets adds the sync per-topic log: what the topic count costs a design that must
	// sync one file per topic.
	topicTargets = []string{"engine-async", "engine-sync", "kafka-style", "kafka-style-sync", "jetstream-default", "jetstream-syncalways"}
)

// fullRR is the duration of the full preset's request/reply runs; ffMessages bounds its
// fire-and-forget runs (fewer for large bodies and slow targets, see ffCount).
const (
	fullRR     = 3 * time.Second
	ffMessages = 1_000_000
)

// full builds the full preset. The cross product of the issue's sweeps would be thousands of
// runs; instead each dimension is swept on its own around the base load (128 B, 16 topics, 4
// publishers; fire-and-forget and request/reply with 4096 in flight), with the ceiling of its
// ack mode and the targets of fullTargets at every point, so that every figure has its ratios
// to the ceiling and to JetStream of the same load:
//
//   - disk: the disk ceiling (sequential write + fdatasync, 1 MiB batches).
//   - base: the base load, both ack modes, with kafka-style-sync too.
//   - topics: 1, 64, 256, 1024 and 10,000 topics, both ack modes, with kafka-style-sync too.
//   - body: 1 KiB and 16 KiB, both ack modes.
//   - publishers: 1 and 16, both ack modes.
//   - window: request/reply with 1 and 64 in flight per publisher.
//   - latency: ceiling-responder and engine-sync at half the rate engine-sync/rr4096 reached,
//     and engine-sync with batched acks at half the rate engine-sync/ba4096 reached.
//
// Batched acks (window 4096) run at the base load and, in the body sweep, at the other sizes of
// BatchedBodies (128 B and 1 KiB), for engine-async and engine-sync only, the only targets that
// answer them, right after the fire-and-forget and request/reply points of their load: their
// references are those points' fire-and-forget ceiling and request/reply JetStream runs
// (referenceLoad).
func (p *presetBuilder) full() {
	both := []AckMode{FireAndForget, RequestReply}
	p.group = "disk"
	p.disk(2 * time.Second)
	p.group = "base"
	for _, a := range both {
		p.point(withAck(p.base, a), topicTargets)
	}
	p.batchedPoint(p.base)
	p.group = "topics"
	for _, t := range SweepTopics {
		for _, a := range both {
			if l := withAck(p.base, a); t != p.base.Topics {
				l.Topics = t
				p.point(l, topicTargets)
			}
		}
	}
	p.group = "body"
	for _, b := range SweepBodies {
		for _, a := range both {
			if l := withAck(p.base, a); b != p.base.BodySize {
				l.BodySize = b
				p.point(l, fullTargets)
			}
		}
		if l := p.base; b != l.BodySize && slices.Contains(BatchedBodies, b) {
			l.BodySize = b
			p.batchedPoint(l)
		}
	}
	p.group = "publishers"
	for _, n := range SweepPublishers {
		for _, a := range both {
			if l := withAck(p.base, a); n != p.base.Publishers {
				l.Publishers = n
				p.point(l, fullTargets)
			}
		}
	}
	p.group = "window"
	for _, w := range SweepWindows {
		if l := withAck(p.base, RequestReply); w != l.Window {
			l.Window = w
			p.point(l, fullTargets)
		}
	}
	p.group = "latency"
	p.halfRate("engine-sync/rr4096", fullRR)
	p.halfRateBatched("engine-sync/ba4096", fullRR)
}

// batchedTargets are the targets of batched acks: the engine's.
var batchedTargets = []string{"engine-async", "engine-sync"}

// batchedPoint adds the batched-ack runs of a load (window 4096). Their references are the runs
// of the load's other ack modes: the preset adds those points first.
func (p *presetBuilder) batchedPoint(l Load) {
	for _, sc := range batchedTargets {
		p.ba(sc, l, 4096, fullRR)
	}
	if l == p.base {
		p.ba("engine-sync", unpacked(l), 4096, fullRR)
	}
}

// unpacked is l with packs off (Load.Unpacked): one NATS message per message.
func unpacked(l Load) Load {
	l.Unpacked = true
	return l
}

type presetBuilder struct {
	o     PresetOptions
	base  Load
	group string
	runs  []Run
}

// point adds, for one load, its ceiling and then every target.
func (p *presetBuilder) point(l Load, targets []string) {
	ceiling := "ceiling-subscriber"
	if l.Ack == RequestReply {
		ceiling = "ceiling-responder"
	}
	for _, sc := range append([]string{ceiling}, targets...) {
		if l.Ack == FireAndForget {
			p.ff(sc, l, ffMessages)
		} else {
			p.rr(sc, l, l.Window, fullRR)
		}
	}
}

// ff adds a fire-and-forget run of at most n messages (see ffCount). The target's client
// buffers without limit so that the backlog a fire-and-forget burst builds is stored late
// rather than dropped: the rate is how fast the target takes everything, and its peak RSS
// shows the backlog.
func (p *presetBuilder) ff(scenario string, l Load, n int64) *Run {
	l.Ack, l.Window = FireAndForget, 0
	l.Messages = int64(float64(ffCount(scenario, l, n)) * p.o.Scale)
	l.Messages = max(l.Messages, int64(l.Publishers))
	return p.add(Run{
		ID: scenario + "/ff" + p.suffix(l), Scenario: scenario, Load: l,
		Target: TargetOptions{CommitLogSize: p.o.CommitLogSize, PendingMsgs: -1, PendingBytes: -1, Cold: p.o.Cold},
	})
}

// rr adds a request/reply run of duration d with window w per publisher. The window bounds
// what can be pending at the target, so its client buffers without limit: with nats.go's
// default 64 MiB, 4 publishers x 4096 x 16 KiB in flight would have a target that falls
// behind drop messages (a slow consumer), which then never get a reply.
func (p *presetBuilder) rr(scenario string, l Load, w int, d time.Duration) *Run {
	l.Ack, l.Window = RequestReply, w
	l.Duration = time.Duration(float64(d) * p.o.Scale)
	return p.add(Run{
		ID: fmt.Sprintf("%s/rr%d%s", scenario, w, p.suffix(l)), Scenario: scenario, Load: l,
		Target: TargetOptions{CommitLogSize: p.o.CommitLogSize, PendingMsgs: -1, PendingBytes: -1, Cold: p.o.Cold},
	})
}

// ba adds a batched-ack run of duration d with window w per publisher (pending limits as rr).
func (p *presetBuilder) ba(scenario string, l Load, w int, d time.Duration) *Run {
	l.Ack, l.Window = Batched, w
	l.Duration = time.Duration(float64(d) * p.o.Scale)
	return p.add(Run{
		ID: fmt.Sprintf("%s/ba%d%s", scenario, w, p.suffix(l)), Scenario: scenario, Load: l,
		Target: TargetOptions{CommitLogSize: p.o.CommitLogSize, PendingMsgs: -1, PendingBytes: -1, Cold: p.o.Cold},
	})
}

// halfRateBatched adds engine-sync with batched acks at half the rate of the run peak (a
// batched run): its ack latency at half load. No ceiling answers batched acks; halfRate's
// ceiling-responder shows what NATS and a reply per message cost at such a rate.
func (p *presetBuilder) halfRateBatched(peak string, d time.Duration) {
	half := p.ba("engine-sync", p.base, 4096, d)
	half.ID += "@50%"
	half.RateOf, half.RateFraction = peak, 0.5
}

// halfRate adds ceiling-responder and engine-sync at half the rate of the run peak.
func (p *presetBuilder) halfRate(peak string, d time.Duration) {
	for _, sc := range []string{"ceiling-responder", "engine-sync"} {
		half := p.rr(sc, p.base, 4096, d) // valid until the next add
		half.ID += "@50%"
		half.RateOf, half.RateFraction = peak, 0.5
	}
}

// diskLoad is the disk ceiling's load: 1 MiB batches for d.
func diskLoad(d time.Duration) Load {
	return Load{Publishers: 1, Topics: 1, BodySize: 1 << 20, Ack: FireAndForget, Duration: d}
}

// disk adds the disk ceiling, for d.
func (p *presetBuilder) disk(d time.Duration) {
	p.add(Run{ID: "disk-ceiling/1MiB", Scenario: "disk-ceiling",
		Load: diskLoad(time.Duration(float64(d) * p.o.Scale))})
}

// suffix names how l differs from the base load: "/t10000", "/b1KiB", "/p16".
func (p *presetBuilder) suffix(l Load) string {
	s := ""
	if l.Topics != p.base.Topics {
		s += fmt.Sprintf("/t%d", l.Topics)
	}
	if l.BodySize != p.base.BodySize {
		s += "/b" + sizeText(l.BodySize)
	}
	if l.Publishers != p.base.Publishers {
		s += fmt.Sprintf("/p%d", l.Publishers)
	}
	if l.Unpacked {
		s += "/unpacked"
	}
	return s
}

// add appends r (with its group and a timeout that allows for its topics) and returns it for
// changes, valid until the next add.
func (p *presetBuilder) add(r Run) *Run {
	r.Group = p.group
	if r.Load.Topics > 1000 {
		// Preloading and closing tens of thousands of queues take tens of seconds.
		r.Timeout = time.Minute + 3*r.Load.Duration + time.Duration(r.Load.Topics)*10*time.Millisecond
	}
	if r.Scenario == "jetstream-syncalways" {
		// JetStream takes what is queued for the stream in one go and, syncing every message,
		// answers the whole backlog at its end: with 16,384 in flight, no PubAck for seconds.
		r.Stall = time.Minute
		r.Timeout = max(r.Timeout, 2*time.Minute+3*r.Load.Duration)
	}
	p.runs = append(p.runs, r)
	return &p.runs[len(p.runs)-1]
}
