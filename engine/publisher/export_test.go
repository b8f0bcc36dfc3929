package publisher

import "time"

// WithClock returns o with clock as the publisher's clock (the time since its start), so that a
// test decides when a linger or a timeout is over.
func WithClock(o Options, clock func() time.Duration) Options {
	o.clock = clock
	return o
}
