package indexfile

import "encoding/binary"

// EntrySize is the size of one index entry (IndexFile.indexSize).
const EntrySize = 20

// SlotSize is the size of one hash slot (IndexFile.hashSlotSize).
const SlotSize = 4

// Entry is one 20-byte index entry.
type Entry struct {
	// KeyHash is abs(String.hashCode("topic#key")), Integer.MIN_VALUE mapped to 0.
	KeyHash int32
	// PhyOffset is the CommitLog offset of the message.
	PhyOffset int64
	// TimeDiff is (storeTimestamp - header.BeginTimestamp) / 1000: seconds, truncated, >= 0.
	TimeDiff int32
	// PrevIndex is the next older entry of the same slot, 0 at the end of the chain.
	PrevIndex int32
}

// Put encodes e into b[:EntrySize]. It panics if b is shorter, like a slice index would.
func (e Entry) Put(b []byte) {
	_ = b[EntrySize-1]
	binary.BigEndian.PutUint32(b[0:], uint32(e.KeyHash))
	binary.BigEndian.PutUint64(b[4:], uint64(e.PhyOffset))
	binary.BigEndian.PutUint32(b[12:], uint32(e.TimeDiff))
	binary.BigEndian.PutUint32(b[16:], uint32(e.PrevIndex))
}

// DecodeEntry decodes the first EntrySize bytes of b.
func DecodeEntry(b []byte) (Entry, error) {
	if len(b) < EntrySize {
		return Entry{}, ErrShort
	}
	return decodeEntry(b), nil
}

func decodeEntry(b []byte) Entry {
	_ = b[EntrySize-1]
	return Entry{
		KeyHash:   int32(binary.BigEndian.Uint32(b[0:])),
		PhyOffset: int64(binary.BigEndian.Uint64(b[4:])),
		TimeDiff:  int32(binary.BigEndian.Uint32(b[12:])),
		PrevIndex: int32(binary.BigEndian.Uint32(b[16:])),
	}
}
