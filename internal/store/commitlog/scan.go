package commitlog

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/rocketstore/engine/internal/vfs"
)

// Check selects what the validators verify beyond structure. The zero value is the recovery
// default: BODYCRC verified (checkCRCOnRecover), and the whole-record __CRC32# entry verified when
// the record has one.
type Check struct {
	// NoBodyCRC skips the BODYCRC check, as RocketMQ's reput does.
	NoBodyCRC bool
	// NoPropCRC skips the __CRC32# check of records that have the entry.
	NoPropCRC bool
	// RequirePropCRC (forceVerifyPropCRC) makes a record without a __CRC32# entry invalid and
	// verifies the entry even with NoPropCRC. Stores that write with EncodeOptions.PropCRC should
	// set it: without it, damage to the entry's own name makes the entry look absent.
	RequirePropCRC bool
}

// Kind is what CheckRecord found at the start of its input.
type Kind uint8

// The kinds of thing a position in a segment can hold.
const (
	KindEnd     Kind = iota // clean end: no more data (zeros to the end, or under 4 bytes left)
	KindRecord              // a valid record
	KindBlank               // the end-of-file filler: the segment is full
	KindCorrupt             // a torn or corrupt record; the error says why
)

var kindText = [...]string{KindEnd: "end", KindRecord: "record", KindBlank: "blank", KindCorrupt: "corrupt"}

// String names k.
func (k Kind) String() string {
	if int(k) < len(kindText) {
		return kindText[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Tail is how a Scan ended.
type Tail uint8

// The ways a scan of a segment ends.
const (
	// TailClean: the data ends at end and everything after it is zero (or under 4 bytes): the
	// segment was never written past end.
	TailClean Tail = iota
	// TailBlank: a blank filler starts at end; the segment is full and the log continues in the
	// next segment.
	TailBlank
	// TailCorrupt: the bytes at end are not a valid record (a torn write or corruption); the error
	// is a *CorruptError saying why. Recovery truncates there.
	TailCorrupt
	// TailStopped: the callback returned an error for the record at end; Scan returns that error.
	TailStopped
)

var tailText = [...]string{TailClean: "clean", TailBlank: "blank", TailCorrupt: "corrupt", TailStopped: "stopped"}

// String names t.
func (t Tail) String() string {
	if int(t) < len(tailText) {
		return tailText[t]
	}
	return fmt.Sprintf("tail(%d)", uint8(t))
}

// CheckRecord validates what starts at b[0:], where b runs to the end of the segment's data (so
// that a blank filler can be checked against the bytes left). It returns the kind found and its
// size: TOTALSIZE for a record, len(b) for a blank filler (the bytes to skip to the next segment),
// 0 for a clean end or corruption. For KindCorrupt, err is a *CorruptError (wrapping ErrCorrupt).
//
// What is checked, in the order RocketMQ's checkMessageAndReturnSize reads the record: fewer than 4
// bytes is a clean end; TOTALSIZE 0 is a clean end only if every byte after it is zero, and a torn
// record otherwise; the magic code; a blank's TOTALSIZE against the bytes left; TOTALSIZE within
// [MinRecordLen, len(b)]; every length field before its use; TOTALSIZE against the recomputed
// length; then the CRCs chk asks for. It never panics and allocates only to report corruption.
func CheckRecord(b []byte, chk Check) (size int, kind Kind, err error) {
	v, kind, err := check(b, chk)
	switch kind {
	case KindRecord:
		return v.TotalSize(), kind, nil
	case KindBlank:
		return len(b), kind, nil
	}
	return 0, kind, err
}

func check(b []byte, chk Check) (View, Kind, error) {
	if len(b) < 4 {
		return View{}, KindEnd, nil
	}
	be := binary.BigEndian
	size := int64(int32(be.Uint32(b[PosTotalSize:])))
	if size == 0 {
		if i := firstNonZero(b[4:]); i >= 0 {
			return View{}, KindCorrupt, corrupt(ReasonTornZero, int64(4+i), 0)
		}
		return View{}, KindEnd, nil
	}
	if len(b) < PosMagic+4 {
		return View{}, KindCorrupt, corrupt(ReasonSizeRange, size, int64(len(b)))
	}
	magic := be.Uint32(b[PosMagic:])
	if magic == MagicBlank {
		if size != int64(len(b)) {
			return View{}, KindCorrupt, corrupt(ReasonBadBlank, size, int64(len(b)))
		}
		return View{}, KindBlank, nil
	}
	ver, ok := VersionOf(magic)
	if !ok {
		return View{}, KindCorrupt, corrupt(ReasonBadMagic, int64(magic), int64(MagicV1))
	}
	v, err := parseRecord(b, ver)
	if err == nil {
		err = verify(v, chk)
	}
	if err != nil {
		return View{}, KindCorrupt, err
	}
	return v, KindRecord, nil
}

// verify checks the CRCs of a structurally valid record as chk asks.
func verify(v View, chk Check) error {
	if !chk.NoBodyCRC {
		if got, want := v.BodyCRC(), BodyCRC(v.Body()); got != want {
			return corrupt(ReasonBodyCRC, int64(got), int64(want))
		}
	}
	if chk.NoPropCRC && !chk.RequirePropCRC {
		return nil
	}
	if !v.HasPropCRC() {
		if chk.RequirePropCRC {
			return corrupt(ReasonPropCRCMissing, 0, 0)
		}
		return nil
	}
	// RocketMQ rejects a stored CRC of 0 under forceVerifyPropCRC (it takes 0 as "absent"); we
	// accept it when it is right, since a masked CRC-32 can legitimately be 0.
	n := len(v.rec)
	want := int64(maskedCRC(v.rec[:n-PropCRCLen]))
	got, ok := propCRCValue(v.rec[n-PropCRCLen:])
	if !ok {
		got = -1
	}
	if got != want {
		return corrupt(ReasonPropCRC, got, want)
	}
	return nil
}

// Scan validates the records of one segment from position from on, calling fn (if not nil) for
// each valid record in order with its position in seg. seg is the segment's data from its position
// 0; a blank filler's TOTALSIZE is checked against len(seg). Scan has no side effects besides fn.
//
// It returns where the valid data ends and why: TailClean (zeros or fewer than 4 bytes follow),
// TailBlank (the filler starts at end), TailCorrupt (err is a *CorruptError whose Off is end) or
// TailStopped (fn's error for the record at end, which is not counted as scanned). A from outside
// [0, len(seg)] returns an error wrapping ErrOutOfRange.
func Scan(seg []byte, from int, chk Check, fn func(off int, v View) error) (end int, tail Tail, err error) {
	return ScanSparse(seg, from, chk, nil, fn)
}

// ScanSparse is Scan over a segment whose file system can say where it may hold data (data,
// from segment.File.DataExtents; nil means everywhere). Where the records end (a TOTALSIZE of
// zero), a clean end needs every later byte of the segment to be zero; the proof reads only the
// extents data returns, so that a segment allocated at its full size and written at its start
// costs what was written, not its size. Every record is still read in turn up to that point:
// nothing another writer appended after the checkpoint is skipped.
func ScanSparse(seg []byte, from int, chk Check, data func(from int64) []vfs.Extent, fn func(off int, v View) error) (end int, tail Tail, err error) {
	if from < 0 || from > len(seg) {
		return from, TailCorrupt, fmt.Errorf("%w: scan from %d in a segment of %d bytes", ErrOutOfRange, from, len(seg))
	}
	off := from
	for {
		if data != nil && len(seg)-off >= 4 && binary.BigEndian.Uint32(seg[off+PosTotalSize:]) == 0 {
			if i := firstNonZeroIn(seg, off+4, data(int64(off+4))); i >= 0 {
				return off, TailCorrupt, &CorruptError{Off: off, Reason: ReasonTornZero, Got: int64(i - off)}
			}
			return off, TailClean, nil
		}
		v, kind, err := check(seg[off:], chk)
		switch kind {
		case KindEnd:
			return off, TailClean, nil
		case KindBlank:
			return off, TailBlank, nil
		case KindCorrupt:
			if ce, ok := errors.AsType[*CorruptError](err); ok {
				ce.Off = off
			}
			return off, TailCorrupt, err
		}
		if fn != nil {
			if err := fn(off, v); err != nil {
				return off, TailStopped, err
			}
		}
		off += v.TotalSize()
	}
}

// firstNonZeroIn returns the index in seg of its first non-zero byte at or after from, reading
// only the extents given (the parts of the segment that may hold data), or -1.
func firstNonZeroIn(seg []byte, from int, extents []vfs.Extent) int {
	for _, x := range extents {
		lo, hi := max(int(x.Off), from), min(int(x.End), len(seg))
		if lo >= hi {
			continue
		}
		if i := firstNonZero(seg[lo:hi]); i >= 0 {
			return lo + i
		}
	}
	return -1
}

// firstNonZero returns the index of the first non-zero byte of b, or -1. It reads 32 bytes per
// step: a preallocated 1 GiB segment that ends early is mostly zeros, and where the file system
// cannot say which parts are unwritten recovery checks all of them.
func firstNonZero(b []byte) int {
	le := binary.LittleEndian
	i := 0
	for ; i+32 <= len(b); i += 32 {
		w := b[i : i+32 : i+32]
		if le.Uint64(w)|le.Uint64(w[8:])|le.Uint64(w[16:])|le.Uint64(w[24:]) != 0 {
			break
		}
	}
	for ; i+8 <= len(b); i += 8 {
		if le.Uint64(b[i:]) != 0 {
			break
		}
	}
	for ; i < len(b); i++ {
		if b[i] != 0 {
			return i
		}
	}
	return -1
}
