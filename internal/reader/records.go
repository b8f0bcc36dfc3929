package reader

import (
	"context"
	"errors"
	"time"

	"github.com/rocketstore/engine/internal/store/commitlog"
)

// The batched read: several queues of one topic at once, each record as the CommitLog holds it,
// copied once from the mapping into one buffer, back to back (what a RocketMQ pull response
// carries). The read API sends that buffer as the body of one NATS message.

// RecordsRequest asks for the records of several queues of one topic.
type RecordsRequest struct {
	Topic  string
	Queues []QueueFrom
	// Max and MaxBytes bound the records of every queue together; each queue in turn gets an
	// equal share of what the queues before it left, its first record taken whatever its size
	// as long as the records stay within MaxBytes in all, which is hard: a record that cannot
	// fit in it is TooLarge.
	Max, MaxBytes int
	// Tags and Subject filter as GetRequest's.
	Tags    []string
	Subject string
	// Wait: when every queue is at its head, wait up to this long for a message in any of
	// them (long polling), then read again. Ignored offline.
	Wait time.Duration
	// UnknownIsEmpty reads a queue the store does not have as an empty one (GetRequest's).
	UnknownIsEmpty bool
	// Gap leaves this many bytes in the buffer before each queue's records (zeros, not part of
	// QueueRecords.Records), for the caller to write its own header of the queue there: a
	// reply made in the buffer the records are copied into, without a second copy.
	Gap int
}

// QueueFrom is a queue of a RecordsRequest and the offset to read it from.
type QueueFrom struct {
	QueueID int32
	Offset  int64
}

// QueueRecords is what a RecordsRequest found in one queue: a GetResult's status and offsets,
// and Count records, back to back, in Records (a piece of the buffer the read appended to).
type QueueRecords struct {
	QueueID                          int32
	Status                           Status
	NextOffset, MinOffset, MaxOffset int64
	Count                            int
	Records                          []byte
	// TooLarge: the record at NextOffset is larger than the read's MaxBytes allows, and nothing
	// of this queue was read (Status is NoMatchedMessage): it must be read another way (msg).
	TooLarge bool
}

// Records appends the records req asks for to buf and returns, per queue of req in its order,
// what it found, with buf grown. An unknown queue is ErrUnknownQueue (unless UnknownIsEmpty);
// a damaged record is ErrCorrupt, as for Get (a record that fails its CRC check ErrChecksum). As a
// Get, it sees every message acked before it arrived (visible.go).
func (r *Reader) Records(ctx context.Context, req RecordsRequest, buf []byte) ([]QueueRecords, []byte, error) {
	acked := r.ackMark() // what was acked as the read arrived: it must see that (visible.go)
	req.Max = min(cmpOr(req.Max, DefaultGetMax), MaxRecordsMax)
	req.MaxBytes = min(cmpOr(req.MaxBytes, DefaultGetMaxBytes), MaxGetMaxBytes)
	f := newTagFilter(req.Topic, req.Tags)
	f.bySubject(r.SubjectTags(), req.Topic, req.Subject)
	start := len(buf)
	if req.Wait <= 0 || r.dispatched == nil || r.off != nil {
		out, b, err := r.records(req, f, buf)
		if r.looked != nil {
			r.looked()
		}
		if recordsShort(out, err, req) && r.catchUp(ctx, acked) {
			out, b, err = r.records(req, f, b[:start])
		}
		return out, b, err
	}
	waitCtx, cancel := context.WithTimeout(ctx, req.Wait)
	defer cancel()
	for {
		mark := r.dispatched.Load() // before the read: a unit it misses wakes the wait
		out, b, err := r.records(req, f, buf[:start])
		buf = b
		if err != nil || !allAtHead(out, req.Queues) {
			if recordsShort(out, err, req) && r.catchUp(ctx, acked) {
				out, buf, err = r.records(req, f, buf[:start])
			}
			return out, buf, err
		}
		for i := range req.Queues {
			req.Queues[i].Offset = out[i].NextOffset // past units filtered out up to the head
		}
		if r.waiting != nil {
			r.waiting()
		}
		if err := r.dispatched.Wait(waitCtx, mark+1); err != nil {
			return out, buf, ctx.Err()
		}
	}
}

// recordsShort says a batched read (out, err) found no queue, or ended at the head of a queue with
// room left: where an acked message may have been about to appear (visible.go).
func recordsShort(out []QueueRecords, err error, req RecordsRequest) bool {
	if err != nil {
		return errors.Is(err, ErrUnknownQueue)
	}
	count, bytes, head := 0, 0, false
	for _, q := range out {
		count += q.Count
		bytes += len(q.Records)
		head = head || q.NextOffset >= q.MaxOffset
	}
	return head && count < req.Max && bytes < req.MaxBytes
}

// MaxRecordsMax caps RecordsRequest.Max.
const MaxRecordsMax = 1 << 16

func allAtHead(out []QueueRecords, queues []QueueFrom) bool {
	for i, q := range out {
		if !atHead(GetResult{Status: q.Status, NextOffset: q.NextOffset, MaxOffset: q.MaxOffset}, queues[i].Offset) {
			return false
		}
	}
	return true
}

// records is one pass of Records, without waiting.
func (r *Reader) records(req RecordsRequest, f tagFilter, buf []byte) ([]QueueRecords, []byte, error) {
	out := make([]QueueRecords, len(req.Queues))
	starts, ends := make([]int, len(req.Queues)), make([]int, len(req.Queues))
	left, leftBytes := req.Max, req.MaxBytes
	for i, q := range req.Queues {
		out[i] = QueueRecords{QueueID: q.QueueID, NextOffset: q.Offset}
		buf = append(buf, make([]byte, req.Gap)...)
		starts[i] = len(buf)
		cq, err := r.queue(req.Topic, q.QueueID)
		if err != nil && (!req.UnknownIsEmpty || !errors.Is(err, ErrUnknownQueue)) {
			return nil, buf, err
		}
		share := len(req.Queues) - i
		g := GetRequest{Topic: req.Topic, QueueID: q.QueueID, Offset: q.Offset, Max: max(left/share, 1),
			MaxBytes: max(leftBytes/share, 1), Tags: req.Tags, Subject: req.Subject, hardMaxBytes: max(leftBytes, 1)}
		if left <= 0 || leftBytes <= 0 {
			g.Max = 0 // nothing left: only the queue's status and bounds (collect takes no unit)
		}
		start, count := starts[i], 0
		var res GetResult
		err = r.getWith(cq, g, f, &res, func(v commitlog.View, _ int64, _ int) {
			buf = append(buf, v.Bytes()...)
			count++
		})
		out[i] = QueueRecords{QueueID: q.QueueID, Status: res.Status, NextOffset: res.NextOffset, MinOffset: res.MinOffset,
			MaxOffset: res.MaxOffset, Count: count,
			// Too large only for a whole reply: with less left, the next read has room for it.
			TooLarge: res.tooLarge && count == 0 && leftBytes == req.MaxBytes}
		ends[i] = len(buf)
		if err != nil {
			cut(out[:i+1], starts, ends, buf)
			return out, buf, err
		}
		left -= count
		leftBytes -= len(buf) - start
	}
	cut(out, starts, ends, buf)
	return out, buf, nil
}

// cut sets each queue's Records to its piece of buf ([starts[i], ends[i])), once buf is done
// growing: from its final array.
func cut(out []QueueRecords, starts, ends []int, buf []byte) {
	for i := range out {
		out[i].Records = buf[starts[i]:ends[i]:ends[i]]
	}
}
