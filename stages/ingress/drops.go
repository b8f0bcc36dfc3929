package ingress

import "time"

// dropReporter logs nats.go's drops at most once per LogInterval, with the count since the last
// line. It is woken by slow-consumer events and, while drops continue, by its own timer: nats.go
// signals only the start of a slow-consumer episode, and an episode that goes on must still be
// reported. Owned by Run's goroutine.
type dropReporter struct {
	in     *Ingress
	timer  *time.Timer
	c      <-chan time.Time // the timer's channel while a report is scheduled, else nil
	logged int64            // the drop count of the last line
	lastAt time.Time
}

// event schedules a report for as soon as the rate limit allows.
func (d *dropReporter) event() {
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

// report logs the drops since the last line, if any, and says whether there were some.
func (d *dropReporter) report() bool {
	dropped, pending := d.in.natsCounts()
	if dropped <= d.logged {
		return false
	}
	d.in.log.Warn().
		Int64("dropped", dropped-d.logged).
		Int64("dropped_total", dropped).
		Int64("pending", pending).
		Int64("slow_consumer_events", d.in.counters.slowEvents.Load()).
		Msg("ingress: messages dropped before they reached the store: the pipeline is slower than " +
			"the publishers (slow consumer). Publish with request/reply to be paced by the acks, " +
			"or raise the pending limits")
	d.logged, d.lastAt = dropped, time.Now()
	return true
}

func (d *dropReporter) stopTimer() {
	if d.timer != nil {
		d.timer.Stop()
	}
}
