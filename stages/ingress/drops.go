package ingress

import (
	"cmp"
	"maps"
	"slices"
	"time"
)

// dropReporter logs nats.go's drops at most once per LogInterval, with the count since the last
// line. It is woken by slow-consumer events and, while drops continue, by its own timer: nats.go
// signals only the start of a slow-consumer episode, and an episode that goes on must still be
// reported. Owned by Run's goroutine.
type dropReporter struct {
	in     *Ingress
	timer  *time.Timer
	c      <-chan time.Time // the timer's channel while a report is scheduled, else nil
	logged int64            // the drop count of the last line
	lastAt time.Time        // when the last line was logged, or the first event seen
}

// event schedules a report for as soon as the rate limit allows.
func (d *dropReporter) event() {
	if d.lastAt.IsZero() {
		d.lastAt = time.Now()
	}
	if d.c == nil {
		d.arm(d.in.cfg.LogInterval - time.Since(d.lastAt))
	}
}

// fire reports and, if there was something new, looks again one interval later.
func (d *dropReporter) fire() {
	d.c = nil
	if d.report() {
		d.arm(d.in.cfg.LogInterval)
	}
}

func (d *dropReporter) arm(delay time.Duration) {
	delay = max(delay, 0)
	if d.timer == nil {
		d.timer = time.NewTimer(delay)
	} else {
		d.timer.Reset(delay)
	}
	d.c = d.timer.C
}

// report logs the drops since the last line, if any, and says whether there were some: how
// many, how fast, the topics that lost most, and what to do about it.
func (d *dropReporter) report() bool {
	natsDropped, pending := d.in.natsCounts()
	own, byTopic := d.in.ffDrops.snapshot()
	dropped := natsDropped + own
	if dropped <= d.logged {
		return false
	}
	now := time.Now()
	rate := float64(dropped-d.logged) / max(now.Sub(d.lastAt).Seconds(), 1e-3)
	d.in.log.Warn().
		Int64("dropped", dropped-d.logged).
		Int64("dropped_total", dropped).
		Float64("dropped_per_second", float64(int64(rate))).
		Int64("dropped_by_ingress", own).
		Int64("dropped_by_nats_client", natsDropped).
		Strs("topics_dropping_most", topTopics(byTopic, 3)).
		Int64("pending", pending).
		Int64("slow_consumer_events", d.in.counters.slowEvents.Load()).
		Msg("ingress: fire-and-forget messages dropped before they reached the store: the publishers " +
			"send faster than the engine stores (counted by topic in " +
			"rocketstore_ingress_dropped_by_topic_total). Publish with request/reply or batched acks " +
			"to be paced by the acks, raise --pending-msgs/--pending-bytes (and --memory-limit) to " +
			"ride out longer bursts, or spread the subjects over more engines (docs/SCALE-OUT.md)")
	d.logged, d.lastAt = dropped, now
	return true
}

// topTopics are the n topics of byTopic with the most drops, most first.
func topTopics(byTopic map[string]int64, n int) []string {
	topics := slices.SortedFunc(maps.Keys(byTopic), func(a, b string) int {
		return cmp.Or(cmp.Compare(byTopic[b], byTopic[a]), cmp.Compare(a, b))
	})
	return topics[:min(n, len(topics))]
}

func (d *dropReporter) stopTimer() {
	if d.timer != nil {
		d.timer.Stop()
	}
}
