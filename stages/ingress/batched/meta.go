package batched

import (
	"errors"
	"fmt"

	"github.com/rocketstore/engine/internal/wire"

	"github.com/nats-io/nats.go"
)

// Meta rides in Record.Ctx of a batched record, from ingress's worker to the tracker. The worker
// allocates the metas of a batch in one slice (NewMeta).
type Meta struct {
	wire.SeqHeader
	AckTo string // the reply subject: the stream's ack subject
	// Rejected says ingress refused the message itself (it is already counted as rejected).
	Rejected bool
}

// NewMeta appends a Meta to metas (with a capacity of at least n, the batch's messages, so that
// the pointers into it stay valid) and returns it.
func NewMeta(metas *[]Meta, n int, sh wire.SeqHeader, ackTo string) *Meta {
	if cap(*metas) < n {
		*metas = make([]Meta, 0, n)
	}
	*metas = append(*metas, Meta{SeqHeader: sh, AckTo: ackTo})
	return &(*metas)[len(*metas)-1]
}

// Marker rides in Record.Ctx of a marker record: a record with ErrMarker (so the appender skips
// it) that a worker adds to a batch when the tracker asked it for a marker. When the tracker
// sees it, every message the worker received before the request has reached the tracker (see
// tracker.go on missing sequences).
type Marker struct {
	Worker int
	Epoch  uint64
}

// ErrMarker is a marker record's error: never replied, never counted.
var ErrMarker = errors.New("ingress: tracker marker")

// StoredBefore is the error of a resent record found in the store by Lookup: the appender skips
// it (it has an error) and the tracker acks it as a duplicate at the original's position.
type StoredBefore struct {
	At StoredAt
}

// IsStoredBefore says whether err is a *StoredBefore. (errors.As's target escapes to the heap:
// asked only for a record that has an error.)
func IsStoredBefore(err error) bool {
	var before *StoredBefore
	return errors.As(err, &before)
}

func (e *StoredBefore) Error() string {
	return fmt.Sprintf("ingress: already stored at queue %d offset %d", e.At.QueueID, e.At.QueueOffset)
}

// Header returns the Rs-Seq values of m, nil for a message that is not batched.
func Header(m *nats.Msg) []string {
	if m.Header == nil {
		return nil
	}
	return m.Header[wire.HeaderSeq]
}
