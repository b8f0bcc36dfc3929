package indexfile

import (
	"fmt"
	"math"
)

// Geometry is the shape of an index file: RocketMQ's maxHashSlotNum and maxIndexNum. Every file
// of a Service has the same geometry, and a file can only be read with the geometry it was
// written with (the entry area starts after the slot table).
type Geometry struct {
	// Slots is the number of hash slots; a key goes to slot keyHash % Slots.
	Slots int32
	// Entries is the number of 20-byte entries, entry 0 included (it is never used), so a
	// file holds Entries-1 keys.
	Entries int32
}

// DefaultGeometry is RocketMQ's default: 5,000,000 slots and 20,000,000 entries, 420,000,040
// bytes per file.
var DefaultGeometry = Geometry{Slots: 5_000_000, Entries: 20_000_000}

// FileSize is 40 + Slots*4 + Entries*20.
func (g Geometry) FileSize() int64 {
	return HeaderSize + int64(g.Slots)*SlotSize + int64(g.Entries)*EntrySize
}

// SlotOffset is the byte offset of slot i.
func (g Geometry) SlotOffset(i int32) int64 { return HeaderSize + int64(i)*SlotSize }

// EntryOffset is the byte offset of entry n.
func (g Geometry) EntryOffset(n int32) int64 {
	return HeaderSize + int64(g.Slots)*SlotSize + int64(n)*EntrySize
}

// Validate checks that the geometry can hold at least one key and that the file size fits the
// Java int RocketMQ computes it in.
func (g Geometry) Validate() error {
	if g.Slots < 1 || g.Entries < 2 {
		return fmt.Errorf("indexfile: geometry %d slots / %d entries: need >= 1 slot and >= 2 entries", g.Slots, g.Entries)
	}
	if g.FileSize() > math.MaxInt32 {
		return fmt.Errorf("indexfile: geometry %d slots / %d entries: file size %d exceeds %d", g.Slots, g.Entries, g.FileSize(), math.MaxInt32)
	}
	return nil
}
