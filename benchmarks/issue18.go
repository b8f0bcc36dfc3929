package benchmarks

import (
	"fmt"
	"time"
)

// Issue 18's runs (fire-and-forget at the speed of NATS): plain publishes to a target whose NATS
// client has nats.go's default pending limits (512 Ki messages, 64 MiB), so that past its rate
// it drops, and every drop is a figure (Run.TolerateDrops) beside the rate, the peak heap and
// resident set and the lag from the last publish to the last message stored.
const (
	// issue18PerPublisher is each publisher's share of a burst: the issue's 400,000 messages
	// per publisher, a 1.6 M burst of four. (400,000 in all could never overflow the default
	// pending limits, and the issue reports drops in each 1.6 M burst.)
	issue18PerPublisher = 400_000
	// issue18Rounds is the number of interleaved rounds of the bursts: the issue's figures
	// are medians of 3.
	issue18Rounds = 3
	// issue18Long is how long the paced and the overload runs publish.
	issue18Long = 60 * time.Second
	// issue18Paced is the fraction of the ceiling's median rate the paced runs publish at.
	issue18Paced = 0.75
	// issue18KiB is the body size of the bandwidth runs.
	issue18KiB = 1 << 10
)

// issue18OwnRate are the fractions of the sync engine's own burst median that the
// own-rate runs publish at for issue18Long: below what rate nothing is lost, whatever the
// ceiling (a burst rate is not a rate the engine keeps up for a minute).
var issue18OwnRate = [...]float64{0.5, 0.75}

// The IDs issue 18's goals read (see issue18Goals): the paced and overload runs of engine-sync.
const (
	issue18PacedID    = "engine-sync/ff@75%"
	issue18OverloadID = "engine-sync/ff/overload"
)

// issue18 builds the preset of issue 18:
//
//   - ff-burst: 3 interleaved rounds of ceiling-subscriber, engine-sync and engine-async, each a
//     burst of 400,000 messages per publisher at the base load, and the engines' cold twins
//     (the topics created within the run), unless every run is cold already.
//   - ff-1KiB: 3 rounds of ceiling-subscriber and engine-sync with 1 KiB bodies (a burst of at
//     most 512 MiB of bodies), and engine-sync's cold twin: the MB/s goal.
//   - ff-paced: ceiling-subscriber and engine-sync for 60 s, the publishers limited to 0.75 x the
//     median of the ceiling's burst rounds (the ceiling's own shows whether NATS alone keeps
//     up at that rate on the machine).
//   - ff-own-rate: engine-sync for 60 s at 0.5 and 0.75 x the median of its own burst rounds:
//     the rate below which it loses nothing, as a user would pace plain publishers.
//   - ff-overload: ceiling-subscriber and engine-sync with the publishers at full speed for
//     60 s: the peak heap and resident set under the default limits, the drops, the catch-up
//     once the load stops (the ceiling's figures are what nats.go's buffers cost alone).
//
// Every run tolerates drops and keeps nats.go's default pending limits.
func (p *presetBuilder) issue18() {
	burst := int64(issue18PerPublisher * p.base.Publishers)
	twins := !p.o.Cold
	p.group = "ff-burst"
	var ceilings, engines []string
	for round := 1; round <= issue18Rounds; round++ {
		ceilings = append(ceilings, p.dropFF("ceiling-subscriber", p.base, burst, 0, round, false).ID)
		for _, cold := range []bool{false, true} {
			for _, sc := range []string{"engine-sync", "engine-async"} {
				if !cold || twins {
					r := p.dropFF(sc, p.base, burst, 0, round, cold)
					if sc == "engine-sync" && !cold {
						engines = append(engines, r.ID)
					}
				}
			}
		}
	}
	if kib := p.base; kib.BodySize != issue18KiB {
		kib.BodySize = issue18KiB
		n := min(burst, ffBytes/issue18KiB)
		p.group = "ff-1KiB"
		for round := 1; round <= issue18Rounds; round++ {
			p.dropFF("ceiling-subscriber", kib, n, 0, round, false)
			p.dropFF("engine-sync", kib, n, 0, round, false)
			if twins {
				p.dropFF("engine-sync", kib, n, 0, round, true)
			}
		}
	}
	p.group = "ff-paced"
	for _, sc := range []string{"ceiling-subscriber", "engine-sync"} {
		r := p.dropFF(sc, p.base, 0, issue18Long, 0, false)
		r.ID += fmt.Sprintf("@%.0f%%", 100*issue18Paced)
		r.RateOfMedian, r.RateFraction = ceilings, issue18Paced
	}
	p.group = "ff-own-rate"
	for _, f := range issue18OwnRate {
		r := p.dropFF("engine-sync", p.base, 0, issue18Long, 0, false)
		r.ID += fmt.Sprintf("@%.0f%%-of-engine", 100*f)
		r.RateOfMedian, r.RateFraction = engines, f
	}
	p.group = "ff-overload"
	for _, sc := range []string{"ceiling-subscriber", "engine-sync"} {
		r := p.dropFF(sc, p.base, 0, issue18Long, 0, false)
		r.ID += "/overload"
	}
}

// dropFF adds a fire-and-forget run of n messages or for d (either scaled), with nats.go's
// default pending limits and drops tolerated; round > 0 makes it that round of its series,
// cold a cold twin (TargetOptions.Cold, "/cold" in its ID).
func (p *presetBuilder) dropFF(scenario string, l Load, n int64, d time.Duration, round int, cold bool) *Run {
	l.Ack, l.Window = FireAndForget, 0
	l.Messages = int64(float64(n) * p.o.Scale)
	if n > 0 {
		l.Messages = max(l.Messages, 2*int64(l.Topics), int64(l.Publishers))
	}
	l.Duration = time.Duration(float64(d) * p.o.Scale)
	id := scenario + "/ff" + p.suffix(l)
	if cold {
		id += "/cold"
	}
	if round > 0 {
		id += fmt.Sprintf("#%d", round)
	}
	r := p.add(Run{
		ID: id, Scenario: scenario, Load: l, Round: round, TolerateDrops: true,
		Target: TargetOptions{CommitLogSize: p.o.CommitLogSize, Cold: cold || p.o.Cold},
	})
	if l.Duration > 0 {
		// Minutes of messages to store, stop and read back: tens of millions of records.
		r.Timeout = 2*time.Minute + 4*l.Duration
	}
	return r
}
