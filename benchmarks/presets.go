package benchmarks

import (
	"fmt"
	"slices"
	"time"
)

// PresetOptions adjust a preset.
type PresetOptions struct {
	// CommitLogSize is the engine's CommitLog segment size (256 MiB when 0: the engine's 1 GiB
	// default costs a second of prefault per segment, too much for short runs).
	CommitLogSize int64
	// Scale multiplies every run's duration and message count (1 when 0).
	Scale float64
	// Publishers, Topics and BodySize replace the preset's (4, 16 and 128 B) when set.
	Publishers, Topics, BodySize int
}

// DefaultCommitLogSize is the presets' CommitLog segment size.
const DefaultCommitLogSize = 256 << 20

// Presets lists the preset names.
func Presets() []string { return []string{"quick", "issue3"} }

// Preset returns the runs of a named preset.
//
//   - quick (well under two minutes): fire-and-forget and request/reply with 4096 in flight,
//     128 B bodies, the two ceilings and the engine in both flush modes, a few seconds each.
//   - issue3: the figures issue 3 asks for: fire-and-forget 128 B, engine async vs
//     ceiling-subscriber; acked with 4096 in flight, 128 B, engine async and sync vs
//     ceiling-responder; syncs per message under that load; and the sync engine's ack latency
//     with the publishers limited to half the rate engine-sync just measured. So that the
//     latency can be read against what NATS and the publishers alone cost at that rate,
//     ceiling-responder runs at the same limited rate just before it.
func Preset(name string, o PresetOptions) ([]Run, error) {
	if o.CommitLogSize == 0 {
		o.CommitLogSize = DefaultCommitLogSize
	}
	if o.Scale <= 0 {
		o.Scale = 1
	}
	p := presetBuilder{o: o}
	switch name {
	case "quick":
		p.ff("ceiling-subscriber", 1_000_000)
		p.ff("engine-async", 1_000_000)
		p.ff("engine-sync", 1_000_000)
		p.rr("ceiling-responder", 4096, 3*time.Second)
		p.rr("engine-async", 4096, 3*time.Second)
		p.rr("engine-sync", 4096, 3*time.Second)
	case "issue3":
		p.ff("ceiling-subscriber", 3_000_000)
		p.ff("engine-async", 3_000_000)
		p.rr("ceiling-responder", 4096, 10*time.Second)
		p.rr("engine-async", 4096, 10*time.Second)
		peak := p.rr("engine-sync", 4096, 10*time.Second).ID
		for _, sc := range []string{"ceiling-responder", "engine-sync"} {
			half := p.rr(sc, 4096, 10*time.Second) // valid until the next add
			half.ID += "@50%"
			half.RateOf, half.RateFraction = peak, 0.5
		}
	default:
		return nil, fmt.Errorf("unknown preset %q (have %v)", name, Presets())
	}
	return slices.Clone(p.runs), Check(p.runs)
}

type presetBuilder struct {
	o    PresetOptions
	runs []Run
}

func (p *presetBuilder) load(ack AckMode) Load {
	l := Load{Publishers: 4, Topics: 16, BodySize: 128, Ack: ack}
	if p.o.Publishers > 0 {
		l.Publishers = p.o.Publishers
	}
	if p.o.Topics > 0 {
		l.Topics = p.o.Topics
	}
	if p.o.BodySize > 0 {
		l.BodySize = p.o.BodySize
	}
	return l
}

// ff adds a fire-and-forget run of n messages. The target's client buffers without limit so
// that the backlog a fire-and-forget burst builds is stored late rather than dropped: the rate
// is how fast the target takes everything, and its peak RSS shows the backlog.
func (p *presetBuilder) ff(scenario string, n int64) *Run {
	l := p.load(FireAndForget)
	l.Messages = int64(float64(n) * p.o.Scale)
	return p.add(Run{
		ID: scenario + "/ff", Scenario: scenario, Load: l,
		Target: TargetOptions{CommitLogSize: p.o.CommitLogSize, PendingMsgs: -1, PendingBytes: -1},
	})
}

// rr adds a request/reply run of duration d with window w per publisher.
func (p *presetBuilder) rr(scenario string, w int, d time.Duration) *Run {
	l := p.load(RequestReply)
	l.Window = w
	l.Duration = time.Duration(float64(d) * p.o.Scale)
	return p.add(Run{
		ID: fmt.Sprintf("%s/rr%d", scenario, w), Scenario: scenario, Load: l,
		Target: TargetOptions{CommitLogSize: p.o.CommitLogSize},
	})
}

// add appends r and returns it for changes, valid until the next add.
func (p *presetBuilder) add(r Run) *Run {
	p.runs = append(p.runs, r)
	return &p.runs[len(p.runs)-1]
}
