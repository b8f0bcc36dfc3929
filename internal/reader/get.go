package reader

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/rocketstore/engine/internal/natssubject"
	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/internal/store/consumequeue"
	"github.com/rocketstore/engine/internal/store/javahash"
	"github.com/rocketstore/engine/internal/store/subjecttags"
)

// Bounds of a Get.
const (
	// DefaultGetMax is the batch size when GetRequest.Max is 0 (RocketMQ's pull batch).
	DefaultGetMax = 32
	// MaxGetMax caps GetRequest.Max.
	MaxGetMax = 1024
	// DefaultGetMaxBytes is the byte bound when GetRequest.MaxBytes is 0 (RocketMQ's
	// maxTransferBytesOnMessageInMemory).
	DefaultGetMaxBytes = 256 << 10
	// MaxGetMaxBytes caps GetRequest.MaxBytes.
	MaxGetMaxBytes = 64 << 20
	// minScanUnits is how many units one Get may look at when tags filter most of them out
	// (RocketMQ's maxFilterMessageSize 16,000 bytes / 20); it looks at Max units if more.
	minScanUnits = 800
	// unitChunk is how many units a Get decodes from the ConsumeQueue at a time.
	unitChunk = 64
	// filteredCap is the first capacity of a filtered Get's messages, which may be few.
	filteredCap = 16
)

// GetRequest asks for the messages of one queue from a queue offset on.
type GetRequest struct {
	Topic   string
	QueueID int32
	// Offset is the queue offset of the first message wanted.
	Offset int64
	// Max bounds the number of messages (DefaultGetMax when <= 0, at most MaxGetMax).
	Max int
	// MaxBytes bounds the sum of the records' sizes (DefaultGetMaxBytes when <= 0, at most
	// MaxGetMaxBytes); the first message is returned whatever its size, as RocketMQ does.
	MaxBytes int
	// Tags filters by the TAGS property: a message is returned only if its TAGS equals one of
	// them exactly. Empty, or containing "*", means every message; "" entries are ignored.
	Tags []string
	// Subject filters by the NATS_SUBJECT property: a NATS subject, or a pattern with '*' and
	// '>' (natssubject.Check with wildcards); "" means every message. A record without the
	// property never matches a subject filter.
	Subject string
	// Wait makes a Get at the head of the queue wait up to this long for a new message
	// (long polling). Ignored by an offline Reader.
	Wait time.Duration
	// UnknownIsEmpty reads a queue the store does not have as an empty one (NoMessageInQueue,
	// offsets 0) instead of ErrUnknownQueue, and a long poll on it waits for its first message:
	// for the owner of a partition, whose queue exists only once its first message is stored.
	UnknownIsEmpty bool
	// NoPropertyMap leaves Message.Properties nil (Tags, Keys, UniqKey and RawProperties are
	// still set): building a map per message costs about a third of a Get of small messages.
	NoPropertyMap bool
	// hardMaxBytes, when set, bounds the records' bytes with no exception for the first one
	// (Records: what one reply can carry).
	hardMaxBytes int
}

// Status classifies a Get as RocketMQ's GetMessageStatus does.
type Status int

const (
	// Found: Messages holds at least one message.
	Found Status = iota
	// NoMatchedMessage: units were read, but the filters took every one out; NextOffset is
	// past them (ScanStopped when the scan limit, not the head of the queue, ended the read).
	NoMatchedMessage
	// NoMessageInQueue: the queue has never held a message (MaxOffset 0).
	NoMessageInQueue
	// OffsetTooSmall: Offset is below MinOffset (retention removed it); NextOffset is MinOffset.
	OffsetTooSmall
	// OffsetOverflowOne: Offset is MaxOffset, where the next message will be.
	OffsetOverflowOne
	// OffsetOverflowBadly: Offset is past MaxOffset; NextOffset is MaxOffset.
	OffsetOverflowBadly
	// OffsetFoundNull: the units read point at records no longer in the CommitLog (their
	// segment was deleted; RocketMQ's MESSAGE_WAS_REMOVING); NextOffset is past them.
	OffsetFoundNull
)

var statusNames = [...]string{
	"FOUND", "NO_MATCHED_MESSAGE", "NO_MESSAGE_IN_QUEUE", "OFFSET_TOO_SMALL",
	"OFFSET_OVERFLOW_ONE", "OFFSET_OVERFLOW_BADLY", "OFFSET_FOUND_NULL",
}

// String is RocketMQ's name of the status.
func (s Status) String() string {
	if s >= 0 && int(s) < len(statusNames) {
		return statusNames[s]
	}
	return fmt.Sprintf("Status(%d)", int(s))
}

// GetResult is what Get found.
type GetResult struct {
	Status   Status
	Messages []Message
	// NextOffset is the offset to ask for next: past every unit this Get consumed, including
	// the ones filtered out, or the corrected offset for the Offset* statuses.
	NextOffset int64
	// MinOffset and MaxOffset are the queue's bounds when it was read.
	MinOffset, MaxOffset int64
	// tooLarge: the first record to read is past GetRequest.hardMaxBytes (Records).
	tooLarge bool
	// ScanStopped: the read stopped at its scan limit (minScanUnits units, or Max if more)
	// before the head of the queue, its filters having passed over most units: later offsets
	// may still match; read on from NextOffset.
	ScanStopped bool
}

// Get reads messages of a queue from req.Offset on: units from the ConsumeQueue, filtered
// by tags code and then by the TAGS property itself (tags codes are hashes, and "Aa" and "BB"
// share one), records from the CommitLog, each copied once into the result. An unknown queue
// is ErrUnknownQueue.
//
// A Get that finds nothing at the head of the queue, or no queue, while dispatch has not yet
// reached what was acked when it arrived, waits for dispatch (bounded) and reads again, so that it
// sees every message acked before it (visible.go).
//
// With req.Wait > 0 a Get that finds the queue at its head (OffsetOverflowOne, an empty queue
// read at 0, or every unit up to the head filtered out) waits for a new message, as RocketMQ's
// long polling does, and reads again; see the package doc. When the wait times out the last
// result is returned with a nil error; when ctx ends, with ctx's error.
//
// A unit whose record does not match it (or is not a record), or a record that fails its CRC
// check (ErrChecksum, crc.go), is ErrCorrupt, returned with the messages before it and
// NextOffset at it.
func (r *Reader) Get(ctx context.Context, req GetRequest) (GetResult, error) {
	acked := r.ackMark() // what was acked as the read arrived: it must see that (visible.go)
	cq, err := r.queue(req.Topic, req.QueueID)
	if errors.Is(err, ErrUnknownQueue) && !req.UnknownIsEmpty && r.catchUp(ctx, acked) {
		cq, err = r.queue(req.Topic, req.QueueID) // a topic's first message makes its queue
	}
	if err != nil && (!req.UnknownIsEmpty || !errors.Is(err, ErrUnknownQueue)) {
		return GetResult{}, err
	}
	req.Max = min(cmpOr(req.Max, DefaultGetMax), MaxGetMax)
	req.MaxBytes = min(cmpOr(req.MaxBytes, DefaultGetMaxBytes), MaxGetMaxBytes)
	f := newTagFilter(req.Topic, req.Tags)
	f.bySubject(r.SubjectTags(), req.Topic, req.Subject)
	if req.Wait <= 0 || r.dispatched == nil || r.off != nil {
		res, err := r.get(cq, req, f)
		if err != nil {
			return res, err
		}
		return r.seeAcked(ctx, acked, cq, req, f, res)
	}
	// One deadline for the whole poll, however often other queues' dispatch wakes it.
	waitCtx, cancel := context.WithTimeout(ctx, req.Wait)
	defer cancel()
	for {
		// Load the mark before reading the queue: a unit the read misses belongs to a
		// record the mark had not passed yet, whose dispatch then ends the wait.
		mark := r.dispatched.Load()
		if cq == nil {
			// A queue's first dispatch creates it before Dispatched passes the record.
			cq = r.cq.Find(req.Topic, req.QueueID)
		}
		res, err := r.get(cq, req, f)
		if err != nil {
			return res, err
		}
		if !atHead(res, req.Offset) {
			return r.seeAcked(ctx, acked, cq, req, f, res)
		}
		req.Offset = res.NextOffset // past units filtered out up to the head
		if r.waiting != nil {
			r.waiting()
		}
		// Wait, not a channel from WaitChan: a wait that ends on waitCtx takes its waiter
		// off the mark, so polls that time out at an idle head leave nothing behind.
		if err := r.dispatched.Wait(waitCtx, mark+1); err != nil {
			// The wait ran out (nil: the last result), ctx ended (its error), or the mark
			// failed because the engine is stopping (nil: the last result).
			return res, ctx.Err()
		}
	}
}

func cmpOr(v, def int) int {
	if v <= 0 {
		return def
	}
	return v
}

// atHead says a Get found nothing because nothing is there yet.
func atHead(res GetResult, offset int64) bool {
	switch res.Status {
	case OffsetOverflowOne:
		return true
	case NoMessageInQueue:
		return offset == 0
	case NoMatchedMessage:
		return res.NextOffset == res.MaxOffset
	}
	return false
}

// get is one read of Get, without waiting; a nil cq is a queue not there yet (UnknownIsEmpty).
func (r *Reader) get(cq *consumequeue.ConsumeQueue, req GetRequest, f tagFilter) (GetResult, error) {
	var res GetResult
	var buf buffer
	err := r.getWith(cq, req, f, &res, func(v commitlog.View, phys int64, hint int) {
		if res.Messages == nil {
			n := min(int64(req.Max), res.MaxOffset-req.Offset)
			if !f.all || req.Subject != "" {
				n = min(n, filteredCap) // most units may miss: grow as they match
			}
			res.Messages = make([]Message, 0, n)
		}
		res.Messages = append(res.Messages, Message{})
		decodeInto(&res.Messages[len(res.Messages)-1], v, phys, r.host, &buf, hint, !req.NoPropertyMap)
	})
	return res, err
}

// getWith is one read of a queue into *res, its records going to emit.
func (r *Reader) getWith(cq *consumequeue.ConsumeQueue, req GetRequest, f tagFilter, res *GetResult, emit emitFunc) error {
	if cq == nil {
		*res = GetResult{Status: NoMessageInQueue}
		return nil
	}
	release, err := r.use()
	if err != nil {
		return err
	}
	defer release()
	lo, hi := cq.MinOffset(), cq.MaxOffset()
	*res = GetResult{MinOffset: lo, MaxOffset: hi, NextOffset: req.Offset}
	switch off := req.Offset; {
	case hi == 0:
		res.Status, res.NextOffset = NoMessageInQueue, 0
	case off < lo:
		res.Status, res.NextOffset = OffsetTooSmall, lo
	case off == hi:
		res.Status = OffsetOverflowOne
	case off > hi:
		res.Status, res.NextOffset = OffsetOverflowBadly, hi
	default:
		return r.collect(cq, req, f, res, emit)
	}
	return nil
}

// emitFunc takes a record a read found: v, at phys, with hint the bytes the records the batch
// may still take (what to size a buffer by).
type emitFunc func(v commitlog.View, phys int64, hint int)

// collect reads units from req.Offset (inside the queue's bounds) until the batch is full, the
// scan limit is reached or the queue ends, as RocketMQ's getMessage: a unit whose tags code
// misses is skipped without touching the CommitLog; a unit whose record is gone marks the
// rest of that segment as gone; the first record is taken whatever its size. Each record found
// goes to emit (a view of the mapping: emit copies what it keeps).
func (r *Reader) collect(cq *consumequeue.ConsumeQueue, req GetRequest, f tagFilter, res *GetResult, emit emitFunc) error {
	var units [unitChunk]consumequeue.Unit
	cur := cursor{q: r.log.Queue()}
	defer cur.release()
	res.Status = NoMatchedMessage
	found := 0
	next, bytes := req.Offset, 0
	scanLeft := max(minScanUnits, req.Max)
	goneBelow := int64(math.MinInt64) // records below it are known gone (RocketMQ's nextPhyFileStartOffset)
	literal := req.Subject != "" && natssubject.Literal(req.Subject)
	for scanLeft > 0 {
		k, err := cq.Read(next, units[:min(unitChunk, scanLeft)])
		if err != nil {
			if next == req.Offset && errors.Is(err, consumequeue.ErrOutOfRange) {
				// Retention moved the queue's start since its bounds were read.
				res.Status, res.NextOffset = OffsetTooSmall, max(cq.MinOffset(), req.Offset)
				return nil
			}
			if errors.Is(err, consumequeue.ErrOutOfRange) {
				break // the end of the queue
			}
			return err
		}
		if k == 0 {
			break
		}
		hint := f.bytesHint(units[:k], req.Max-found, req.MaxBytes-bytes)
		for _, u := range units[:k] {
			if found >= req.Max || (bytes > 0 && bytes+int(u.Size) > req.MaxBytes) {
				res.NextOffset = next
				return nil
			}
			if req.hardMaxBytes > 0 && bytes+int(u.Size) > req.hardMaxBytes && !u.IsBlank() && f.codeMatch(u.TagsCode) {
				// Past what the reply can carry, whatever the first-record rule says.
				res.NextOffset, res.tooLarge = next, found == 0
				return nil
			}
			n := next
			next++
			scanLeft--
			if u.IsBlank() {
				continue
			}
			if u.Phys < goneBelow {
				r.skipped(res, OffsetFoundNull)
				continue
			}
			// An offline reader may have caught the newest unit in the middle of its write,
			// before its tags code: a miss there is confirmed with the record.
			confirm := r.off != nil && n == res.MaxOffset-1
			if !f.codeMatch(u.TagsCode) && !confirm {
				r.skipped(res, NoMatchedMessage)
				continue
			}
			v, err := cur.view(u.Phys)
			if err == nil && confirm && matchUnit(v, u, cq, n) != nil {
				err = errAhead // the newest unit, caught half written: not readable yet
			}
			if errors.Is(err, errAhead) {
				// An offline Reader whose ConsumeQueues were refreshed before its CommitLog,
				// or that caught the newest unit half written: what follows is not readable
				// yet, as if the queue ended here.
				res.MaxOffset, res.NextOffset = n, n
				if n == req.Offset {
					res.Status = OffsetOverflowOne
				}
				return nil
			}
			if errors.Is(err, errGone) {
				r.skipped(res, OffsetFoundNull)
				goneBelow = r.log.NextFile(u.Phys)
				continue
			}
			if err == nil {
				err = matchUnit(v, u, cq, n)
			}
			if err != nil {
				res.NextOffset = n
				return fmt.Errorf("%w: %s offset %d: %w", ErrCorrupt, cq, n, err)
			}
			if !f.all {
				if tags, _ := v.Properties().Get(commitlog.PropTags); !f.tagsMatch(tags) {
					r.skipped(res, NoMatchedMessage)
					continue
				}
			}
			if req.Subject != "" {
				s, ok := v.Properties().Get(natssubject.Property)
				if !ok || literal && string(s) != req.Subject || !literal && !natssubject.Match(req.Subject, s) {
					r.skipped(res, NoMatchedMessage)
					continue
				}
			}
			if err := r.checkCRC(v, u.Phys, func() string {
				return fmt.Sprintf("the record of %s at queue offset %d (read on from offset %d past it)", cq, n, n+1)
			}); err != nil {
				res.NextOffset = n
				return err
			}
			emit(v, u.Phys, hint)
			found++
			res.Status = Found
			bytes += int(u.Size)
		}
	}
	res.NextOffset = next
	res.ScanStopped = scanLeft <= 0 && next < res.MaxOffset
	return nil
}

// skipped records why a unit gave no message while none has been found: the status of the
// last unit skipped wins, as in RocketMQ. Once a message is found the status stays Found.
func (r *Reader) skipped(res *GetResult, why Status) {
	if res.Status != Found {
		res.Status = why
	}
}

// matchUnit checks that the record a unit points at is the one the unit was built from.
func matchUnit(v commitlog.View, u consumequeue.Unit, cq *consumequeue.ConsumeQueue, n int64) error {
	if v.PhysicalOffset() != u.Phys || v.TotalSize() != int(u.Size) || v.QueueOffset() != n ||
		v.QueueID() != cq.QueueID() || string(v.Topic()) != cq.Topic() {
		return fmt.Errorf("unit {phys %d size %d} names a record of %s/%d offset %d at %d, %d bytes",
			u.Phys, u.Size, v.Topic(), v.QueueID(), v.QueueOffset(), v.PhysicalOffset(), v.TotalSize())
	}
	return nil
}

// tagFilter is a Get's tag filter: the tags wanted and their tags codes, and under the
// subject-tag rule the code of the one subject wanted.
type tagFilter struct {
	all   bool
	codes bool // tags codes can be trusted as a first filter (not on the delay topic)
	tags  []string
	hash  []int64
	// subject: a literal subject filter in a topic under the subject-tag rule, whose units
	// carry their subject's code (subjectCode the wanted one's).
	subject     bool
	subjectCode int64
}

// bySubject makes f pass over the units of other subjects than subject, a literal subject, when
// topic is in set: their codes are their subjects'.
func (f *tagFilter) bySubject(set *subjecttags.Set, topic, subject string) {
	if subject != "" && natssubject.Literal(subject) && set.Has(topic) {
		f.subject, f.subjectCode = true, subjecttags.Code(subject)
	}
}

func newTagFilter(topic string, tags []string) tagFilter {
	f := tagFilter{codes: topic != commitlog.ScheduleTopic}
	for _, t := range tags {
		switch t {
		case "*":
			return tagFilter{all: true}
		case "":
			continue
		}
		if !slices.Contains(f.tags, t) {
			f.tags = append(f.tags, t)
			f.hash = append(f.hash, javahash.TagsCode(t))
		}
	}
	f.all = len(f.tags) == 0
	return f
}

// codeMatch says a unit with this tags code may carry one of the tags, and the subject under
// the subject-tag rule (a cheap test with false positives: equal hashes).
func (f tagFilter) codeMatch(code int64) bool {
	if f.subject && subjecttags.Skip(code, f.subjectCode) {
		return false
	}
	return f.all || !f.codes || slices.Contains(f.hash, code)
}

// tagsMatch is the exact test on the TAGS property.
func (f tagFilter) tagsMatch(tags []byte) bool {
	if f.all {
		return true
	}
	for _, t := range f.tags {
		if string(tags) == t {
			return true
		}
	}
	return false
}

// bytesHint is what the records among units that pass the tags codes take, copies and ids,
// bounded by what the batch still has room for (count messages, room bytes): the size of the
// buffer a Get copies into.
func (f tagFilter) bytesHint(units []consumequeue.Unit, count, room int) int {
	n := 0
	for _, u := range units {
		if count <= 0 || n >= room {
			break
		}
		if !u.IsBlank() && f.codeMatch(u.TagsCode) {
			n += int(u.Size) + msgIDRoom
			count--
		}
	}
	return n
}
