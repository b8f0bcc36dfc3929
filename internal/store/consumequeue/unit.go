package consumequeue

import (
	"encoding/binary"
	"math"
)

// UnitSize is the size of one ConsumeQueue unit on disk (RocketMQ's CQ_STORE_UNIT_SIZE).
const UnitSize = 20

// TagsCodeOffset is where tagsCode sits inside a unit (RocketMQ's MSG_TAG_OFFSET_INDEX).
const TagsCodeOffset = 12

// blankSize is the size field of a pre-blank unit (Java's Integer.MAX_VALUE).
const blankSize = math.MaxInt32

// Unit is one ConsumeQueue entry: where a message's CommitLog record is and its tag hash.
//
// On disk it is 20 bytes, big-endian:
//
//	offset size field
//	     0    8 Phys      CommitLog physical offset of the record
//	     8    4 Size      the whole record size (TOTALSIZE), not the body size
//	    12    8 TagsCode  Java String.hashCode of TAGS, sign-extended (or a delivery time)
type Unit struct {
	Phys     int64
	Size     int32
	TagsCode int64
}

// Blank is the unit RocketMQ's fillPreBlank writes in front of a queue that starts at a
// non-zero offset: {0, Integer.MAX_VALUE, 0}. It passes the recovery validity test, so a
// recovery scan walks over it; it never names a record.
var Blank = Unit{Phys: 0, Size: blankSize, TagsCode: 0}

// blankBytes is Blank encoded, copied in bulk by the pre-blank fill.
var blankBytes = func() (b [UnitSize]byte) {
	Blank.Encode(b[:])
	return b
}()

// Encode writes u into b[:UnitSize]. It panics if b is shorter, as encoding/binary does.
func (u Unit) Encode(b []byte) {
	_ = b[UnitSize-1]
	binary.BigEndian.PutUint64(b[0:8], uint64(u.Phys))
	binary.BigEndian.PutUint32(b[8:12], uint32(u.Size))
	binary.BigEndian.PutUint64(b[12:20], uint64(u.TagsCode))
}

// AppendUnit appends the 20 bytes of u to b.
func AppendUnit(b []byte, u Unit) []byte {
	b = binary.BigEndian.AppendUint64(b, uint64(u.Phys))
	b = binary.BigEndian.AppendUint32(b, uint32(u.Size))
	return binary.BigEndian.AppendUint64(b, uint64(u.TagsCode))
}

// DecodeUnit reads the unit in b[:UnitSize]. It panics if b is shorter.
func DecodeUnit(b []byte) Unit {
	_ = b[UnitSize-1]
	return Unit{
		Phys:     int64(binary.BigEndian.Uint64(b[0:8])),
		Size:     int32(binary.BigEndian.Uint32(b[8:12])),
		TagsCode: int64(binary.BigEndian.Uint64(b[12:20])),
	}
}

// Valid is RocketMQ's recovery test for a unit: Phys >= 0 && Size > 0. An all-zero unit (a
// never-written or lost page) fails it and ends a recovery scan; a Blank unit passes it.
//
// A unit whose End would overflow int64 is garbage, not a record: no CommitLog reaches 2^63.
func (u Unit) Valid() bool {
	return u.Phys >= 0 && u.Size > 0 && u.Phys <= math.MaxInt64-int64(u.Size)
}

// IsBlank says u is the pre-blank filler, which names no record.
func (u Unit) IsBlank() bool { return u == Blank }

// End is the CommitLog offset just past the record: Phys + Size.
func (u Unit) End() int64 { return u.Phys + int64(u.Size) }

// real says u counts for the max physical offset: valid, with Phys > 0. A Blank, and whatever a
// crash leaves of one, has Phys 0 and a size up to 2^31-1, whose End would make Put skip, and
// recovery not re-dispatch, the first 2 GiB of the CommitLog. The one genuine unit at Phys 0
// (the CommitLog's first record) is left out too: it only ends where that record ends, and the
// position rule of Put skips its re-dispatch anyway.
func (u Unit) real() bool { return u.Valid() && u.Phys > 0 }

// tornBlank says size is a Blank's, 7FFFFFFF, or what a crash can leave of it keeping its first
// byte: 7F, then each byte FF or lost to zero. A record has the first size in no case (it ends 8
// bytes before its segment's end at the latest, and a segment holds at most 2^31-1 bytes); the
// seven others are within 16 MiB of 2 GiB, and a record of one of them, at CommitLog offset 0
// and without tags, is the one unit taken for a filler.
func tornBlank(size int32) bool {
	if size>>24 != 0x7F {
		return false
	}
	for b := range 3 {
		if c := size >> (8 * b) & 0xFF; c != 0 && c != 0xFF {
			return false
		}
	}
	return true
}

// filler says u, followed in its queue by next (the zero Unit when u is the last), is a
// pre-blank unit, whole or torn by a crash, and names no record. RocketMQ knows only the whole
// Blank, by its size. What a crash leaves of one is a unit at Phys 0 with TagsCode 0 and some
// of its size's bytes: with the first, a size no record has (blankLike); without it, a size a
// record may have, as the unit of the CommitLog's first record may, at Phys 0 too and with
// TagsCode 0 when untagged. Such a unit is told by the unit after it, never by its offset (a
// queue started above 0 may begin with that record): a crash tears at most one unit at a page
// or sector boundary, so a torn blank inside the fill is followed by a blank, and a record's
// unit by records' units. The fill's last unit, torn so by a crash before the unit after it
// was durable, passes for the record at offset 0; recovery checks the units written since the
// last checkpoint against the CommitLog (TruncateUnverified), and cuts it.
func (u Unit) filler(next Unit) bool {
	return u.blankLike() || u.Phys == 0 && u.TagsCode == 0 && u.Size > 0 && next.blankLike()
}

// blankLike says u is a Blank, or what a crash can leave of one keeping its size's first byte.
func (u Unit) blankLike() bool { return u.Phys == 0 && u.TagsCode == 0 && tornBlank(u.Size) }

// ScanValid returns how many whole units at the start of b pass Valid, stopping at the first
// that does not (or at the last whole unit), and the End of the last of them with Phys > 0 (-1
// when there is none). It is recovery's scan over one file, as a pure function.
func ScanValid(b []byte) (n int, maxEnd int64) {
	maxEnd = -1
	for len(b) >= UnitSize {
		u := DecodeUnit(b)
		if !u.Valid() {
			break
		}
		if u.real() {
			maxEnd = u.End()
		}
		n++
		b = b[UnitSize:]
	}
	return n, maxEnd
}
