package commitlog

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/rocketstore/engine/internal/store/segment"
	"github.com/rocketstore/engine/internal/vfs"
)

// DefaultFileSize is RocketMQ's mappedFileSizeCommitLog: 1 GiB.
const DefaultFileSize = 1 << 30

// LogOptions configure a Log.
type LogOptions struct {
	FS vfs.FS
	// Dir is the CommitLog directory, <store>/commitlog.
	Dir string
	// FileSize is the size of every segment; 0 means DefaultFileSize.
	FileSize int64
	// Prefault takes the page faults of a segment allocated ahead before the writer reaches it.
	// With Pwrite it is ignored: the writer never faults on the mapping.
	Prefault bool
	// Pwrite makes Append gather records in memory and Commit write them to the file with one
	// pwrite, instead of copying each into the mapping. The page cache then takes the pages
	// without a write fault (and the file system's page_mkwrite) per page, which on ext4 costs
	// the writer several times the copy: measured in BenchmarkLogWrite.
	Pwrite bool
	// ReadOnly opens the segments read-only (offline readers, verify).
	ReadOnly bool
}

// Log is the CommitLog: the one append-only sequence of records of every topic, stored in
// segments of a fixed size named by their first offset.
//
// Ownership: one goroutine (the appender) calls Append; one (the flusher) calls Flush; one at a
// time calls PrepareNext; readers call Read, Each or Acquire from anywhere. A record is in place
// before the write position moves past it, so a reader that sees an offset below MaxOffset sees
// the whole record.
type Log struct {
	q      *segment.Queue
	size   int64
	cur    *segment.File // the segment being written; writer-owned
	pwrite bool
	// pend holds the records appended to cur since the last Commit (Pwrite only); they are at
	// cur's write position on. Writer-owned.
	pend []byte
	// failed is the error of a Commit that failed: every later Append and Commit returns it.
	failed error
}

// maxPend bounds what Pwrite gathers before Append writes it out itself.
const maxPend = 1 << 20

// ErrTooLarge is returned by Append for a record that cannot fit in any segment.
var ErrTooLarge = errors.New("commitlog: record larger than a segment")

// OpenLog opens (or creates) the CommitLog in opts.Dir. Existing segments load as full: the
// caller recovers the real end (Recover or SetEnd) before appending.
func OpenLog(opts LogOptions) (*Log, error) {
	if opts.FileSize == 0 {
		opts.FileSize = DefaultFileSize
	}
	q, err := segment.Open(segment.Options{
		FS: opts.FS, Dir: opts.Dir, FileSize: opts.FileSize, Prefault: opts.Prefault && !opts.Pwrite, ReadOnly: opts.ReadOnly,
	})
	if err != nil {
		return nil, err
	}
	l := &Log{q: q, size: opts.FileSize, pwrite: opts.Pwrite}
	if l.pwrite {
		l.pend = make([]byte, 0, maxPend)
	}
	return l, nil
}

// Queue is the segment queue underneath, for retention and inspection.
func (l *Log) Queue() *segment.Queue { return l.q }

// FileSize is the size of every segment.
func (l *Log) FileSize() int64 { return l.size }

// MinOffset is the first offset still stored.
func (l *Log) MinOffset() int64 { return l.q.MinOffset() }

// MaxOffset is the offset just past the last byte written.
func (l *Log) MaxOffset() int64 { return l.q.MaxOffset() }

// FlushedOffset is the offset below which every byte is durable.
func (l *Log) FlushedOffset() int64 { return l.q.FlushedWhere() }

// SetEnd makes end the end of the log: later segments are deleted and the segment holding end
// gets its write position there. The bytes after end are left as they are; see Recover.
func (l *Log) SetEnd(end int64) error {
	l.cur = nil
	return l.q.TruncateTo(end)
}

// Append copies rec (a record encoded by AppendRecord, exactly TOTALSIZE bytes) to the end of
// the log, then stamps its queue offset, physical offset and store timestamp (and whole-record
// CRC when propCRC) in place. When rec does not fit in the current segment with room for the
// blank filler after it, the filler is written and the record goes to the start of the next
// segment. It returns the record's physical offset.
//
// With Pwrite the record is only gathered: it reaches the file, and MaxOffset moves past it, at
// the next Commit (or when Append writes a full gather out itself).
//
// Append allocates nothing on its steady path. A full disk can only fail it when a new segment
// must be created (its blocks are reserved at creation), and then nothing is written.
func (l *Log) Append(rec []byte, queueOffset, storeTimestamp int64, propCRC bool) (int64, error) {
	n := int64(len(rec))
	if n+BlankSize > l.size {
		return 0, fmt.Errorf("%w: %d bytes, segments of %d", ErrTooLarge, n, l.size)
	}
	if l.failed != nil {
		return 0, l.failed
	}
	f, err := l.writable()
	if err != nil {
		return 0, err
	}
	pos := f.Wrote() + int64(len(l.pend))
	if !Fits(int(n), int(l.size-pos)) {
		if f, err = l.rollFrom(f); err != nil {
			return 0, err
		}
		pos = 0
	}
	phys := f.Base() + pos
	if !l.pwrite {
		dst := f.Data()[pos : pos+n]
		copy(dst, rec)
		Stamp(dst, queueOffset, phys, storeTimestamp, propCRC)
		f.SetWrote(pos + n)
		return phys, nil
	}
	if len(l.pend)+int(n) > cap(l.pend) && len(l.pend) > 0 {
		if err := l.Commit(); err != nil {
			return 0, err
		}
	}
	l.pend = append(l.pend, rec...)
	Stamp(l.pend[len(l.pend)-int(n):], queueOffset, phys, storeTimestamp, propCRC)
	return phys, nil
}

// Commit writes the records Append gathered (Pwrite) to the file and moves the write position
// past them; without Pwrite it has nothing to do. On error the write position stays where it
// was: the records are not in the log (bytes of them may be in the file past its end, where
// recovery finds a torn tail), and the log refuses every later Append and Commit with the same
// error, since what the page cache holds after a failed write is not known (as a failed fsync:
// the process must start again from what recovery finds on disk).
func (l *Log) Commit() error {
	if l.failed != nil || len(l.pend) == 0 {
		return l.failed
	}
	f := l.cur
	pos := f.Wrote()
	if err := f.WriteAt(l.pend, pos); err != nil {
		l.failed = fmt.Errorf("commitlog: write of %d bytes at %d failed, the log takes no more records: %w",
			len(l.pend), f.Base()+pos, err)
		return l.failed
	}
	f.SetWrote(pos + int64(len(l.pend)))
	l.pend = l.pend[:0]
	return nil
}

// writable returns the segment to write, creating the first one when the log is empty and
// reserving the blocks of a segment loaded from disk (loaded segments report nothing reserved).
func (l *Log) writable() (*segment.File, error) {
	if l.cur != nil {
		return l.cur, nil
	}
	f := l.q.Last()
	if f == nil {
		var err error
		if f, err = l.q.Roll(0); err != nil {
			return nil, err
		}
	}
	if err := f.Reserve(f.Size()); err != nil {
		return nil, err
	}
	if f.Full() {
		return l.rollFrom(f)
	}
	l.cur = f
	return f, nil
}

// rollFrom closes f with the blank filler (when there is room left) and moves to the next
// segment. The next segment is created first: if that fails, f is left as it was, so a retry
// after space returns continues cleanly.
func (l *Log) rollFrom(f *segment.File) (*segment.File, error) {
	next, err := l.q.Roll(f.End())
	if err != nil {
		return nil, err
	}
	if err := next.Reserve(next.Size()); err != nil {
		return nil, err
	}
	if err := l.Commit(); err != nil {
		return nil, err
	}
	if pos := f.Wrote(); pos < f.Size() {
		Blank(f.Data()[pos:], int(f.Size()-pos))
		f.SetWrote(f.Size())
	}
	if l.pwrite {
		// The full segment is not written again: its descriptor goes, so that a long-lived
		// engine holds one for the segment it writes, not one per segment it ever wrote. A
		// close error is not the roll's: the bytes are in the page cache, and the next sync of
		// the segment reports any write-back error.
		_ = f.DoneWriting()
	}
	l.cur = next
	return next, nil
}

// Start makes sure the log has a segment to write (a fresh store gets its first one now rather
// than on the first append) and returns it, so that the allocator can warm it off the writer.
// Only the writer, or its owner before the writer runs, calls it.
func (l *Log) Start() error {
	_, err := l.writable()
	return err
}

// WarmActive takes the page faults of the unwritten rest of the segment being written (a fresh
// or reopened segment was not allocated ahead, so nothing prefaulted it). Safe to call from
// another goroutine while the writer appends.
func (l *Log) WarmActive() error {
	f := l.q.Last()
	if f == nil {
		return nil
	}
	return f.PrefaultFrom(f.Wrote())
}

// NeedsNext says whether the writer has passed half of its segment and the next one is not
// allocated yet: the pipeline's allocator then calls PrepareNext.
func (l *Log) NeedsNext() bool {
	f := l.cur
	return f != nil && f.Wrote() > f.Size()/2 && !l.q.Prepared()
}

// PrepareNext allocates the next segment ahead of need (see segment.Queue.PrepareNext).
func (l *Log) PrepareNext() error { return l.q.PrepareNext() }

// Flush makes every byte below target durable (msync of the pages not synced yet).
func (l *Log) Flush(target int64) error { return l.q.Flush(target) }

// NextFile is the offset where the segment after the one holding off starts: where reading goes
// on after a blank filler.
func (l *Log) NextFile(off int64) int64 { return off - off%l.size + l.size }

// DropCache takes the log's bytes in [from, to) out of the page cache, file by file (see
// vfs.Segment.DropCache): every byte there must be durable. Files deleted meanwhile are passed
// over; the first error is returned after the rest were tried.
func (l *Log) DropCache(from, to int64) error {
	var first error
	for off := from; off < to; off = l.NextFile(off) {
		f, err := l.q.Acquire(off)
		if err != nil {
			continue // deleted by retention, or below the log's start: nothing cached to drop
		}
		err = f.DropCache(off-f.Base(), min(to, f.End())-f.Base())
		f.Release()
		if first == nil {
			first = err
		}
	}
	return first
}

// Read returns a view of the record at phys with a reference on its segment: the view is valid
// until release is called. It checks the record's structure, not its CRCs.
func (l *Log) Read(phys int64) (v View, release func(), err error) {
	f, err := l.q.Acquire(phys)
	if err != nil {
		return View{}, nil, err
	}
	pos := phys - f.Base()
	if pos >= f.Wrote() {
		f.Release()
		return View{}, nil, fmt.Errorf("%w: %d is past the end of the log", segment.ErrOutOfRange, phys)
	}
	v, err = Parse(f.Data()[pos:f.Wrote()])
	if err != nil {
		f.Release()
		return View{}, nil, fmt.Errorf("commitlog: record at %d: %w", phys, err)
	}
	return v, func() { f.Release() }, nil
}

// Each calls fn for every record in [from, limit) in order, crossing segments at blank fillers,
// and returns the offset after the last record it visited. Every record below limit must have
// been written completely (limit is a write or flush position, never inside a record); Each
// checks the structure of each record and, with chk, its CRCs. It stops early when fn returns an
// error, which it returns with the offset of that record.
func (l *Log) Each(from, limit int64, chk Check, fn func(phys int64, v View) error) (int64, error) {
	off := from
	for off < limit {
		f, err := l.q.Acquire(off)
		if err != nil {
			return off, err
		}
		off, err = l.eachInFile(f, off, limit, chk, fn)
		f.Release()
		if err != nil {
			return off, err
		}
	}
	return off, nil
}

func (l *Log) eachInFile(f *segment.File, off, limit int64, chk Check, fn func(int64, View) error) (int64, error) {
	data := f.Data()
	end := min(limit-f.Base(), f.Wrote())
	for pos := off - f.Base(); pos < end; {
		if end-pos >= 8 && binary.BigEndian.Uint32(data[pos+PosMagic:]) == MagicBlank {
			return f.End(), nil
		}
		v, err := Parse(data[pos:end])
		if err == nil {
			err = verify(v, chk)
		}
		if err != nil {
			return f.Base() + pos, fmt.Errorf("commitlog: record at %d: %w", f.Base()+pos, err)
		}
		if err := fn(f.Base()+pos, v); err != nil {
			return f.Base() + pos, err
		}
		pos += int64(v.TotalSize())
	}
	if end >= f.Size() {
		return f.End(), nil
	}
	return f.Base() + end, nil
}

// Close releases the log's segments; segments still held by readers unmap when released.
func (l *Log) Close() error {
	l.cur = nil
	return l.q.Close()
}
