package commitlog

import (
	"errors"
	"fmt"
)

// ErrSealedCorrupt is returned by Recover when valid data stops below the offset known to be
// durable: that is damage to sealed data, not a crash (a crash only loses what was never
// synced), so recovery refuses to cut it away with everything after it.
var ErrSealedCorrupt = errors.New("commitlog: corruption inside sealed data")

// Recovered is what Recover found.
type Recovered struct {
	// Start is where the scan began; End is where valid data ends (the new end of the log).
	Start, End int64
	// Tail says how the data ended; Corrupt is the reason when Tail is TailCorrupt.
	Tail    Tail
	Corrupt error
	// Records and Bytes count the valid records scanned.
	Records int64
	Bytes   int64
	// Cut bounds the bytes of a corrupt tail that were dropped: up to the old write position of
	// the segment (a loaded segment counts as full, so this is an upper bound).
	Cut int64
	// NoPropCRCEnd is the end of the last valid record scanned without the __CRC32# property (0
	// when every one had it): records from there on all carry it.
	NoPropCRCEnd int64
}

// RecoverOptions say where recovery starts and what it may assume.
type RecoverOptions struct {
	// From is a record boundary to scan from (the start of the log when below it): the
	// checkpoint's dispatched offset, so that recovery is bounded by the checkpoint, not by the
	// size of the store.
	From int64
	// Sealed is an offset known durable (the checkpoint's durable offset): if valid data stops
	// below it, Recover changes nothing and fails with ErrSealedCorrupt.
	Sealed int64
	// Check is what every record is checked for (its PHYSICALOFFSET is always checked too).
	Check Check
	// OnRecord, when set, is called for each valid record (the re-dispatch); an error stops
	// recovery and is returned.
	OnRecord func(phys int64, v View) error
	// OnSegment, when set, is called as each segment is entered (progress).
	OnSegment func(name string, off int64)
	// PropCRC says which records must carry the whole-record __CRC32# property (see
	// PropCRCRule): the records the engine wrote with it.
	PropCRC PropCRCRule
	// CleanEnd says the log was closed cleanly with its end at From (the checkpoint written at
	// shutdown says so): recovery then checks only that nothing starts there, instead of
	// proving the rest of the segment zero, which where the file system cannot say what is
	// unwritten (or the rest was prefaulted) reads all of it. A record found there means the
	// checkpoint was wrong: the full scan runs.
	CleanEnd bool
}

// Recover finds where the valid data ends, scanning from opts.From, and makes that the end of
// the log: later segments are deleted and the bytes after the end are zeroed, so a torn tail can
// never be read back as data. Past the last record only the parts of the segment that the file
// system says may hold data are read (ScanSparse, segment.File.ZeroFrom), so a crash restart
// costs what was written after the checkpoint, not the size of the segment. Pages written but
// never synced reach the disk in any order, so after the first invalid record everything is
// dropped, even valid records in later segments; only data below opts.Sealed is protected, by
// refusing instead.
func (l *Log) Recover(opts RecoverOptions) (Recovered, error) {
	l.cur = nil
	files := l.q.Files()
	res := Recovered{Start: opts.From}
	if len(files) == 0 {
		return res, nil
	}
	from := max(opts.From, files[0].Base())
	if last := files[len(files)-1]; from > last.End() {
		from = last.Base()
	}
	res.Start = from
	i := int((from - files[0].Base()) / l.size)
	if i == len(files) { // from is exactly the end of the last (full) segment
		res.End, res.Tail = from, TailBlank
		return res, nil
	}
	pos := int(from - files[i].Base())
	if opts.CleanEnd && from == opts.From && nothingAt(files[i].Data(), pos) {
		res.End, res.Tail = from, TailClean
		return res, l.q.TruncateTo(from)
	}
	for ; i < len(files); i, pos = i+1, 0 {
		f := files[i]
		if opts.OnSegment != nil {
			opts.OnSegment(f.Name(), f.Base()+int64(pos))
		}
		end, tail, err := ScanSparse(f.Data(), pos, opts.Check, f.DataExtents, func(off int, v View) error {
			phys := f.Base() + int64(off)
			if err := CheckPlaced(off, phys, v, opts.PropCRC); err != nil {
				return err
			}
			if !v.HasPropCRC() {
				res.NoPropCRCEnd = phys + int64(v.TotalSize())
			}
			res.Records++
			res.Bytes += int64(v.TotalSize())
			if opts.OnRecord != nil {
				return opts.OnRecord(phys, v)
			}
			return nil
		})
		if tail == TailStopped {
			ce, ok := errors.AsType[*CorruptError](err)
			if !ok || !Placed(ce.Reason) {
				return res, err
			}
			tail = TailCorrupt
		}
		if tail == TailBlank {
			res.End, res.Tail = f.End(), TailBlank
			continue
		}
		res.End, res.Tail, res.Corrupt = f.Base()+int64(end), tail, err
		if tail == TailCorrupt {
			res.Cut = f.Wrote() - int64(end)
		}
		break
	}
	if res.End < opts.Sealed {
		why := any(res.Tail)
		if res.Corrupt != nil {
			why = res.Corrupt
		}
		return res, fmt.Errorf("%w: valid data ends at %d (%v), below the durable offset %d",
			ErrSealedCorrupt, res.End, why, opts.Sealed)
	}
	if err := l.q.TruncateTo(res.End); err != nil {
		return res, err
	}
	// A clean tail was proven zero to the end of its segment (bar fewer than 4 bytes): only a
	// torn one has bytes to clear.
	if f := l.q.File(res.End); f != nil && (res.Tail != TailClean || f.End()-res.End < 4) {
		if err := f.ZeroFrom(res.End - f.Base()); err != nil {
			return res, err
		}
	}
	return res, nil
}

// nothingAt says no record or filler starts at pos: the TOTALSIZE and magic there are zero.
func nothingAt(seg []byte, pos int) bool {
	if len(seg)-pos < 8 {
		return true
	}
	return firstNonZero(seg[pos:pos+8]) < 0
}

// StartsAt says whether off can start a scan of the log as loaded: it is outside the segments,
// or a record whose PHYSICALOFFSET is off starts there, or the blank filler, or nothing (zeros).
// Recovery asks it before trusting an offset that another writer may have written past, since
// a scan that starts inside a record reads the rest of the log as a torn tail.
func (l *Log) StartsAt(off int64) bool {
	f := l.q.File(off)
	if f == nil {
		return true
	}
	data, pos := f.Data(), int(off-f.Base())
	if nothingAt(data, pos) {
		// Eight zero bytes can sit inside a record too: nothing starts here only if nothing
		// follows either.
		return firstNonZeroIn(data, pos, f.DataExtents(int64(pos))) < 0
	}
	// Where records start is a matter of structure: a damaged body is the scan's to report.
	v, kind, _ := check(data[pos:], Check{NoBodyCRC: true, NoPropCRC: true})
	return kind == KindBlank || (kind == KindRecord && v.PhysicalOffset() == off)
}
