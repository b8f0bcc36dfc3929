package indexfile

import (
	"fmt"
	"math"
)

// StoreTime looks up the store timestamp of the record at a CommitLog offset (false when it
// cannot): Relink sets the header's begin and end times from the records of the first and last
// entries kept, since an entry keeps only whole seconds since the file's begin.
type StoreTime func(phy int64) (ts int64, ok bool)

// Relink keeps the first entries of the file for which keep says yes (stopping at the first it
// refuses, or at an all-zero entry: one never written) and rebuilds the slot table and every
// chain from them; every entry after them is cleared.
//
// Recovery after a crash needs it: entries written since the last flush may have reached the
// disk in any order, torn, or not at all, while a slot pointing at a lost entry would cut off
// every older entry of its chain. Rebuilding the chains from the entries that are certainly good
// (those of records below the recovery's re-dispatch start) makes every kept entry reachable
// again; re-dispatch then adds the rest. The cost is one pass over the file's entries and one
// over its slots, bounded by the file's size, not the store's, and a slot table's worth of
// memory; only what differs from the chains the kept entries make is written, and past them only
// the parts of the file that the file system says may hold data are read. The caller must be the
// only one using the file.
//
// Nothing in the header is trusted: it is rewritten in place by every put, so a crash can leave
// it torn, or older or newer than the pages around it. The entries are read past its count (a
// flushed entry stays sound whatever became of the header's page), and the slot table is put
// right even when every entry is kept: its page can reach the disk without the header's, and a
// slot naming an entry number the writer will fill again would make the new entry link to
// itself, or to another slot's chain, hiding the older entries of its own. The header is then
// set from the entries kept: the counts, the begin and end offsets from the first and last
// entry, the times from storeTime (nil, or when it cannot tell: the begin time kept, the end
// time from the last entry's seconds); with no entry kept, begin and end become emptyPhy and
// emptyTS (the previous file's end values, as for a new file, or 0).
//
// dropped counts the entries cleared past the ones kept that held anything.
func (f *File) Relink(keep func(no int32, e Entry) bool, emptyPhy, emptyTS int64, storeTime StoreTime) (kept, dropped int32, err error) {
	f.wmu.Lock()
	defer f.wmu.Unlock()
	if f.closed {
		return 0, 0, ErrClosed
	}
	if !f.writable {
		return 0, 0, ErrReadOnly
	}
	end := int32(1)
	for ; end < f.geo.Entries; end++ {
		if e := f.entryAt(end); e == (Entry{}) || !keep(end, e) {
			break
		}
	}
	// The chains the kept entries make: heads[s] is the newest entry of slot s.
	heads := make([]int32, f.geo.Slots)
	var slots int32
	same := true
	for no := int32(1); no < end; no++ {
		e := f.entryAt(no)
		s := e.KeyHash % f.geo.Slots
		if heads[s] == 0 {
			slots++
		}
		same = same && e.PrevIndex == heads[s]
		heads[s] = no
	}
	for s := int32(0); same && s < f.geo.Slots; s++ {
		same = f.loadSlot(f.geo.SlotOffset(s)) == heads[s]
	}
	if !same {
		// Blocks for the slot table exist (reserved at creation, or reserved up to the entries
		// on reopen); make sure, since the writes below may touch all of it.
		if err := f.sf.Reserve(f.geo.EntryOffset(end)); err != nil {
			return 0, 0, fmt.Errorf("indexfile: relink %s: %w", f.name, err)
		}
		for s := int32(0); s < f.geo.Slots; s++ {
			if at := f.geo.SlotOffset(s); f.loadSlot(at) != heads[s] {
				f.storeSlot(at, heads[s])
			}
		}
		clear(heads) // walked again for each entry's link
		for no := int32(1); no < end; no++ {
			e := f.entryAt(no)
			s := e.KeyHash % f.geo.Slots
			if e.PrevIndex != heads[s] {
				e.PrevIndex = heads[s]
				e.Put(f.data[f.geo.EntryOffset(no):])
			}
			heads[s] = no
		}
	}
	if dropped, err = f.clearFrom(end); err != nil {
		return 0, 0, err
	}
	f.slotCount.Store(slots)
	f.putInt32(offHashSlotCount, slots)
	f.count.Store(end)
	f.putInt32(offIndexCount, end)
	f.resetEnds(end, emptyPhy, emptyTS, storeTime)
	return end - 1, dropped, nil
}

// clearFrom zeroes every entry from number end on that holds anything, reading only the parts
// of the file that may hold data, and returns how many it cleared: entries a crash left past the
// ones kept (torn, stale, or stranded behind a lost page) would otherwise join the file once the
// writer reaches them. REQUIRES: wmu held.
func (f *File) clearFrom(end int32) (int32, error) {
	from := f.geo.EntryOffset(end)
	var cleared int32
	for _, x := range f.sf.DataExtents(from) {
		lo := max(x.Off, from)
		lo = from + (lo-from)/EntrySize*EntrySize // whole entries
		// Every entry that overlaps the extent: one that runs on into a hole (its first bytes
		// on disk, its page after them lost) is torn too; only its part in the extent is
		// cleared, which needs no new block. An entry that starts in a hole before the extent
		// is written whole, its blocks reserved first (a write into a hole of a mapping with no
		// block to give faults).
		for at := lo; at < x.End && at+EntrySize <= int64(len(f.data)); at += EntrySize {
			e := f.data[at:min(at+EntrySize, x.End)]
			if allZero(e) {
				continue
			}
			if at < x.Off {
				if err := f.sf.Reserve(at + EntrySize); err != nil {
					return cleared, fmt.Errorf("indexfile: relink %s: %w", f.name, err)
				}
				e = f.data[at : at+EntrySize]
			}
			clear(e)
			cleared++
		}
	}
	return cleared, nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// resetEnds sets the header's begin and end values from entries 1 and end-1 (see Relink), or
// to the empty values when no entry is left. REQUIRES: wmu held.
func (f *File) resetEnds(end int32, emptyPhy, emptyTS int64, storeTime StoreTime) {
	f.dirty = true
	if end <= 1 {
		f.setInt64(&f.beginPhy, offBeginPhyOffset, emptyPhy)
		f.setInt64(&f.beginTS, offBeginTimestamp, emptyTS)
		f.setInt64(&f.endPhy, offEndPhyOffset, emptyPhy)
		f.setInt64(&f.endTS, offEndTimestamp, emptyTS)
		return
	}
	first, last := f.entryAt(1), f.entryAt(end-1)
	f.setInt64(&f.beginPhy, offBeginPhyOffset, first.PhyOffset)
	f.setInt64(&f.endPhy, offEndPhyOffset, last.PhyOffset)
	if storeTime != nil {
		if ts, ok := storeTime(first.PhyOffset); ok {
			f.setInt64(&f.beginTS, offBeginTimestamp, ts)
		}
		if ts, ok := storeTime(last.PhyOffset); ok {
			f.setInt64(&f.endTS, offEndTimestamp, ts)
			return
		}
	}
	// The entry keeps seconds since the begin: the end time is known to that precision.
	// Saturated: a torn begin near 2^63 would wrap the end negative, and a file whose end is
	// negative is outside every time window.
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
}

// RelinkLast runs Relink on the newest file (the only one written since it was opened: a full
// file is flushed before the next one is made), keeping the entries that are structurally sound
// and point below before, the recovery's re-dispatch start. Sound: a hash, an offset, a time and
// a link in range, and offsets in CommitLog order from the previous file's end on. It returns
// where re-indexing
// must start so that nothing dropped stays missing: the record of the last entry kept (its
// other keys may be among those dropped; indexing it again only adds duplicates, which readers
// fold), or the file's begin offset; -1 when nothing was dropped (no entry cleared, none the
// header counted lost). storeTime, which may be nil,
// sets the header's times exactly (see Relink).
func (s *Service) RelinkLast(before int64, storeTime StoreTime) (rebuildFrom int64, dropped int32, err error) {
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
	counted := f.Header().IndexCount - 1 // what the header said, which may be torn
	kept, dropped, err := f.Relink(soundEntries(before, emptyPhy), emptyPhy, emptyTS, storeTime)
	dropped = max(dropped, counted-kept)
	if err != nil || dropped == 0 {
		return -1, dropped, err
	}
	if kept > 0 {
		return f.entryAt(kept).PhyOffset, dropped, nil
	}
	return max(f.Header().BeginPhyOffset, 0), dropped, nil
}

// soundEntries is RelinkLast's keep: an entry is sound when its hash, offset, time and link are in
// range, its offset is below before and, with the ones before it, in CommitLog order from from on
// (the previous file's end). It keeps state: one per Relink.
func soundEntries(before, from int64) func(no int32, e Entry) bool {
	prevPhy := max(from, 0)
	return func(no int32, e Entry) bool {
		ok := e.KeyHash >= 0 && e.PhyOffset >= 0 && e.PhyOffset < before && e.TimeDiff >= 0 &&
			e.PrevIndex >= 0 && e.PrevIndex < no && e.PhyOffset >= prevPhy
		prevPhy = e.PhyOffset
		return ok
	}
}
