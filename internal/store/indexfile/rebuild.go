package indexfile

import (
	"fmt"
	"math"
)

// Relink keeps the first entries of the file for which keep says yes (stopping at the first it
// refuses) and rebuilds the slot table and every chain from them; the rest are cleared.
//
// Recovery after a crash needs it: entries written since the last flush may have reached the
// disk in any order, torn, or not at all, while a slot pointing at a lost entry would cut off
// every older entry of its chain. Rebuilding the chains from the entries that are certainly good
// (those of records below the recovery's re-dispatch start) makes every kept entry reachable
// again; re-dispatch then adds the rest. The cost is one pass over the file's entries, bounded by
// the file's size, not the store's. The caller must be the only one using the file.
//
// The header's end values are reset from the last entry kept (they may be torn too, and the
// writer skips every record below the end offset); with no entry kept, begin and end become
// emptyPhy and emptyTS (the previous file's end values, as for a new file, or 0).
func (f *File) Relink(keep func(no int32, e Entry) bool, emptyPhy, emptyTS int64) (kept, dropped int32, err error) {
	f.wmu.Lock()
	defer f.wmu.Unlock()
	if f.closed {
		return 0, 0, ErrClosed
	}
	if !f.writable {
		return 0, 0, ErrReadOnly
	}
	n := f.count.Load()
	end := int32(1)
	for ; end < n; end++ {
		if !keep(end, f.entryAt(end)) {
			break
		}
	}
	if end == n {
		f.resetEnd(end, emptyPhy, emptyTS)
		return n - 1, 0, nil // nothing to drop: chains are as written
	}
	// Blocks for the slot table exist (reserved at creation, or reserved up to the entries on
	// reopen); make sure, since the writes below may touch all of it.
	if err := f.sf.Reserve(f.geo.EntryOffset(n)); err != nil {
		return 0, 0, fmt.Errorf("indexfile: relink %s: %w", f.name, err)
	}
	clear(f.data[f.geo.SlotOffset(0):f.geo.EntryOffset(0)])
	clear(f.data[f.geo.EntryOffset(end):f.geo.EntryOffset(n)])
	var slots int32
	for no := int32(1); no < end; no++ {
		e := f.entryAt(no)
		at := f.geo.SlotOffset(e.KeyHash % f.geo.Slots)
		prev := f.loadSlot(at)
		if prev == 0 {
			slots++
		}
		e.PrevIndex = prev
		e.Put(f.data[f.geo.EntryOffset(no):])
		f.storeSlot(at, no)
	}
	f.slotCount.Store(slots)
	f.putInt32(offHashSlotCount, slots)
	f.count.Store(end)
	f.putInt32(offIndexCount, end)
	f.resetEnd(end, emptyPhy, emptyTS)
	return end - 1, n - end, nil
}

// resetEnd sets the header's end values from entry end-1, or begin and end to the empty values
// when no entry is left. REQUIRES: wmu held.
func (f *File) resetEnd(end int32, emptyPhy, emptyTS int64) {
	if end > 1 {
		last := f.entryAt(end - 1)
		f.setInt64(&f.endPhy, offEndPhyOffset, last.PhyOffset)
		// The entry keeps seconds since the begin: the end time is known to that precision.
		// Saturated: a torn begin near 2^63 would wrap the end negative, and a file whose end
		// is negative is outside every time window.
		ts, d := f.beginTS.Load(), int64(last.TimeDiff)*1000
		switch {
		case d > 0 && ts > math.MaxInt64-d:
			ts = math.MaxInt64
		case d < 0 && ts < math.MinInt64-d:
			ts = math.MinInt64
		default:
			ts += d
		}
		f.setInt64(&f.endTS, offEndTimestamp, ts)
	} else {
		f.setInt64(&f.beginPhy, offBeginPhyOffset, emptyPhy)
		f.setInt64(&f.beginTS, offBeginTimestamp, emptyTS)
		f.setInt64(&f.endPhy, offEndPhyOffset, emptyPhy)
		f.setInt64(&f.endTS, offEndTimestamp, emptyTS)
	}
	f.dirty = true
}

// RelinkLast runs Relink on the newest file (the only one written since it was opened), keeping
// the entries that are structurally sound and point below before, the recovery's re-dispatch
// start. It returns where re-indexing must start so that nothing dropped stays missing: the
// record of the last entry kept (its other keys may be among those dropped; indexing it again
// only adds duplicates, which readers fold), or the file's begin offset; -1 when nothing was
// dropped.
func (s *Service) RelinkLast(before int64) (rebuildFrom int64, dropped int32, err error) {
	files := s.Files()
	if len(files) == 0 {
		return -1, 0, nil
	}
	f := files[len(files)-1]
	var emptyPhy, emptyTS int64
	if len(files) > 1 {
		prev := files[len(files)-2]
		emptyPhy, emptyTS = prev.EndPhyOffset(), prev.EndTimestamp()
	}
	prevPhy := int64(-1)
	kept, dropped, err := f.Relink(func(no int32, e Entry) bool {
		ok := e.KeyHash >= 0 && e.PhyOffset >= 0 && e.PhyOffset < before && e.TimeDiff >= 0 &&
			e.PrevIndex >= 0 && e.PrevIndex < no && e.PhyOffset >= prevPhy
		prevPhy = e.PhyOffset
		return ok
	}, emptyPhy, emptyTS)
	if err != nil || dropped == 0 {
		return -1, dropped, err
	}
	if kept > 0 {
		return f.entryAt(kept).PhyOffset, dropped, nil
	}
	return max(f.Header().BeginPhyOffset, 0), dropped, nil
}
