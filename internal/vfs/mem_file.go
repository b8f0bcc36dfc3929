package vfs

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"sync/atomic"
	"syscall"
)

// memSegment is a Segment of a Mem. Its methods may be called from several goroutines; closed
// is guarded by Mem.mu and reserved is atomic so that Reserved needs no lock.
type memSegment struct {
	m        *Mem
	n        *memNode
	name     string
	mode     Mode
	data     []byte // n.data with its capacity clipped, so an append cannot alias it
	reserved atomic.Int64
	closed   bool
}

func (s *memSegment) Data() []byte    { return s.data }
func (s *memSegment) Size() int64     { return int64(len(s.data)) }
func (s *memSegment) Reserved() int64 { return s.reserved.Load() }

// lockOpen checks [from, to), then takes Mem.mu unless s is closed; the caller unlocks.
func (s *memSegment) lockOpen(op string, from, to int64) error {
	if from < 0 || from > to || to > int64(len(s.data)) {
		return memPathErr(op, s.name, fmt.Errorf("range [%d,%d) of %d bytes: %w", from, to, len(s.data), syscall.EINVAL))
	}
	s.m.mu.Lock()
	if s.closed {
		s.m.mu.Unlock()
		return memPathErr(op, s.name, fs.ErrClosed)
	}
	return nil
}

// Reserve grows the node's reservation to upTo, charging the difference against the capacity.
func (s *memSegment) Reserve(upTo int64) error {
	if s.mode == ReadOnly {
		return memPathErr("fallocate", s.name, syscall.EBADF)
	}
	if err := s.lockOpen("fallocate", 0, upTo); err != nil {
		return err
	}
	m, n := s.m, s.n
	defer m.mu.Unlock()
	if n.sparse && upTo > n.reserved {
		if !m.fits(upTo - n.reserved) {
			return memPathErr("fallocate", s.name, syscall.ENOSPC)
		}
		n.reserved = upTo
		m.recharge(n)
	}
	if upTo > s.reserved.Load() {
		s.reserved.Store(upTo)
	}
	return nil
}

// WriteAt copies p into the segment, as a pwrite would into the page cache: the bytes are
// current, not durable, until Sync.
func (s *memSegment) WriteAt(p []byte, off int64) error {
	if s.mode == ReadOnly {
		return memPathErr("pwrite", s.name, syscall.EBADF)
	}
	end := off + int64(len(p))
	if err := s.lockOpen("pwrite", off, end); err != nil {
		return err
	}
	defer s.m.mu.Unlock()
	if r := s.reserved.Load(); end > r {
		return memPathErr("pwrite", s.name, fmt.Errorf("range [%d,%d) past reserved %d: %w", off, end, r, syscall.EINVAL))
	}
	copy(s.data[off:end], p)
	return nil
}

// DataExtents implements DataMapper as the strictest file system may: only the pages that hold
// a non-zero byte are data, so that a reader that skips what it was not told to read is caught.
func (s *memSegment) DataExtents(from int64) ([]Extent, error) {
	size := int64(len(s.data))
	if err := s.lockOpen("seek", min(max(from, 0), size), size); err != nil {
		return nil, err
	}
	defer s.m.mu.Unlock()
	var out []Extent
	for p := max(from, 0); p < size; {
		end := min((p/memPage+1)*memPage, size)
		if !memZero(s.data[p:end]) {
			switch {
			case len(out) > 0 && out[len(out)-1].End == p:
				out[len(out)-1].End = end
			case len(out) == maxExtents-1:
				return append(out, Extent{p, size}), nil
			default:
				out = append(out, Extent{p, end})
			}
		}
		p = end
	}
	return out, nil
}

// memPage is the granularity of Mem's data extents.
const memPage = 4096

var memZeroPage [memPage]byte

func memZero(b []byte) bool { return bytes.Equal(b, memZeroPage[:len(b)]) }

// DoneWriting has no descriptor to close.
func (s *memSegment) DoneWriting() error { return nil }

// Prefault has nothing to fault in memory; it only checks that [from, to) could be written,
// since the real one may dirty the pages and so must stay below Reserved, as OS checks too.
// AdviseRandom implements Segment; memory has no read-ahead.
func (s *memSegment) AdviseRandom() {}

// DropCache implements Segment: memory is its own store, so there is no cache to drop.
func (s *memSegment) DropCache(from, to int64) error { return nil }

func (s *memSegment) Prefault(from, to int64) error {
	if s.mode == ReadOnly {
		return nil
	}
	if err := s.lockOpen("prefault", from, to); err != nil {
		return err
	}
	defer s.m.mu.Unlock()
	if r := s.reserved.Load(); to > r {
		return memPathErr("prefault", s.name, fmt.Errorf("range [%d,%d) past reserved %d: %w", from, to, r, syscall.EINVAL))
	}
	return nil
}

func (s *memSegment) Close() error {
	if err := s.lockOpen("close", 0, 0); err != nil {
		return err
	}
	defer s.m.mu.Unlock()
	s.closed = true
	s.n.maps--
	s.m.release(s.n)
	return nil
}

// release drops one opener of n. REQUIRES: m.mu held.
func (m *Mem) release(n *memNode) {
	n.opens--
	m.recharge(n)
}

// memFile is a File of a Mem; Mem.mu guards its offset and closed flag.
type memFile struct {
	m        *Mem
	n        *memNode
	name     string
	writable bool
	off      int64
	closed   bool
}

// lockOpen takes Mem.mu unless f is closed; the caller unlocks.
func (f *memFile) lockOpen(op string) error {
	f.m.mu.Lock()
	if f.closed {
		f.m.mu.Unlock()
		return memPathErr(op, f.name, fs.ErrClosed)
	}
	return nil
}

func (f *memFile) Read(p []byte) (int, error) {
	if err := f.lockOpen("read"); err != nil {
		return 0, err
	}
	defer f.m.mu.Unlock()
	if f.off >= int64(len(f.n.data)) {
		return 0, io.EOF
	}
	k := copy(p, f.n.data[f.off:])
	f.off += int64(k)
	return k, nil
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, memPathErr("read", f.name, syscall.EINVAL)
	}
	if err := f.lockOpen("read"); err != nil {
		return 0, err
	}
	defer f.m.mu.Unlock()
	if off >= int64(len(f.n.data)) {
		return 0, io.EOF
	}
	if k := copy(p, f.n.data[off:]); k < len(p) {
		return k, io.EOF
	}
	return len(p), nil
}

// Write writes all of p at the offset or nothing at all: on ENOSPC no byte is written, which
// is simpler to reason about in tests than the short writes a real disk may give.
func (f *memFile) Write(p []byte) (int, error) {
	if err := f.lockOpen("write"); err != nil {
		return 0, err
	}
	defer f.m.mu.Unlock()
	if err := f.writeLocked(p, f.off); err != nil {
		return 0, err
	}
	f.off += int64(len(p))
	return len(p), nil
}

// WriteAt writes all of p at off or nothing at all, as Write, without moving the offset. Bytes
// within the file's length cost no space, so only growing the file can fail with ENOSPC.
func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, memPathErr("write", f.name, syscall.EINVAL)
	}
	if err := f.lockOpen("write"); err != nil {
		return 0, err
	}
	defer f.m.mu.Unlock()
	if err := f.writeLocked(p, off); err != nil {
		return 0, err
	}
	return len(p), nil
}

// writeLocked copies p to off, growing the file (within capacity) if it ends past it.
// REQUIRES: f.m.mu held.
func (f *memFile) writeLocked(p []byte, off int64) error {
	m, n := f.m, f.n
	switch {
	case !f.writable:
		return memPathErr("write", f.name, syscall.EBADF)
	case n.maps > 0:
		return memPathErr("write", f.name, syscall.EBUSY)
	}
	end := off + int64(len(p))
	if grow := end - int64(len(n.data)); grow > 0 {
		if !m.fits(grow) {
			return memPathErr("write", f.name, syscall.ENOSPC)
		}
		n.data = append(n.data, make([]byte, grow)...)
	}
	copy(n.data[off:end], p)
	n.modTime = m.now()
	m.recharge(n)
	return nil
}

func (f *memFile) Close() error {
	if err := f.lockOpen("close"); err != nil {
		return err
	}
	defer f.m.mu.Unlock()
	f.closed = true
	f.m.release(f.n)
	return nil
}

// memLock is the Closer of Mem.Lock; Mem.mu guards released.
type memLock struct {
	m        *Mem
	n        *memNode
	released bool
}

func (l *memLock) Close() error {
	l.m.mu.Lock()
	defer l.m.mu.Unlock()
	if l.released {
		return fs.ErrClosed
	}
	l.released = true
	l.n.lockBy = ""
	l.m.release(l.n)
	return nil
}
