package ingress

import (
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/rocketstore/engine/internal/wire"
)

// Batched acks (docs/BATCHED-ACKS.md, and internal/wire for the header): a message with the
// Rs-Seq header gets no reply of its own: the tracker (tracker.go) sends each stream at most one
// cumulative ack per tracker round (in practice one per group-commit round in sync mode, per
// append round in async mode): "every sequence up to N is stored", the positions of what was
// stored since the last ack, the sequences refused with their codes, and the sequences that
// never reached the engine ("missing"). A resend is looked up in the store
// (Config.Batched.Lookup, the IndexFile) before it is appended, so that a resend of a message
// stored before a restart, or longer ago than the dedupe window, is not stored again.

// Defaults of BatchedConfig.
const (
	DefaultMaxStreams   = 10_000
	DefaultStreamIdle   = 2 * time.Minute
	DefaultMaxAhead     = 1 << 16
	DefaultTrackerQueue = 1024
	DefaultMaxAckBytes  = 256 << 10
)

// ErrBatchedOff: a message carries the batched-ack header, but this engine does not track streams
// (turned off, or a queue group, which splits a stream between engines). It is refused (400, it
// wraps ErrInvalidHeader) on the reply subject, so that the publisher learns it at once instead
// of by a timeout.
var ErrBatchedOff = fmt.Errorf("%w: batched acks (%s) are off in this engine", ErrInvalidHeader, wire.HeaderSeq)

// BatchedConfig turns batched acks on (Config.Batched). The zero value of every field has a
// default.
type BatchedConfig struct {
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

func (c *BatchedConfig) withDefaults(maxPayload int64) *BatchedConfig {
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

// parseSeqHeader parses the values of an Rs-Seq header (wire.ParseSeqHeader); the error wraps
// ErrInvalidHeader.
func parseSeqHeader(vals []string) (wire.SeqHeader, error) {
	sh, err := wire.ParseSeqHeader(vals)
	if err != nil {
		return sh, fmt.Errorf("%w: %w", ErrInvalidHeader, err)
	}
	return sh, nil
}

// seqMeta rides in Record.Ctx of a batched record, from the worker to the tracker. The worker
// allocates the metas of a batch in one slice.
type seqMeta struct {
	wire.SeqHeader
	ackTo string // the reply subject: the stream's ack subject
	// rejected says ingress refused the message itself (it is already counted as rejected).
	rejected bool
}

// markerMeta rides in Record.Ctx of a marker record: a record with an error (so the appender
// skips it) that a worker adds to a batch when the tracker asked it for a marker. When the tracker
// sees it, every message the worker received before the request has reached the tracker (see
// tracker.go on missing sequences).
type markerMeta struct {
	worker int
	epoch  uint64
}

// errMarker is a marker record's error: never replied, never counted.
var errMarker = errors.New("ingress: tracker marker")

// storedBefore is the error of a resent record found in the store by Lookup: the appender skips
// it (it has an error) and the tracker acks it as a duplicate at the original's position.
type storedBefore struct {
	at StoredAt
}

// isStoredBefore says whether err is a storedBefore. (errors.As's target escapes to the heap:
// asked only for a record that has an error.)
func isStoredBefore(err error) bool {
	var before *storedBefore
	return errors.As(err, &before)
}

func (e *storedBefore) Error() string {
	return fmt.Sprintf("ingress: already stored at queue %d offset %d", e.at.QueueID, e.at.QueueOffset)
}

// batchedHeader returns the Rs-Seq values of m, nil for a plain message.
func batchedHeader(m *nats.Msg) []string {
	if m.Header == nil {
		return nil
	}
	return m.Header[wire.HeaderSeq]
}
