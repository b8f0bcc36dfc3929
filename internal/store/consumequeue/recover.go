package consumequeue

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/rocketstore/engine/internal/store/segment"
)

// recoverFiles is how many of the newest files Recover scans (RocketMQ starts at the third
// from last): older files were full and flushed before the newest ones were created.
const recoverFiles = 3

// Recover finds the queue's end after a restart, as RocketMQ's ConsumeQueue.recover: it scans
// units from the third newest file (or the first) until the first invalid one (Phys < 0 or
// Size <= 0, so an all-zero unit, a lost page; a Blank passes), going on into the next file
// while files are full, and makes that the end: later files are deleted, the file holding it
// gets its write and flush positions there. It returns the max physical offset, the End of the
// last scanned unit before the end with Phys > 0 (-1 if none; see Unit.real), which Put uses
// to skip units already built and the caller uses as the dispatch start. A min offset at the
// start of the first file moves past the pre-blank units there.
//
// Bytes past the end are left alone (as RocketMQ does); TruncateDirty, which recovery runs
// next, zeroes the units it drops.
func (cq *ConsumeQueue) Recover() (int64, error) {
	q, done, err := cq.useToChange("recover (see Store.Refresh)")
	if err != nil {
		return -1, err
	}
	defer done()
	fs := q.Files()
	maxPhys := int64(-1)
	if len(fs) == 0 {
		cq.maxPhys.Store(-1)
		cq.recovered.Store(true)
		return -1, nil
	}
	start := max(0, len(fs)-recoverFiles)
	end := fs[start].Base()
	for _, f := range fs[start:] {
		if !f.Acquire() {
			return -1, fmt.Errorf("consumequeue %s: recover: %w", cq, segment.ErrDeleted)
		}
		n, m := ScanValid(f.Data()[:f.Size()])
		if err := f.Release(); err != nil {
			return -1, err
		}
		if m >= 0 {
			maxPhys = m
		}
		end = f.Base() + int64(n)*UnitSize
		if end < f.End() {
			break
		}
	}
	if err := q.TruncateTo(end); err != nil {
		return -1, fmt.Errorf("consumequeue %s: recover: %w", cq, err)
	}
	cq.maxPhys.Store(maxPhys)
	if err := cq.skipLeadingBlanks(fs[0], end); err != nil {
		return -1, err
	}
	cq.clampMin(end)
	cq.recovered.Store(true)
	return maxPhys, nil
}

// skipLeadingBlanks moves a min offset that still sits at the start of the first file past the
// pre-blank units there, so that a queue that started at offset N reads from N again after a
// restart, as it did before (RocketMQ leaves this to correctMinOffset). It reads one unit when
// the queue did not start with a pre-blank fill. end is where the queue's units end. REQUIRES:
// minMu held.
func (cq *ConsumeQueue) skipLeadingBlanks(f *segment.File, end int64) error {
	if cq.minLogic.Load() > f.Base() {
		return nil
	}
	if !f.Acquire() {
		return fmt.Errorf("consumequeue %s: recover: %w", cq, segment.ErrDeleted)
	}
	pos := leadingFillers(f.Data()[:max(0, min(f.Wrote(), end-f.Base()))])
	cq.minLogic.Store(f.Base() + pos)
	cq.minPhys.Store(-1)
	return f.Release()
}

// leadingFillers is how many bytes of pre-blank units, whole or torn, data starts with; data
// holds a queue's first units, up to its end.
func leadingFillers(data []byte) int64 {
	pos := int64(0)
	for ; pos+UnitSize <= int64(len(data)); pos += UnitSize {
		var next Unit
		if pos+2*UnitSize <= int64(len(data)) {
			next = DecodeUnit(data[pos+UnitSize:])
		}
		if !DecodeUnit(data[pos:]).filler(next) {
			break
		}
	}
	return pos
}

// clampMin keeps MinOffset <= MaxOffset after the end moved down. REQUIRES: minMu held.
func (cq *ConsumeQueue) clampMin(end int64) {
	if cq.minLogic.Load() > end {
		cq.minLogic.Store(end)
		cq.minPhys.Store(-1)
	}
}

// TruncateDirty drops every unit that names a record at or past phyOffset, the CommitLog's
// recovered end, as RocketMQ's truncateDirtyLogicFiles: going back from the newest file, a file
// whose first unit is dropped is deleted, and the end is set after the last unit kept. A unit
// is dropped when Phys >= phyOffset or it is invalid, and only units below the write position
// are looked at. Unlike RocketMQ, the dropped units of the file that remains are zeroed and
// the zeros synced, so a later crash cannot bring them back as valid units.
//
// If every unit goes, every file goes and the queue restarts empty at offset 0, as in RocketMQ.
func (cq *ConsumeQueue) TruncateDirty(phyOffset int64) error {
	// Units are in CommitLog order, so when the last one ends at or below phyOffset none can
	// start past it; the queue need not even be mapped. (phyOffset 0 drops blanks too.)
	if cq.recovered.Load() && phyOffset > 0 && cq.maxPhys.Load() <= phyOffset {
		return nil
	}
	return cq.truncate(func(_ int64, u Unit) bool { return !u.Valid() || u.Phys >= phyOffset })
}

// TruncateUnverified keeps only the prefix of the queue that is known good after a crash:
// walking back from the end, it passes over every unit that names a record at or past from (the
// checkpoint's dispatched offset: re-dispatch rebuilds those) or that verify rejects, and cuts
// the queue after the first unit below from that verify accepts. Units written after the last
// flush can be torn by a crash into something that still looks valid (a sector of a unit kept,
// the next one lost), so verify checks a unit against the CommitLog record it names.
func (cq *ConsumeQueue) TruncateUnverified(from int64, verify func(n int64, u Unit) bool) error {
	if cq.cfg.readOnly {
		return fmt.Errorf("%w: truncate %s", ErrReadOnly, cq)
	}
	lo, hi := cq.MinOffset(), cq.MaxOffset()
	keepTo := lo
	for n := hi - 1; n >= lo; n-- {
		u, err := cq.Unit(n)
		if err != nil {
			return err
		}
		if u.Valid() && !u.IsBlank() && u.Phys < from && verify(n, u) {
			keepTo = n + 1
			break
		}
	}
	if keepTo == hi {
		return nil
	}
	return cq.truncate(func(pos int64, _ Unit) bool { return pos/UnitSize >= keepTo })
}

// truncate cuts the queue at the first unit for which stop is true (pos is the unit's byte
// offset in the queue), looking only below the write position; see TruncateDirty.
func (cq *ConsumeQueue) truncate(stop func(pos int64, u Unit) bool) error {
	q, done, err := cq.useToChange("truncate")
	if err != nil {
		return err
	}
	defer done()
	fs := q.Files()
	var keep *segment.File
	var kept int64 // bytes of keep that stay
	for i := len(fs) - 1; i >= 0 && keep == nil; i-- {
		f := fs[i]
		if !f.Acquire() {
			return fmt.Errorf("consumequeue %s: truncate: %w", cq, segment.ErrDeleted)
		}
		data := f.Data()[:f.Wrote()]
		for kept = 0; kept+UnitSize <= int64(len(data)); kept += UnitSize {
			if stop(f.Base()+kept, DecodeUnit(data[kept:])) {
				break
			}
		}
		if err := f.Release(); err != nil {
			return err
		}
		if kept > 0 {
			keep = f
		}
	}
	if keep == nil {
		if len(fs) > 0 {
			if err := cutAt(q, fs[0].Base()); err != nil {
				return fmt.Errorf("consumequeue %s: truncate: %w", cq, err)
			}
		}
		cq.minLogic.Store(0)
		cq.minPhys.Store(-1)
		cq.maxPhys.Store(-1)
		cq.recovered.Store(true)
		return nil
	}
	oldWrote := keep.Wrote()
	end := keep.Base() + kept
	if err := cutAt(q, end); err != nil {
		return fmt.Errorf("consumequeue %s: truncate: %w", cq, err)
	}
	if err := cq.scrub(q, keep, kept, oldWrote); err != nil {
		return err
	}
	cq.maxPhys.Store(lastRealEnd(keep.Data()[:kept]))
	cq.clampMin(end)
	cq.recovered.Store(true)
	return nil
}

// lastRealEnd is the End of the last unit in units that counts for the max physical offset
// (Unit.real), or -1.
func lastRealEnd(units []byte) int64 {
	for pos := len(units) - UnitSize; pos >= 0; pos -= UnitSize {
		if u := DecodeUnit(units[pos:]); u.real() {
			return u.End()
		}
	}
	return -1
}

// scrub zeroes [from, to) of f, which lies at or past the queue's end, and syncs the zeros.
// Only pages holding a non-zero byte are written, and disk is reserved only up to to:
// segment.File.ZeroFrom would reserve the whole 6 MB file, which for every queue truncated at
// recovery could fill the disk. segment.File syncs only below its write position, so the
// position is moved over the range for the sync and set back after it.
func (cq *ConsumeQueue) scrub(q *segment.Queue, f *segment.File, from, to int64) error {
	if from >= to {
		return nil
	}
	if err := f.Reserve(to); err != nil {
		return fmt.Errorf("consumequeue %s: truncate: %w", cq, err)
	}
	data := f.Data()
	dirty := false
	for p := from; p < to; {
		next := min((p/pageSize+1)*pageSize, to)
		if !allZero(data[p:next]) {
			clear(data[p:next])
			dirty = true
		}
		p = next
	}
	if !dirty {
		return nil
	}
	f.SetWrote(to)
	err := f.Flush(to)
	err = errors.Join(err, q.TruncateTo(f.Base()+from))
	if err != nil {
		return fmt.Errorf("consumequeue %s: truncate: %w", cq, err)
	}
	return nil
}

// dataLen is the length of b without its trailing zero bytes, eight at a time.
func dataLen(b []byte) int64 {
	i := len(b)
	for i >= 8 && binary.LittleEndian.Uint64(b[i-8:i]) == 0 {
		i -= 8
	}
	for i > 0 && b[i-1] == 0 {
		i--
	}
	return int64(i)
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// CorrectMinOffset moves MinOffset to the first unit whose record is still in the CommitLog
// (Phys >= minCommitLogOffset), as RocketMQ's correctMinOffset: if even the last unit is below
// it, the queue has no valid entry and MinOffset becomes MaxOffset; a queue without files gets
// MinOffset 0 and no max physical offset. The search is binary over the queue from the current
// min offset (RocketMQ searches only the first file) and never stops on a Blank unit, whole
// or torn. It changes only memory, so a read-only queue allows it too.
func (cq *ConsumeQueue) CorrectMinOffset(minCommitLogOffset int64) error {
	// The unit at the min offset is still valid: nothing moves (RocketMQ's "intact" check,
	// answered without reading, so an unmapped queue stays unmapped).
	if p := cq.minPhys.Load(); p >= 0 && p >= minCommitLogOffset {
		return nil
	}
	q, err := cq.use()
	if err != nil {
		return err
	}
	defer cq.mu.RUnlock()
	cq.minMu.Lock()
	defer cq.minMu.Unlock()
	first, last := q.First(), q.Last()
	if last == nil {
		cq.minLogic.Store(0)
		cq.minPhys.Store(-1)
		cq.maxPhys.Store(-1)
		return nil
	}
	end := cq.endOf(q)
	hasUnit := last.Wrote() >= UnitSize
	if cq.cfg.readOnly {
		hasUnit = end >= first.Base()+UnitSize // loaded files count as full: ask the end
	}
	if hasUnit {
		u, err := unitAt(q, end-UnitSize)
		if err != nil {
			return fmt.Errorf("consumequeue %s: correct min offset: %w", cq, err)
		}
		if u.Phys < minCommitLogOffset {
			cq.minLogic.Store(end)
			cq.minPhys.Store(-1)
			return nil
		}
	}
	lo, hi := max(cq.minLogic.Load(), first.Base())/UnitSize, end/UnitSize
	var found Unit
	for lo < hi {
		mid := lo + (hi-lo)/2
		u, filler, err := fillerAt(q, mid, end)
		if err != nil {
			return fmt.Errorf("consumequeue %s: correct min offset: %w", cq, err)
		}
		if !filler && u.Phys >= minCommitLogOffset {
			hi, found = mid, u
		} else {
			lo = mid + 1
		}
	}
	cq.minLogic.Store(lo * UnitSize)
	if lo*UnitSize < end {
		cq.minPhys.Store(found.Phys)
	} else {
		cq.minPhys.Store(-1)
	}
	return nil
}

// DeleteExpired deletes, from the oldest on, the files (never the last) whose last unit names
// a record below minCommitLogOffset, stopping at the first file kept, then corrects the min
// offset (STORE-FORMAT §10; RocketMQ's deleteExpiredFile). It returns how many files it deleted.
// Readers of a deleted file keep it mapped until they release it.
func (cq *ConsumeQueue) DeleteExpired(minCommitLogOffset int64) (int, error) {
	if cq.cfg.readOnly {
		return 0, fmt.Errorf("%w: delete expired %s", ErrReadOnly, cq)
	}
	cq.mu.RLock()
	single := cq.seg == nil && cq.end >= 0 && cq.nfiles <= 1
	cq.mu.RUnlock()
	if single { // the last file is never deleted: only the min offset can move
		return 0, cq.CorrectMinOffset(minCommitLogOffset)
	}
	q, err := cq.use()
	if err != nil {
		return 0, err
	}
	names, err := q.DeleteFirst(math.MaxInt, func(f *segment.File) bool {
		if f.Wrote() < f.Size() || !f.Acquire() {
			return false
		}
		defer f.Release()
		return DecodeUnit(f.Data()[f.Size()-UnitSize:]).Phys < minCommitLogOffset
	})
	cq.mu.RUnlock()
	if err != nil {
		err = fmt.Errorf("consumequeue %s: delete expired: %w", cq, err)
	}
	return len(names), errors.Join(err, cq.CorrectMinOffset(minCommitLogOffset))
}

// ZeroPastEnd zeroes, and syncs, whatever non-zero bytes follow the queue's end in the file
// that holds it. Recover leaves such bytes alone (units a crash stranded behind a lost page, as
// RocketMQ does), but a queue that is written up to them, and a crash that then keeps its new
// units and loses the last of them, joins them to the queue: the engine's recovery after an
// unclean exit and an offline repair that appends clear them first. It reads only the parts of
// the rest of that one file that the file system says may hold data.
func (cq *ConsumeQueue) ZeroPastEnd() error {
	q, done, err := cq.useToChange("zero past the end of")
	if err != nil {
		return err
	}
	defer done()
	last := q.Last()
	if last == nil {
		return nil
	}
	if !last.Acquire() {
		return fmt.Errorf("consumequeue %s: zero past the end: %w", cq, segment.ErrDeleted)
	}
	from := last.Wrote()
	data := last.Data()[:last.Size()]
	to := from
	for _, x := range last.DataExtents(from) {
		if lo, hi := max(x.Off, to), min(x.End, int64(len(data))); lo < hi {
			if n := dataLen(data[lo:hi]); n > 0 {
				to = lo + n
			}
		}
	}
	to = min((to+UnitSize-1)/UnitSize*UnitSize, int64(len(data)))
	err = cq.scrub(q, last, from, to)
	return errors.Join(err, last.Release())
}

// useToChange is use for an operation that changes the queue's files and its minimum (Recover,
// truncations, ZeroPastEnd): refused on a read-only queue (what names the operation in the
// error), and holding minMu as well; done releases both.
func (cq *ConsumeQueue) useToChange(what string) (q *segment.Queue, done func(), err error) {
	if cq.cfg.readOnly {
		return nil, nil, fmt.Errorf("%w: %s %s", ErrReadOnly, what, cq)
	}
	if q, err = cq.use(); err != nil {
		return nil, nil, err
	}
	cq.minMu.Lock()
	return q, func() {
		cq.minMu.Unlock()
		cq.mu.RUnlock()
	}, nil
}
