// Package segment owns the mapped, fixed-size files that the CommitLog, the ConsumeQueues and
// the IndexFiles are made of, and the ordered set of them that forms one log (RocketMQ's
// MappedFile and MappedFileQueue).
//
// A File is mapped once at its full size and unmapped only when nobody can still hold a slice of
// it: the Queue holds one reference, every reader holds one while it looks at the bytes, and the
// last Release unmaps. Retention can therefore delete a file under live readers: they keep reading
// valid bytes until they release, and new readers are refused with ErrDeleted.
//
// The package is synchronous: no goroutines, no logging. Allocating the next file ahead of need
// is a method (PrepareNext) that the pipeline calls from a goroutine of its own.
package segment

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/rocketstore/engine/internal/vfs"
)

// ErrDeleted is returned when a reader asks for a file that has been deleted or closed.
var ErrDeleted = errors.New("segment: file deleted")

// pageSize is the unit of RocketMQ's flush accounting (OS_PAGE_SIZE) and of zeroing.
const pageSize = 4096

// File is one segment: a mapped file of a fixed size that holds the bytes [Base, Base+Size) of
// its queue's offset space.
//
// Ownership: the queue's single writer moves the write position (SetWrote) and writes bytes
// below Reserved; one flusher at a time calls Flush; any goroutine may read bytes below
// Wrote while it holds a reference (Acquire/Release).
type File struct {
	seg         vfs.Segment
	name        string
	base        int64
	size        int64
	reserveStep int64
	// initial is what was reserved when the file was wrapped (an IndexFile's header and slot
	// table, say): Reserve grows by what was reserved since, the part in use.
	initial int64

	wrote   atomic.Int64 // bytes of the file written so far (its write position)
	flushed atomic.Int64 // bytes of the file known to be durable
	refs    atomic.Int64 // the queue's reference + one per reader; 0 means unmapped
}

// NewFile wraps a mapped segment that is not part of a Queue (an IndexFile, say) so that it gets
// the same reference counting and reservation steps. The caller's reference is the one the
// queue would hold: Release it to let the file unmap once readers are done.
func NewFile(seg vfs.Segment, name string, base, reserveStep int64) *File {
	return newFile(seg, name, base, reserveStep)
}

func newFile(seg vfs.Segment, name string, base, reserveStep int64) *File {
	f := &File{seg: seg, name: name, base: base, size: seg.Size(), reserveStep: reserveStep, initial: seg.Reserved()}
	f.refs.Store(1)
	return f
}

// Name is the file's path.
func (f *File) Name() string { return f.name }

// Base is the queue offset of the file's first byte; the file name is Base in 20 digits.
func (f *File) Base() int64 { return f.base }

// Size is the file's fixed size.
func (f *File) Size() int64 { return f.size }

// End is Base + Size, the base of the next file.
func (f *File) End() int64 { return f.base + f.size }

// Wrote is the write position: bytes [0, Wrote) hold data.
func (f *File) Wrote() int64 { return f.wrote.Load() }

// SetWrote moves the write position. Only the queue's writer calls it, after the bytes are in
// place, so that a reader that sees the new position also sees the bytes.
func (f *File) SetWrote(pos int64) { f.wrote.Store(pos) }

// Flushed is how many bytes from the start are known durable.
func (f *File) Flushed() int64 { return f.flushed.Load() }

// Full says the write position has reached the end of the file.
func (f *File) Full() bool { return f.wrote.Load() >= f.size }

// WriteAt writes p at pos through the file (vfs.Segment.WriteAt); pos+len(p) must be below
// Reserved. It does not move the write position.
func (f *File) WriteAt(p []byte, pos int64) error { return f.seg.WriteAt(p, pos) }

// DoneWriting releases what WriteAt held to write (vfs.Segment.DoneWriting).
func (f *File) DoneWriting() error { return f.seg.DoneWriting() }

// Data is the whole mapping. The caller must hold a reference (or be the queue's writer, whose
// file the queue never deletes) and must not write at or past Reserved.
func (f *File) Data() []byte { return f.seg.Data() }

// Reserved is how many bytes from the start have disk blocks.
func (f *File) Reserved() int64 { return f.seg.Reserved() }

// Reserve makes sure [0, upTo) has disk blocks, growing the reservation in the queue's step, or
// by as much as was reserved since the file was wrapped when that is more (up to
// maxReserveGrowth at a time), or to the whole file when the step is 0. A full disk is an error
// here, never a fault on a later write.
//
// Why the growth: a reservation costs an open, a fallocate and a close, about 25 µs here; in
// 20 KiB steps a ConsumeQueue written at a million units a second took a thousand of them a
// second. Doubling, a busy file reserves a number of times logarithmic in its size, a quiet one
// still takes one step, and no file holds more than about twice what it uses.
func (f *File) Reserve(upTo int64) error {
	reserved := f.seg.Reserved()
	if upTo <= reserved {
		return nil
	}
	target := f.size
	if step := f.reserveStep; step > 0 {
		target = (upTo + step - 1) / step * step
		if grown := reserved + min(reserved-f.initial, maxReserveGrowth); grown > target {
			target = grown / step * step
		}
		target = min(f.size, target)
	}
	return f.seg.Reserve(target)
}

// maxReserveGrowth bounds how much Reserve adds at once beyond what is asked for.
const maxReserveGrowth = 64 << 20

// Acquire takes a reader's reference. It fails once the file is deleted or closed.
func (f *File) Acquire() bool {
	for {
		n := f.refs.Load()
		if n <= 0 {
			return false
		}
		if f.refs.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// Release drops a reference; the last one unmaps the file.
func (f *File) Release() error {
	switch n := f.refs.Add(-1); {
	case n == 0:
		return f.seg.Close()
	case n < 0:
		panic(fmt.Sprintf("segment: %s released more often than acquired", f.name))
	}
	return nil
}

// Flush makes the bytes below min(upTo, Wrote) durable, syncing only the pages not yet synced.
// One goroutine at a time may flush a file.
func (f *File) Flush(upTo int64) error {
	to := min(upTo, f.wrote.Load())
	from := f.flushed.Load()
	if to <= from {
		return nil
	}
	if err := f.seg.Sync(from, to); err != nil {
		return err
	}
	f.flushed.Store(to)
	return nil
}

// Prefault takes the page faults of the reserved part of the file now, so that the writer later
// copies at memory speed (measured: 12.6 M 128-byte records/s into a cold mapping, 61 M/s warm).
func (f *File) Prefault() error { return f.PrefaultFrom(0) }

// PrefaultFrom takes the page faults of the reserved part from pos on. It may run while the
// writer writes there: it faults pages in without changing a byte.
func (f *File) PrefaultFrom(pos int64) error {
	if r := f.seg.Reserved(); pos < r {
		return f.seg.Prefault(pos, r)
	}
	return nil
}

// DropCache takes [from, to) of the file, durable already, out of the page cache (see
// vfs.Segment.DropCache).
func (f *File) DropCache(from, to int64) error { return f.seg.DropCache(from, to) }

// DataExtents returns the parts of the file from pos on that may hold non-zero bytes (see
// vfs.DataMapper): everything else reads as zero without being read.
func (f *File) DataExtents(pos int64) []vfs.Extent { return vfs.DataExtents(f.seg, pos) }

// ZeroFrom clears every non-zero byte from pos to the end of the file and syncs what it
// cleared. Recovery uses it after a torn tail, so that stale bytes past the new end can never be
// taken for records. Pages that are already zero are only read, not dirtied, and only the parts
// that may hold data are read at all.
func (f *File) ZeroFrom(pos int64) error {
	if pos >= f.size {
		return nil
	}
	if err := f.Reserve(f.size); err != nil {
		return err
	}
	data := f.seg.Data()
	first, last := int64(-1), int64(-1)
	for _, x := range f.DataExtents(pos) {
		for p := x.Off; p < x.End; {
			end := min((p/pageSize+1)*pageSize, x.End)
			if !allZero(data[p:end]) {
				clear(data[p:end])
				if first < 0 {
					first = p
				}
				last = end
			}
			p = end
		}
	}
	if first < 0 {
		return nil
	}
	return f.seg.Sync(first, last)
}

func allZero(b []byte) bool {
	for len(b) >= 8 {
		if b[0]|b[1]|b[2]|b[3]|b[4]|b[5]|b[6]|b[7] != 0 {
			return false
		}
		b = b[8:]
	}
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
