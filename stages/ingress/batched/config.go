// Package batched is the engine's side of batched acks (docs/BATCHED-ACKS.md; the header, the
// pack framing and the ack JSON are internal/wire's): a message with the Rs-Seq header gets no
// reply of its own; the tracker (tracker.go), fed by the ack stage through ingress, sends each
// stream at most one cumulative ack per round (in practice one per group-commit round in sync
// mode, per append round in async mode): "every sequence up to N is stored", the positions of
// what was stored since the last ack, the sequences refused with their codes, and the sequences
// that never reached the engine ("missing", decided exactly with markers that ingress's workers
// pass through the pipeline). Per stream, the first copy of a sequence goes on and later copies
// are dropped (received.go); a resend is first looked up in the store (Config.Lookup, the
// IndexFile), so that a resend of a message stored before a restart, or longer ago than the
// dedupe window, is not stored again.
//
// Ingress imports this package, never the other way round: what the tracker needs of ingress
// (its workers, for markers; the batches' memory) is the Pipeline interface.
package batched

import (
	"time"
)

// Defaults of Config.
const (
	DefaultMaxStreams   = 10_000
	DefaultStreamIdle   = 2 * time.Minute
	DefaultMaxAhead     = 1 << 16
	DefaultTrackerQueue = 1024
	DefaultMaxAckBytes  = 256 << 10
)

// Config turns batched acks on (ingress's Config.Batched). The zero value of every field has a
// default.
type Config struct {
	// MaxStreams bounds the streams tracked at once (10,000). A new stream past it evicts the
	// stream idle the longest, which is sent an error ack (503) and resends what it has in flight.
	// Memory bound: MaxStreams × (a few hundred bytes + MaxAhead/8 bytes at most, for a stream
	// that has that many sequences in flight).
	MaxStreams int
	// StreamIdle expires a stream nothing happened to for that long (2 min). A stream that comes
	// back is rebuilt from its messages' floors; nothing is sent on expiry.
	StreamIdle time.Duration
	// MaxAhead bounds how far above its cumulative ack a stream's sequences are tracked (65,536).
	// Messages further ahead are still stored and acked by position, but not covered by the
	// cumulative ack until the publisher's floor passes them.
	MaxAhead int
	// Queue is the capacity, in batches, of the channel from the ack stage to the tracker (1024).
	// The ack stage never blocks on it: a batch that finds it full is not tracked (counted in
	// Stats.Batched.Overflow and logged); its sequences are then reported missing or time out at
	// the publisher, which resends them, and the resends are answered from the store.
	Queue int
	// MaxAckBytes bounds one ack message (256 KiB, and never above the server's max payload); a
	// longer ack is split.
	MaxAckBytes int
	// Lookup finds a message already stored (a resend), by topic and message id: the engine
	// passes a lookup through its IndexFile. ok is false when it is not there (or when the lookup
	// failed: the resend then goes through the appender's dedupe window as any message does).
	// nil: no lookup.
	Lookup func(topic, msgID string) (at StoredAt, ok bool)
	// Clock is the tracker's clock for idle expiry (time.Now); ExpireTick, when set, replaces
	// the expiry ticker (every StreamIdle/4): tests drive expiry with a fake clock.
	Clock      func() time.Time
	ExpireTick <-chan time.Time
}

// WithDefaults returns c with its defaults, MaxAckBytes held within the server's maxPayload.
func (c *Config) WithDefaults(maxPayload int64) *Config {
	b := *c
	if b.MaxStreams <= 0 {
		b.MaxStreams = DefaultMaxStreams
	}
	if b.StreamIdle <= 0 {
		b.StreamIdle = DefaultStreamIdle
	}
	if b.MaxAhead <= 0 {
		b.MaxAhead = DefaultMaxAhead
	}
	b.MaxAhead = (b.MaxAhead + 63) &^ 63
	if b.Queue <= 0 {
		b.Queue = DefaultTrackerQueue
	}
	if b.MaxAckBytes <= 0 {
		b.MaxAckBytes = DefaultMaxAckBytes
	}
	if maxPayload > 0 && int64(b.MaxAckBytes) > maxPayload {
		b.MaxAckBytes = int(maxPayload)
	}
	b.MaxAckBytes = max(b.MaxAckBytes, 4<<10)
	if b.Clock == nil {
		b.Clock = time.Now
	}
	return &b
}

// StoredAt is where a stored message is: what Lookup returns.
type StoredAt struct {
	QueueID        int32
	QueueOffset    int64
	PhysOffset     int64
	StoreTimestamp int64
}
