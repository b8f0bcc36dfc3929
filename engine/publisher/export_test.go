package publisher

import "time"

// WithClock returns o with clock as the publisher's clock (the time since its start), so that a
// test decides when a linger or a timeout is over.
func WithClock(o Options, clock func() time.Duration) Options {
	o.clock = clock
	return o
}

// WithFirstSeq returns o with the stream starting at sequence seq (its floor seq-1), so that a
// test reaches the end of the sequence space without publishing 2^63 messages.
func WithFirstSeq(o Options, seq uint64) Options {
	o.firstSeq = seq
	return o
}
