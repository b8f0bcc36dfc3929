package console

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/rocketstore/engine/engine"
)

// Search by time (and subject) within a topic, paged without a cap: a page merges the topic's
// queues by store time, and its cursor is where each queue stands (its next queue offset, or
// done), so that the next page goes on from there however many messages the range holds. A
// shared link names the range; the cursor names a page of it.
//
// Messages of one queue are in store-time order; across queues the page is merged up to the
// cutoff, the earliest "last time seen" of the queues not yet exhausted: nothing still unread
// in any queue can come before it, so pages follow each other in time order (messages stored in
// the same millisecond aside, which keep queue order).

// timeSearch asks for a page of a topic's messages stored in [Begin, End] (ms, End 0: no
// bound), matching Subject ("" for all).
type timeSearch struct {
	Topic      string
	Subject    string
	Begin, End int64
	Limit      int
	// After is the previous page's cursor (nil: the first page).
	After queueCursor
}

// queueCursor is, by queue id, the next offset to read; -1: the queue is done.
type queueCursor map[int32]int64

const queueDone = -1

// String is the cursor in a URL: "q:offset" by queue, comma-separated, "q:-" for a done queue.
func (c queueCursor) String() string {
	ids := make([]int32, 0, len(c))
	for q := range c {
		ids = append(ids, q)
	}
	slices.Sort(ids)
	var b strings.Builder
	for i, q := range ids {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(int(q)))
		b.WriteByte(':')
		if c[q] == queueDone {
			b.WriteByte('-')
		} else {
			b.WriteString(strconv.FormatInt(c[q], 10))
		}
	}
	return b.String()
}

var errBadParam = errors.New("bad parameter")

func parseQueueCursor(s string) (queueCursor, error) {
	c := queueCursor{}
	for part := range strings.SplitSeq(s, ",") {
		q, off, ok := strings.Cut(part, ":")
		id, err := strconv.ParseInt(q, 10, 32)
		if !ok || err != nil || id < 0 {
			return nil, fmt.Errorf("%w: cursor %q: want queue:offset pairs", errBadParam, s)
		}
		if off == "-" {
			c[int32(id)] = queueDone
			continue
		}
		n, err := strconv.ParseInt(off, 10, 64)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%w: cursor %q: offset %q", errBadParam, s, off)
		}
		c[int32(id)] = n
	}
	return c, nil
}

// timePage is a page and the cursor of the next one (nil when the range is read).
type timePage struct {
	Messages []engine.ReadMessage
	Next     queueCursor
}

// maxTimeRounds bounds the reads one page makes when a subject filter leaves queues without a
// match for long: the page then ends with fewer messages, or none, and a cursor that moved on.
const maxTimeRounds = 8

// searchTime reads one page (see above).
func searchTime(ctx context.Context, st Store, req timeSearch) (timePage, error) {
	qos, err := st.QueueOffsets(req.Topic)
	if err != nil {
		return timePage{}, err
	}
	cur := queueCursor{}
	for _, qo := range qos {
		off, ok := req.After[qo.QueueID] // a queue made since the first page starts like the others
		switch {
		case ok:
		case req.Begin > 0:
			if off, err = st.OffsetForTime(req.Topic, qo.QueueID, req.Begin); err != nil {
				return timePage{}, err
			}
		default:
			off = qo.Min
		}
		cur[qo.QueueID] = off
	}
	var out []engine.ReadMessage
	for round := 0; round < maxTimeRounds && len(out) == 0; round++ {
		if err := ctx.Err(); err != nil {
			return timePage{}, err
		}
		var done bool
		out, done, err = timeRound(ctx, st, req, cur)
		if err != nil || done {
			return timePage{Messages: out}, err
		}
	}
	return timePage{Messages: out, Next: cur}, nil
}

// queueRead is what one round read of one queue: its matching messages in range, the time up to
// which it has been read, and where it stands after them.
type queueRead struct {
	id       int32
	msgs     []engine.ReadMessage
	seen     int64 // the store time of the last unit read (of its last message when it matched)
	next     int64 // the offset after the units read
	exhaust  bool  // nothing further in range
	consumed int   // messages of msgs taken into the page
}

// timeRound reads up to Limit messages of every queue not done, merges them up to the cutoff, and
// moves cur past what the page took. done says every queue is.
func timeRound(ctx context.Context, st Store, req timeSearch, cur queueCursor) ([]engine.ReadMessage, bool, error) {
	var reads []*queueRead
	for q, off := range cur {
		if off == queueDone {
			continue
		}
		qr, err := readQueue(ctx, st, req, q, off)
		if err != nil {
			return nil, false, err
		}
		reads = append(reads, qr)
	}
	if len(reads) == 0 {
		return nil, true, nil
	}
	// The cutoff: the earliest time any queue not exhausted has been read up to.
	cutoff := int64(1<<63 - 1)
	for _, qr := range reads {
		if !qr.exhaust {
			cutoff = min(cutoff, qr.seen)
		}
	}
	var out []engine.ReadMessage
	for len(out) < req.Limit {
		var best *queueRead
		for _, qr := range reads {
			if qr.consumed < len(qr.msgs) && qr.msgs[qr.consumed].StoreTimestamp <= cutoff &&
				(best == nil || before(qr.msgs[qr.consumed], best.msgs[best.consumed])) {
				best = qr
			}
		}
		if best == nil {
			break
		}
		out = append(out, best.msgs[best.consumed])
		best.consumed++
	}
	allDone := true
	for _, qr := range reads {
		switch {
		case qr.consumed == len(qr.msgs) && qr.exhaust:
			cur[qr.id] = queueDone
		case qr.consumed == len(qr.msgs):
			// Every match read is in the page: the units after the last one did not match, and
			// the next match of the queue lies past them.
			cur[qr.id] = qr.next
		case qr.consumed > 0:
			cur[qr.id] = qr.msgs[qr.consumed-1].QueueOffset + 1
		}
		allDone = allDone && cur[qr.id] == queueDone
	}
	return out, allDone, nil
}

// before orders messages by store time, then queue, then offset.
func before(a, b engine.ReadMessage) bool {
	return cmp.Or(cmp.Compare(a.StoreTimestamp, b.StoreTimestamp), cmp.Compare(a.QueueID, b.QueueID),
		cmp.Compare(a.QueueOffset, b.QueueOffset)) < 0
}

// readQueue reads up to Limit matching messages of queue q from off.
func readQueue(ctx context.Context, st Store, req timeSearch, q int32, off int64) (*queueRead, error) {
	qr := &queueRead{id: q, next: off, seen: -1 << 63}
	res, err := st.Get(ctx, engine.GetRequest{Topic: req.Topic, QueueID: q, Offset: off, Max: req.Limit, Subject: req.Subject})
	if err != nil {
		return nil, err
	}
	qr.next = res.NextOffset
	for _, m := range res.Messages {
		if req.End > 0 && m.StoreTimestamp > req.End {
			qr.exhaust = true
			qr.next = m.QueueOffset
			break
		}
		qr.msgs = append(qr.msgs, m)
		qr.seen = m.StoreTimestamp
	}
	switch {
	case qr.exhaust:
	case res.NextOffset >= res.MaxOffset:
		qr.exhaust = true // read to its end: the next page finds newer messages by a new search
	case len(res.Messages) == 0 || res.NextOffset > res.Messages[len(res.Messages)-1].QueueOffset+1:
		// Units filtered out after the last match: how far in time they go is the time of the
		// last unit read, which one more read without the filter tells.
		u, err := st.Get(ctx, engine.GetRequest{Topic: req.Topic, QueueID: q, Offset: res.NextOffset - 1, Max: 1, NoPropertyMap: true})
		if err != nil {
			return nil, err
		}
		if len(u.Messages) == 1 {
			qr.seen = u.Messages[0].StoreTimestamp
			if req.End > 0 && qr.seen > req.End {
				qr.exhaust = true
			}
		}
	}
	return qr, nil
}
