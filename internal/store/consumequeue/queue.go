package consumequeue

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/rocketstore/engine/internal/store/segment"
)

// pageSize is the unit of RocketMQ's flush accounting (OS_PAGE_SIZE).
const pageSize = 4096

// maxQueueOffset is the largest queue offset whose file, of fileSize bytes, ends at or below
// 2^63-1 (segment.MaxEnd): past it a file's end, and the queue's positions after a restart,
// would wrap negative.
func maxQueueOffset(fileSize int64) int64 { return segment.MaxEnd(fileSize)/UnitSize - 1 }

// MaxQueueOffset is the largest queue offset a queue of the Store can hold: a message past it
// cannot be dispatched, so the writer must not give it out.
func (s *Store) MaxQueueOffset() int64 { return maxQueueOffset(s.cfg.fileSize) }

// ConsumeQueue is one (topic, queueId) queue: its files, its min and max offsets and the max
// CommitLog offset its units reach. It is made by a Store.
//
// Ownership: Put, Recover and TruncateDirty belong to the queue's single writer and never run
// at the same time; Flush belongs to one flusher; DeleteExpired and CorrectMinOffset to one
// cleaner; readers may call anything else at any time.
type ConsumeQueue struct {
	topic   string
	queueID int32
	dir     string
	cfg     *config
	store   *Store

	// mu guards the mapping's lifetime: every use of the files holds it read-locked, so the
	// Store's sweep, which unmaps only with TryLock, never unmaps under a writer or a reader.
	// Mapping and Close hold it exclusively.
	mu     sync.RWMutex
	seg    *segment.Queue // nil while unmapped
	end    int64          // while unmapped: the queue's end to restore on mapping; -1 before the first mapping
	nfiles int            // while unmapped: how many files the queue had
	closed bool
	ringed bool // listed as mapped by the Store; guarded by store.mapped.mu

	// minMu serialises the writers of minLogic and minPhys (the dispatcher's first unit and the
	// cleaner's corrections), which read before they write.
	minMu     sync.Mutex
	minLogic  atomic.Int64 // RocketMQ's minLogicOffset, in bytes; -1 until known
	minPhys   atomic.Int64 // Phys of the unit at minLogic; -1 when not known
	maxPhys   atomic.Int64 // End of the last unit with Phys > 0 (Unit.real); -1 when none
	recovered atomic.Bool  // maxPhys is exact (Recover ran or the queue started empty)
	roEnd     atomic.Int64 // read-only queues: the end findEnd found, in bytes (see endOf)
	used      atomic.Bool  // used since the Store's sweep last passed (CLOCK bit)

	// The writer remembers how far its file is reserved, so that Put does not lock the
	// segment's reservation for every unit.
	resvFile *segment.File
	resvTo   int64
}

func newQueue(s *Store, topic string, queueID int32, dir string) *ConsumeQueue {
	cq := &ConsumeQueue{topic: topic, queueID: queueID, dir: dir, cfg: s.cfg, store: s, end: -1}
	cq.minLogic.Store(-1)
	cq.minPhys.Store(-1)
	cq.maxPhys.Store(-1)
	return cq
}

// Topic is the queue's topic.
func (cq *ConsumeQueue) Topic() string { return cq.topic }

// QueueID is the queue's id.
func (cq *ConsumeQueue) QueueID() int32 { return cq.queueID }

// Dir is the queue's directory, <root>/consumequeue/<topic>/<queueId>.
func (cq *ConsumeQueue) Dir() string { return cq.dir }

// String names the queue "topic/queueId" in errors.
func (cq *ConsumeQueue) String() string { return fmt.Sprintf("%s/%d", cq.topic, cq.queueID) }

// use returns the mapped files with mu read-locked, mapping them first when needed; the caller
// must call cq.mu.RUnlock.
func (cq *ConsumeQueue) use() (*segment.Queue, error) {
	for {
		cq.mu.RLock()
		if q := cq.seg; q != nil {
			if !cq.used.Load() {
				cq.used.Store(true)
			}
			return q, nil
		}
		closed := cq.closed
		cq.mu.RUnlock()
		if closed {
			return nil, fmt.Errorf("%w: %s", ErrClosed, cq)
		}
		if err := cq.mapFiles(); err != nil {
			return nil, err
		}
	}
}

// mappedOrNil returns the files with mu read-locked when they are mapped, or nil with mu
// unlocked when they are not: an unmapped queue holds nothing unflushed.
func (cq *ConsumeQueue) mappedOrNil() *segment.Queue {
	cq.mu.RLock()
	if cq.seg == nil {
		cq.mu.RUnlock()
		return nil
	}
	return cq.seg
}

// mapFiles opens the queue's files and restores the end they had when they were unmapped.
func (cq *ConsumeQueue) mapFiles() error {
	cq.mu.Lock()
	if cq.closed || cq.seg != nil {
		cq.mu.Unlock()
		return nil // use looks again
	}
	q, err := segment.Open(cq.segOptions())
	if err != nil {
		cq.mu.Unlock()
		return fmt.Errorf("consumequeue %s: %w", cq, err)
	}
	if cq.cfg.readOnly {
		// Nothing may change on disk: the end is found by a scan, from the one known before
		// the queue was unmapped, if any.
		cq.minMu.Lock()
		err := cq.findEnd(q, cq.end)
		cq.minMu.Unlock()
		if err != nil {
			cq.mu.Unlock()
			return errors.Join(err, q.Close())
		}
	} else if cq.end >= 0 {
		// Nothing wrote while unmapped, so no file lies past end: this only sets positions.
		if err := q.TruncateTo(cq.end); err != nil {
			cq.mu.Unlock()
			return errors.Join(fmt.Errorf("consumequeue %s: %w", cq, err), q.Close())
		}
	}
	if cq.minLogic.Load() < 0 {
		cq.minLogic.CompareAndSwap(-1, q.MinOffset())
	}
	cq.seg = q
	cq.used.Store(true)
	cq.mu.Unlock()
	cq.store.noteMapped(cq)
	return nil
}

// evict unmaps the files if nobody holds them and every byte is flushed, and reports whether
// the queue is unmapped afterwards. It never waits.
func (cq *ConsumeQueue) evict() (bool, error) {
	if !cq.mu.TryLock() {
		return false, nil
	}
	defer cq.mu.Unlock()
	q := cq.seg
	if q == nil {
		return true, nil
	}
	if q.Last() != nil && q.FlushedWhere() < q.MaxOffset() {
		// Flush it first: unmapping keeps dirty pages in the page cache, but the checkpoint's
		// thorough flush would no longer reach them, and waiting for that flush let 10,000
		// topics x 4 queues stay mapped (40,000 mappings, near vm.max_map_count).
		if err := q.Flush(q.MaxOffset()); err != nil {
			return false, err
		}
	}
	cq.end, cq.nfiles = cq.endOf(q), len(q.Files())
	cq.seg = nil
	return true, q.Close()
}

// Put writes the unit of the message with queue offset queueOffset. It follows RocketMQ's
// putMessagePositionInfo:
//   - a unit already built (u.End() <= MaxPhysicalOffset) or whose position is below the write
//     position is skipped, and Put returns nil: recovery re-dispatches records it already has;
//   - a unit for an empty queue at an offset > 0 starts the queue there: the file that holds
//     the offset is created and filled with Blank units before it (fillPreBlank), and MinOffset
//     becomes queueOffset;
//   - a unit past the write position of a non-empty queue is refused with ErrGap.
//
// Files roll as they fill. The write position moves after the 20 bytes are in place, so
// readers see whole units only. A full disk is an error from the reservation, never a fault.
func (cq *ConsumeQueue) Put(queueOffset int64, u Unit) error {
	if cq.cfg.readOnly {
		return fmt.Errorf("%w: put %s", ErrReadOnly, cq)
	}
	if !u.Valid() || u.End() < u.Phys {
		return fmt.Errorf("%w: %s: %+v", ErrInvalidUnit, cq, u)
	}
	if queueOffset < 0 || queueOffset > maxQueueOffset(cq.cfg.fileSize) {
		return fmt.Errorf("%w: %s: queue offset %d (a queue holds offsets 0 to %d)", ErrInvalidUnit, cq, queueOffset,
			maxQueueOffset(cq.cfg.fileSize))
	}
	if u.End() <= cq.maxPhys.Load() {
		return nil
	}
	q, err := cq.use()
	if err != nil {
		return err
	}
	defer cq.mu.RUnlock()
	want := queueOffset * UnitSize
	f := q.Last()
	if f == nil || (f == q.First() && cq.onlyFillers(f)) {
		return cq.putFirst(q, f, want, u)
	}
	switch end := f.Base() + f.Wrote(); {
	case want < end:
		return nil
	case want > end:
		return fmt.Errorf("%w: %s: queue offset %d, but the queue ends at %d", ErrGap, cq, queueOffset, end/UnitSize)
	}
	if f.Full() {
		if f, err = q.Roll(f.End()); err != nil {
			return fmt.Errorf("consumequeue %s: %w", cq, err)
		}
	}
	return cq.write(f, want-f.Base(), u)
}

// onlyFillers says the only file f holds no unit that names a record: nothing, or pre-blank
// units that a crash kept without the unit after them. Such a queue is empty for Put.
func (cq *ConsumeQueue) onlyFillers(f *segment.File) bool {
	wrote := f.Wrote()
	if wrote == 0 {
		return true
	}
	if cq.maxPhys.Load() >= 0 {
		return false
	}
	return leadingFillers(f.Data()[:wrote]) == wrote
}

// putFirst writes the first unit of an empty queue: no file, or one file with no unit that
// names a record (see onlyFillers).
func (cq *ConsumeQueue) putFirst(q *segment.Queue, f *segment.File, want int64, u Unit) error {
	cq.minMu.Lock()
	defer cq.minMu.Unlock()
	base := want - want%cq.cfg.fileSize
	if f != nil && f.Base() != base {
		// The only file covers other offsets (its units were lost in a crash before they were
		// flushed, say): it is replaced by the file that holds want.
		if err := cutAt(q, f.Base()); err != nil {
			return fmt.Errorf("consumequeue %s: %w", cq, err)
		}
		f = nil
	}
	if f != nil && f.Wrote() > 0 {
		// Fillers a crash left, maybe torn: clear them, so that none past the new ones can
		// count as units after another crash.
		old := f.Wrote()
		if err := q.TruncateTo(base); err != nil {
			return fmt.Errorf("consumequeue %s: %w", cq, err)
		}
		if err := cq.scrub(q, f, 0, old); err != nil {
			return err
		}
	}
	var err error
	if f == nil {
		if f, err = q.Roll(base); err != nil {
			return fmt.Errorf("consumequeue %s: %w", cq, err)
		}
	}
	// The queue's flushed offset must start at this file: a queue that starts past 0 would
	// otherwise look for the flushed offset in a file that does not exist and never flush.
	if err := q.TruncateTo(base); err != nil {
		return fmt.Errorf("consumequeue %s: %w", cq, err)
	}
	pos := want - base
	if err := cq.reserve(f, pos+UnitSize); err != nil {
		return err
	}
	data := f.Data()
	for p := int64(0); p < pos; p += UnitSize {
		copy(data[p:p+UnitSize], blankBytes[:])
	}
	u.Encode(data[pos : pos+UnitSize])
	cq.minLogic.Store(want)
	cq.minPhys.Store(u.Phys)
	if u.real() {
		cq.maxPhys.Store(u.End())
	}
	cq.recovered.Store(true)
	f.SetWrote(pos + UnitSize)
	return nil
}

// write puts u at pos of f, the last file, and then moves the write position over it.
func (cq *ConsumeQueue) write(f *segment.File, pos int64, u Unit) error {
	if err := cq.reserve(f, pos+UnitSize); err != nil {
		return err
	}
	u.Encode(f.Data()[pos : pos+UnitSize])
	if u.real() {
		cq.maxPhys.Store(u.End())
	}
	f.SetWrote(pos + UnitSize)
	return nil
}

// reserve makes sure f has disk blocks for [0, upTo) before the writer stores into the mapping.
func (cq *ConsumeQueue) reserve(f *segment.File, upTo int64) error {
	if f == cq.resvFile && upTo <= cq.resvTo {
		return nil
	}
	if err := f.Reserve(upTo); err != nil {
		return fmt.Errorf("consumequeue %s: %w", cq, err)
	}
	cq.resvFile, cq.resvTo = f, f.Reserved()
	return nil
}

// cutAt makes end the end of the queue and deletes every file that starts at or past it.
// segment.Queue.TruncateTo keeps a file that starts exactly at its offset (as RocketMQ's
// truncateDirtyFiles does); to drop that file too, the queue is truncated one byte before it
// and the previous file, which was full, is marked full again. Its flushed position is left
// one byte short, which costs one page of msync on the next flush.
func cutAt(q *segment.Queue, end int64) error {
	if next := q.File(end); next == nil || next.Base() != end {
		return q.TruncateTo(end)
	}
	prev := q.File(end - 1)
	if err := q.TruncateTo(end - 1); err != nil {
		return err
	}
	if prev != nil {
		prev.SetWrote(prev.Size())
	}
	return nil
}

// MaxOffset is the queue offset after the last unit, RocketMQ's maxOffsetInQueue: (last file's
// base + its write position) / 20, and 0 for a queue without files. The appender continues the
// queue from it after recovery. An unmapped queue answers from memory; a queue loaded but never
// used is mapped to answer, and reports 0 if that fails (the next Put or Read reports why).
func (cq *ConsumeQueue) MaxOffset() int64 {
	cq.mu.RLock()
	if q := cq.seg; q != nil {
		off := cq.endOf(q)
		cq.mu.RUnlock()
		return off / UnitSize
	}
	end := cq.end
	cq.mu.RUnlock()
	if end >= 0 {
		return end / UnitSize
	}
	q, err := cq.use()
	if err != nil {
		return 0
	}
	defer cq.mu.RUnlock()
	return cq.endOf(q) / UnitSize
}

// MinOffset is the first queue offset that may be read, RocketMQ's minOffsetInQueue:
// minLogicOffset / 20. It starts at the first file (or at the first unit after a pre-blank
// fill) and moves up as CorrectMinOffset and DeleteExpired drop units whose records are gone.
func (cq *ConsumeQueue) MinOffset() int64 {
	if m := cq.minLogic.Load(); m >= 0 {
		return m / UnitSize
	}
	if _, err := cq.use(); err != nil {
		return 0
	}
	cq.mu.RUnlock()
	return max(cq.minLogic.Load(), 0) / UnitSize
}

// MaxPhysicalOffset is the CommitLog offset just past the last record the queue names (the End
// of its last unit with Phys > 0, see Unit.real), or -1 when it names none. Put skips units that end at or below it; the
// maximum over all queues is where recovery starts re-dispatching (dispatchFromPhyOffset).
func (cq *ConsumeQueue) MaxPhysicalOffset() int64 { return cq.maxPhys.Load() }

// Flush makes written units durable following RocketMQ's page accounting: the file holding the
// flushed offset is flushed when it is full, or when leastPages > 0 and at least leastPages
// 4 KiB pages were written since its last flush, or when leastPages <= 0 and anything was.
// Unlike RocketMQ, a call goes on to the next file after flushing a full one. An unmapped
// queue has nothing to flush.
func (cq *ConsumeQueue) Flush(leastPages int) error {
	if cq.cfg.readOnly {
		return nil // nothing is ever written
	}
	q := cq.mappedOrNil()
	if q == nil {
		return nil
	}
	defer cq.mu.RUnlock()
	for {
		where := q.FlushedWhere()
		f := q.File(where)
		if f == nil || !due(f, leastPages) {
			return nil
		}
		wrote, full := f.Wrote(), f.Full()
		if err := q.Flush(f.Base() + wrote); err != nil {
			return fmt.Errorf("consumequeue %s: %w", cq, err)
		}
		if !full || q.FlushedWhere() <= where {
			return nil
		}
	}
}

// due says whether Flush(leastPages) syncs f, the first file not flushed: when it is full, or
// has leastPages dirty pages (any dirty byte when leastPages <= 0).
func due(f *segment.File, leastPages int) bool {
	wrote, flushed := f.Wrote(), f.Flushed()
	return wrote >= f.Size() || (leastPages > 0 && wrote/pageSize-flushed/pageSize >= int64(leastPages)) ||
		(leastPages <= 0 && wrote > flushed)
}

// due says whether Flush(leastPages) would sync anything of the queue now.
func (cq *ConsumeQueue) due(leastPages int) bool {
	q := cq.mappedOrNil()
	if q == nil {
		return false
	}
	defer cq.mu.RUnlock()
	f := q.File(q.FlushedWhere())
	return f != nil && due(f, leastPages)
}

// unflushed holds what the queue has written and not flushed (see Store.flushAtOnce) and
// returns it with the function that lets go of the queue; ok is false when there is nothing.
func (cq *ConsumeQueue) unflushed() (u segment.Unflushed, done func(), ok bool) {
	if cq.cfg.readOnly {
		return u, nil, false
	}
	q := cq.mappedOrNil()
	if q == nil {
		return u, nil, false
	}
	if u = q.Unflushed(q.MaxOffset()); u.Empty() {
		cq.mu.RUnlock()
		return u, nil, false
	}
	return u, cq.mu.RUnlock, true
}

// Close unmaps the queue's files; readers still holding one keep it mapped until they are
// done. It does not flush: call Flush(0) first. Every later call fails with ErrClosed.
func (cq *ConsumeQueue) Close() error {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	if cq.closed {
		return nil
	}
	cq.closed = true
	q := cq.seg
	if q == nil {
		return nil
	}
	cq.end, cq.nfiles = cq.endOf(q), len(q.Files())
	cq.seg = nil
	return q.Close()
}
