package reader

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/internal/store/consumequeue"
	"github.com/rocketstore/engine/internal/store/indexfile"
	"github.com/rocketstore/engine/internal/store/segment"
	"github.com/rocketstore/engine/internal/store/subjecttags"
	"github.com/rocketstore/engine/internal/vfs"
)

// Errors the Reader returns, wrapped with detail; compare with errors.Is.
var (
	// ErrUnknownQueue: the store has no such topic, or no such queue in the topic.
	ErrUnknownQueue = errors.New("reader: unknown topic or queue")
	// ErrBadMsgID: the string is not an offset message id.
	ErrBadMsgID = errors.New("reader: malformed message id")
	// ErrNotFound: no message has that id (never stored, or deleted by retention).
	ErrNotFound = errors.New("reader: message not found")
	// ErrIndexDisabled: Query on a store without an IndexFile.
	ErrIndexDisabled = errors.New("reader: message index is disabled")
	// ErrInvalidRequest: a request field is out of range (empty topic or key, say).
	ErrInvalidRequest = errors.New("reader: invalid request")
	// ErrCorrupt: a ConsumeQueue unit names a record that does not match it, or a record
	// does not parse. The store is damaged; recovery of the writer repairs torn tails.
	ErrCorrupt = errors.New("reader: store inconsistent")
	// ErrChecksum: a record fails its CRC check (a bit flipped on disk, a torn write): it is
	// not served. Returned with ErrCorrupt (errors.Is matches both).
	ErrChecksum = errors.New("reader: record fails its CRC check")
	// ErrClosed: the Reader was closed.
	ErrClosed = errors.New("reader: closed")
)

// Watermark is what long polls wait on: the engine's Dispatched mark, which every record passes
// once its ConsumeQueue unit and index keys are in place (*stages.Watermark is one).
type Watermark interface {
	// Load is the offset the mark is at.
	Load() int64
	// Wait returns nil once the mark is at or past off, an error once the mark failed below
	// off, or ctx's error when ctx ends first; a wait that ends on ctx leaves nothing behind.
	Wait(ctx context.Context, off int64) error
}

// Reader serves reads from a store. All its methods are safe for concurrent use, also with
// the engine writing the store.
//
// A Reader made by New reads the engine's open stores and owns nothing: closing it does
// nothing, and the engine must close its stores only after the last read has returned. A
// Reader made by OpenOffline owns read-only copies of the stores and must be closed.
type Reader struct {
	cq         *consumequeue.Store
	dispatched Watermark // nil offline: no long polling
	// acked is what acks wait for (Durable or Written), and ackWait how long a read waits for
	// Dispatched to reach it (visible.go); nil: reads do not wait.
	acked   Watermark
	ackWait time.Duration
	host    netip.AddrPort // names message ids; invalid: each record's STOREHOST

	// log and index are fixed for an engine's Reader; an offline Reader swaps them in Refresh
	// under off.mu, which every read holds shared (see use).
	log   *commitlog.Log
	index *indexfile.Service // nil when the index is off
	off   *offline           // nil for an engine's Reader

	// propCRC says where records must carry the whole-record CRC entry (crc.go); crcFailures
	// counts the reads refused on a failed CRC check.
	propCRC     commitlog.PropCRCRule
	crcFailures atomic.Int64
	// noCRC (benchmarks) skips the check, to measure what it costs in the same run.
	noCRC bool

	// subjectTags are the topics whose tag codes a read by subject may skip by
	// (internal/store/subjecttags); nil is none.
	subjectTags atomic.Pointer[subjecttags.Set]

	// waiting, when set (tests), is called each time a long poll is about to wait on the
	// mark (a dispatch from then on ends that wait).
	waiting func()
	// looked, when set, is called by Get and Records right after their first look, before they
	// decide whether to wait for dispatch (tests: dispatch passing at that moment).
	looked func()
}

// New makes a Reader over an engine's open stores. index is nil when the IndexFile is off;
// dispatched is the engine's Dispatched watermark, which long polls wait on (nil: Wait is
// ignored). storeHost is the engine's store host: message ids are made from it and the
// physical offset, as the ids the engine hands to publishers are; the invalid AddrPort uses
// each record's own STOREHOST field instead.
func New(log *commitlog.Log, cq *consumequeue.Store, index *indexfile.Service, dispatched Watermark, storeHost netip.AddrPort) *Reader {
	return &Reader{log: log, cq: cq, index: index, dispatched: dispatched, host: storeHost}
}

// SetSubjectTags sets the topics under the subject-tag rule, whose reads by one subject skip the
// units of other subjects by their tag codes. Only a set the store has saved may be given.
func (r *Reader) SetSubjectTags(s *subjecttags.Set) { r.subjectTags.Store(s) }

// LoadSubjectTags sets the topics under the subject-tag rule from the store in dir.
func (r *Reader) LoadSubjectTags(fsys vfs.FS, dir string) error {
	s, err := subjecttags.Load(fsys, dir)
	if err == nil {
		r.SetSubjectTags(s)
	}
	return err
}

// SubjectTags are the topics under the subject-tag rule (nil: none).
func (r *Reader) SubjectTags() *subjecttags.Set { return r.subjectTags.Load() }

// use makes the log and index safe to use until release is called: a no-op for an engine's
// Reader, a shared lock against Refresh for an offline one. It fails once the Reader is closed.
func (r *Reader) use() (release func(), err error) {
	if r.off == nil {
		return noop, nil
	}
	r.off.mu.RLock()
	if r.off.closed {
		r.off.mu.RUnlock()
		return nil, ErrClosed
	}
	return r.off.mu.RUnlock, nil
}

func noop() {}

// queue returns the ConsumeQueue (topic, queueID) or ErrUnknownQueue.
func (r *Reader) queue(topic string, queueID int32) (*consumequeue.ConsumeQueue, error) {
	if cq := r.cq.Find(topic, queueID); cq != nil {
		return cq, nil
	}
	return nil, fmt.Errorf("%w: %s/%d", ErrUnknownQueue, topic, queueID)
}

// cursor reads records from the CommitLog while holding at most one segment: consecutive
// records in one segment cost one reference, taken when the cursor enters the segment and
// dropped when it leaves it or is released. Views it returns are valid until then.
type cursor struct {
	q *segment.Queue
	f *segment.File
}

// view parses the record at phys in place. A phys at or past the end of the log (as far as
// this Reader has it mapped) is errAhead; one no segment holds any more (retention deleted
// it) is errGone; bytes there that are not a record wrap commitlog.ErrCorrupt.
func (c *cursor) view(phys int64) (commitlog.View, error) {
	if c.f == nil || phys < c.f.Base() || phys >= c.f.End() {
		c.release()
		f, err := c.q.Acquire(phys)
		if err != nil {
			if phys >= c.q.MaxOffset() {
				return commitlog.View{}, fmt.Errorf("%w: %d", errAhead, phys)
			}
			return commitlog.View{}, fmt.Errorf("%w: %w", errGone, err)
		}
		c.f = f
	}
	pos, wrote := phys-c.f.Base(), c.f.Wrote()
	if pos >= wrote {
		return commitlog.View{}, fmt.Errorf("%w: %d", errAhead, phys)
	}
	return commitlog.Parse(c.f.Data()[pos:wrote])
}

// release drops the segment the cursor holds.
func (c *cursor) release() {
	if c.f != nil {
		c.f.Release()
		c.f = nil
	}
}

var (
	// errGone marks a record that is not in the log any more.
	errGone = errors.New("reader: record no longer in the log")
	// errAhead marks an offset past the end of the log. An engine's Reader meets it only for
	// ids that name nothing; an offline Reader also for records written after its CommitLog
	// was mapped, whose units a ConsumeQueue Refresh already shows.
	errAhead = errors.New("reader: offset past the end of the log")
)
