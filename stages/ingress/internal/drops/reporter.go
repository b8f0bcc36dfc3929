package drops

import (
	"cmp"
	"maps"
	"slices"
	"time"

	"github.com/rs/zerolog"
)

// Counts are what a Reporter reads at each report: the drops of the NATS client (nats.go's own,
// whose subjects it does not tell), what it buffers now, and its slow-consumer events.
type Counts func() (natsDropped, pending, slowEvents int64)

// Reporter logs the drops at most once per Interval, with the count since the last line. It is
// woken by Event (a slow-consumer event, a drop of ingress's own) and, while drops continue, by
// its own timer (C, then Fire): nats.go signals only the start of a slow-consumer episode, and an
// episode that goes on must still be reported. Owned by one goroutine.
type Reporter struct {
	Interval time.Duration
	Log      zerolog.Logger
	Counts   Counts
	Topics   *Topics // ingress's own drops

	timer *time.Timer
	// C is the timer's channel while a report is scheduled, else nil: receive from it, then
	// call Fire.
	C      <-chan time.Time
	logged int64     // the drop count of the last line
	lastAt time.Time // when the last line was logged (zero before the first)
	// since is where the rate of the next line is counted from: the last line, or the first
	// event seen.
	since time.Time
}

// Event schedules a report for as soon as the rate limit allows.
func (d *Reporter) Event() {
	if d.since.IsZero() {
		d.since = time.Now()
	}
	if d.C == nil {
		d.arm(d.Interval - time.Since(d.lastAt))
	}
}

// Fire reports and, if there was something new, looks again one interval later.
func (d *Reporter) Fire() {
	d.C = nil
	if d.Report() {
		d.arm(d.Interval)
	}
}

func (d *Reporter) arm(delay time.Duration) {
	delay = max(delay, 0)
	if d.timer == nil {
		d.timer = time.NewTimer(delay)
	} else {
		d.timer.Reset(delay)
	}
	d.C = d.timer.C
}

// Report logs the drops since the last line, if any, and says whether there were some: how
// many, how fast, the topics that lost most, and what to do about it.
func (d *Reporter) Report() bool {
	natsDropped, pending, slowEvents := d.Counts()
	own, byTopic := d.Topics.Snapshot()
	dropped := natsDropped + own
	if dropped <= d.logged {
		return false
	}
	now := time.Now()
	rate := float64(dropped-d.logged) / max(now.Sub(d.since).Seconds(), 1e-3)
	d.Log.Warn().
		Int64("dropped", dropped-d.logged).
		Int64("dropped_total", dropped).
		Float64("dropped_per_second", float64(int64(rate))).
		Int64("dropped_by_ingress", own).
		Int64("dropped_by_nats_client", natsDropped).
		Strs("topics_dropping_most", topTopics(byTopic, 3)).
		Int64("pending", pending).
		Int64("slow_consumer_events", slowEvents).
		Msg("ingress: fire-and-forget messages dropped before they reached the store: the publishers " +
			"send faster than the engine stores (counted by topic in " +
			"rocketstore_ingress_dropped_by_topic_total). Publish with request/reply or batched acks " +
			"to be paced by the acks, raise --pending-msgs/--pending-bytes (and --memory-limit) to " +
			"ride out longer bursts, or spread the subjects over more engines (docs/SCALE-OUT.md)")
	d.logged, d.lastAt, d.since = dropped, now, now
	return true
}

// topTopics are the n topics of byTopic with the most drops, most first.
func topTopics(byTopic map[string]int64, n int) []string {
	topics := slices.SortedFunc(maps.Keys(byTopic), func(a, b string) int {
		return cmp.Or(cmp.Compare(byTopic[b], byTopic[a]), cmp.Compare(a, b))
	})
	return topics[:min(n, len(topics))]
}

// Stop stops the timer.
func (d *Reporter) Stop() {
	if d.timer != nil {
		d.timer.Stop()
	}
}
