package indexfile

import "github.com/rocketstore/engine/internal/store/javahash"

// SelectKey is SelectPhyOffsets for key (already "topic#key").
func (f *File) SelectKey(dst []int64, key string, maxNum int, begin, end int64) []int64 {
	return f.SelectPhyOffsets(dst, javahash.IndexKeyHash(key), maxNum, begin, end)
}

// SelectPhyOffsets appends to dst the CommitLog offsets of the entries of keyHash's chain whose
// hash equals keyHash and whose time lies in [begin, end], newest first, until len(dst) reaches
// maxNum (dst counts, as RocketMQ's list shared across files does). Only hashes are compared:
// different keys with one hash all come back, so the caller must read each message and check
// its key.
//
// The walk is IndexFile.selectPhyOffset's: it starts at the slot (nothing if the slot is <= 0 or
// > indexCount, or the file has no keys) and, per entry, stops on a negative timeDiff, adds the
// offset on a match, then stops if prevIndex is <= 0, > indexCount, equal to the current entry,
// or the entry's time t = beginTimestamp + timeDiff*1000 is < begin. Two guards RocketMQ lacks
// keep corrupt files harmless: the walk takes at most indexCount+1 steps (a cycle ends), and an
// entry number past the file ends it (where Java would throw and keep what it had).
//
// A file unmapped by retention before the call returns dst unchanged.
func (f *File) SelectPhyOffsets(dst []int64, keyHash int32, maxNum int, begin, end int64) []int64 {
	if keyHash < 0 || len(dst) >= maxNum || !f.Acquire() {
		return dst // a negative hash has no slot: Java's read at a negative index fails
	}
	defer f.Release()
	slot := f.loadSlot(f.geo.SlotOffset(keyHash % f.geo.Slots))
	n := f.count.Load() // after the slot: whatever it leads to is counted
	if slot <= 0 || slot > n || n <= 1 {
		return dst
	}
	base := f.beginTS.Load()
	cur := slot
	for steps := int32(0); steps <= n && len(dst) < maxNum; steps++ {
		e, ok := f.chainEntry(cur, n)
		if !ok || e.TimeDiff < 0 {
			break
		}
		t := base + int64(e.TimeDiff)*1000
		if e.KeyHash == keyHash && t >= begin && t <= end {
			dst = append(dst, e.PhyOffset)
		}
		if e.PrevIndex <= 0 || e.PrevIndex > n || e.PrevIndex == cur || t < begin {
			break
		}
		cur = e.PrevIndex
	}
	return dst
}

// chainEntry reads entry no, which the walk reached with count n (1 <= no <= n). Entries below n
// are published and immutable. Entry n itself is the next one the writer fills: only a corrupt
// chain leads there, and RocketMQ reads whatever it holds, so it is read the same way but under
// the writer's lock, never while half written. Past the file there is nothing to read.
func (f *File) chainEntry(no, n int32) (Entry, bool) {
	if no < n {
		return f.entryAt(no), true
	}
	if no >= f.geo.Entries {
		return Entry{}, false
	}
	f.wmu.Lock()
	defer f.wmu.Unlock()
	return f.entryAt(no), true
}

func (f *File) entryAt(no int32) Entry {
	at := f.geo.EntryOffset(no)
	return decodeEntry(f.data[at : at+EntrySize])
}

// Entry returns entry no if it holds a key (1 <= no < indexCount).
func (f *File) Entry(no int32) (Entry, bool) {
	if no < 1 || !f.Acquire() {
		return Entry{}, false
	}
	defer f.Release()
	if no >= f.count.Load() {
		return Entry{}, false
	}
	return f.entryAt(no), true
}

// Slot returns the value of slot i: the newest entry of its chain, 0 if empty. Values on disk
// are not checked; a verifier compares them with indexCount itself.
func (f *File) Slot(i int32) (int32, bool) {
	if i < 0 || i >= f.geo.Slots || !f.Acquire() {
		return 0, false
	}
	defer f.Release()
	return f.loadSlot(f.geo.SlotOffset(i)), true
}

// Each calls fn for every entry that holds a key, in entry order (1, 2, ...), until fn returns
// false. Entries put while Each runs are not visited. It returns ErrClosed if the file is
// already unmapped.
func (f *File) Each(fn func(no int32, e Entry) bool) error {
	if !f.Acquire() {
		return ErrClosed
	}
	defer f.Release()
	n := f.count.Load()
	for no := int32(1); no < n; no++ {
		if !fn(no, f.entryAt(no)) {
			break
		}
	}
	return nil
}
