package segment

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rocketstore/engine/internal/vfs"
)

// NameLen is the length of a segment file name: the base offset in 20 zero-padded digits
// (RocketMQ's UtilAll.offset2FileName), so that names sort as their offsets do.
const NameLen = 20

// Name is the file name of the segment that starts at base.
func Name(base int64) string { return fmt.Sprintf("%020d", base) }

// ParseName returns the base offset a segment file name stands for.
func ParseName(name string) (int64, bool) {
	if len(name) != NameLen {
		return 0, false
	}
	n, err := strconv.ParseInt(name, 10, 64)
	if err != nil || n < 0 {
		return 0, false
	}
	return n, true
}

// Options configure a Queue.
type Options struct {
	FS  vfs.FS
	Dir string
	// FileSize is the size of every file of the queue.
	FileSize int64
	// ReserveStep, when non-zero, reserves disk blocks for a new file in steps of this many
	// bytes as it is written, instead of the whole file at creation. Many mostly idle queues
	// (10,000 topics x 4 ConsumeQueues) then cost disk for what they hold, not 6 MB each.
	ReserveStep int64
	// Prefault takes the page faults of a file allocated ahead (PrepareNext) before it is used.
	Prefault bool
	// ReadOnly maps existing files read-only and refuses to create any.
	ReadOnly bool
	// Random turns read-ahead off for the files (vfs.Segment.AdviseRandom): for files written
	// in small pieces at a time and read at random, like ConsumeQueues.
	Random bool
	// DirSyncs, when set, takes the directory syncs that make the queue's new directories and
	// first file durable, for its owner to run before it relies on them (see DirSyncs); when
	// nil, and for every later file, each creation syncs its directory before it returns.
	DirSyncs *DirSyncs
}

// ErrOutOfRange is returned for an offset that no file of the queue holds.
var ErrOutOfRange = errors.New("segment: offset out of range")

// ErrEnd is returned for a file that would end past 2^63-1: its positions (and RocketMQ's long
// offsets) would wrap negative. A queue is full once its last file ends at MaxEnd.
var ErrEnd = errors.New("segment: a file would end past 2^63-1")

// MaxEnd is where the last file of size fileSize at a multiple of fileSize ends: the end of the
// largest queue of such files.
func MaxEnd(fileSize int64) int64 { return math.MaxInt64 / fileSize * fileSize }

// Queue is the ordered set of files that make up one log: files are contiguous, each starting
// where the previous one ends, and named by their base offset.
//
// The file list is copy-on-write, so readers find files without a lock. Changes to the list
// (Roll, DeleteFirst, TruncateTo) are serialised by mu, whole DeleteFirst calls (with their
// unlinks) by delMu; creating files (Roll, PrepareNext) by allocMu, so that a roll waits for a
// file being allocated ahead rather than racing to create it.
type Queue struct {
	opts  Options
	files atomic.Pointer[[]*File]

	mu      sync.Mutex
	delMu   sync.Mutex // one DeleteFirst at a time, through its unlinks
	allocMu sync.Mutex
	ready   *File // the next file, allocated ahead; guarded by allocMu
	// preparing is the base of the file PrepareNext is making or has made (-1: none), so that
	// Prepared never waits for allocMu, which PrepareNext holds while it prefaults a whole file.
	preparing atomic.Int64

	flushedWhere atomic.Int64 // queue offset below which every byte is durable
}

// Open loads the files in opts.Dir (creating the directory unless read-only). Every file must
// have exactly FileSize bytes and the files must be contiguous; like RocketMQ, a zero-length
// last file (a creation that did not finish) is removed. Loaded files start out full (write
// position = size); whoever recovers the queue moves the end with TruncateTo.
func Open(opts Options) (*Queue, error) {
	if opts.FileSize <= 0 {
		return nil, fmt.Errorf("segment: file size %d", opts.FileSize)
	}
	q := &Queue{opts: opts}
	q.preparing.Store(-1)
	if !opts.ReadOnly {
		mkdir := opts.FS.MkdirAll
		if opts.DirSyncs != nil {
			mkdir = opts.DirSyncs.mkdirAll
		}
		if err := mkdir(opts.Dir); err != nil {
			return nil, err
		}
	}
	ents, err := opts.FS.ReadDir(opts.Dir)
	if err != nil {
		if opts.ReadOnly && errors.Is(err, os.ErrNotExist) {
			q.files.Store(new([]*File))
			return q, nil
		}
		return nil, err
	}
	var files []*File
	closeAll := func() {
		for _, f := range files {
			f.Release()
		}
	}
	for i, e := range ents {
		base, ok := ParseName(e.Name)
		if e.IsDir || !ok {
			continue
		}
		name := filepath.Join(opts.Dir, e.Name)
		st, err := opts.FS.Stat(name)
		if err != nil {
			closeAll()
			return nil, err
		}
		if st.Size == 0 && i == len(ents)-1 && !opts.ReadOnly {
			if err := opts.FS.Remove(name); err != nil {
				closeAll()
				return nil, err
			}
			continue
		}
		if st.Size != opts.FileSize {
			closeAll()
			return nil, fmt.Errorf("segment: %s is %d bytes, want %d", name, st.Size, opts.FileSize)
		}
		if base > math.MaxInt64-opts.FileSize {
			closeAll()
			return nil, fmt.Errorf("%w: %s, of %d bytes", ErrEnd, name, opts.FileSize)
		}
		if n := len(files); n > 0 && files[n-1].End() != base {
			closeAll()
			return nil, fmt.Errorf("segment: %s does not follow %s: files are missing", name, files[n-1].Name())
		}
		mode := vfs.ReadWrite
		if opts.ReadOnly {
			mode = vfs.ReadOnly
		}
		seg, err := opts.FS.OpenSegment(name, opts.FileSize, mode)
		if err != nil {
			closeAll()
			return nil, err
		}
		if opts.Random {
			seg.AdviseRandom()
		}
		f := newFile(seg, name, base, opts.ReserveStep)
		f.wrote.Store(opts.FileSize)
		f.flushed.Store(opts.FileSize)
		files = append(files, f)
	}
	q.files.Store(&files)
	q.flushedWhere.Store(q.MaxOffset())
	return q, nil
}

// Dir is the queue's directory.
func (q *Queue) Dir() string { return q.opts.Dir }

// FileSize is the size of every file.
func (q *Queue) FileSize() int64 { return q.opts.FileSize }

// Files is a snapshot of the files, oldest first. The files are not referenced: a caller that
// reads their bytes must Acquire them.
func (q *Queue) Files() []*File { return *q.files.Load() }

// First is the oldest file, or nil.
func (q *Queue) First() *File {
	fs := q.Files()
	if len(fs) == 0 {
		return nil
	}
	return fs[0]
}

// Last is the newest file (the one being written), or nil.
func (q *Queue) Last() *File {
	fs := q.Files()
	if len(fs) == 0 {
		return nil
	}
	return fs[len(fs)-1]
}

// MinOffset is the base of the oldest file, or 0 when there is none.
func (q *Queue) MinOffset() int64 {
	if f := q.First(); f != nil {
		return f.Base()
	}
	return 0
}

// MaxOffset is the queue offset just past the last byte written, or 0 when there is no file.
func (q *Queue) MaxOffset() int64 {
	if f := q.Last(); f != nil {
		return f.Base() + f.Wrote()
	}
	return 0
}

// FlushedWhere is the queue offset below which every byte is known durable.
func (q *Queue) FlushedWhere() int64 { return q.flushedWhere.Load() }

// File returns the file that holds offset off without taking a reference, or nil.
func (q *Queue) File(off int64) *File {
	fs := q.Files()
	if len(fs) == 0 || off < fs[0].Base() {
		return nil
	}
	i := (off - fs[0].Base()) / q.opts.FileSize
	if i >= int64(len(fs)) {
		return nil
	}
	return fs[i]
}

// ModTime is f's modification time as the file system reports it: the age RocketMQ's
// retention goes by (MappedFile.getLastModifiedTimestamp).
func (q *Queue) ModTime(f *File) (time.Time, error) {
	st, err := q.opts.FS.Stat(f.Name())
	if err != nil {
		return time.Time{}, err
	}
	return st.ModTime, nil
}

// Acquire returns the file that holds offset off with a reader's reference taken; the caller
// must Release it. It fails with ErrOutOfRange when no file holds off and with ErrDeleted when
// the file was deleted in the meantime.
func (q *Queue) Acquire(off int64) (*File, error) {
	f := q.File(off)
	if f == nil {
		return nil, fmt.Errorf("%w: %d not in [%d, %d)", ErrOutOfRange, off, q.MinOffset(), q.MaxOffset())
	}
	if !f.Acquire() {
		return nil, fmt.Errorf("%w: %s", ErrDeleted, f.Name())
	}
	return f, nil
}

// Roll adds the next file and returns it; it becomes Last. base must be Last().End(), or any
// multiple of FileSize when the queue is empty. A file allocated ahead by PrepareNext is used
// when it is the right one, so that the writer does not wait for fallocate.
func (q *Queue) Roll(base int64) (*File, error) {
	if q.opts.ReadOnly {
		return nil, fmt.Errorf("segment: %s is read-only", q.opts.Dir)
	}
	if last := q.Last(); last != nil && base != last.End() {
		return nil, fmt.Errorf("segment: roll to %d, want %d", base, last.End())
	}
	if base%q.opts.FileSize != 0 || base < 0 {
		return nil, fmt.Errorf("segment: roll to %d: not a multiple of %d", base, q.opts.FileSize)
	}
	q.allocMu.Lock()
	f := q.ready
	q.ready = nil
	if f != nil && f.Base() != base {
		q.discard(f)
		f = nil
	}
	defer q.allocMu.Unlock()
	if f == nil {
		var err error
		if f, err = q.create(base); err != nil {
			return nil, err
		}
	}
	// The file joins the list before allocMu is released, so that PrepareNext sees it as Last.
	q.mu.Lock()
	fs := append(append([]*File(nil), q.Files()...), f)
	q.files.Store(&fs)
	q.mu.Unlock()
	return f, nil
}

// PrepareNext allocates the file after Last ahead of need (and prefaults it when configured),
// so that the next Roll finds it ready. It does nothing when the queue is empty or the next
// file is already prepared. It is slow (fallocate, page faults): call it off the writer.
func (q *Queue) PrepareNext() error {
	if q.opts.ReadOnly {
		return nil
	}
	q.allocMu.Lock()
	defer q.allocMu.Unlock()
	last := q.Last()
	if last == nil || (q.ready != nil && q.ready.Base() == last.End()) {
		return nil
	}
	if q.ready != nil {
		q.discard(q.ready)
		q.ready = nil
	}
	q.preparing.Store(last.End())
	f, err := q.create(last.End())
	if err == nil && q.opts.Prefault {
		if err = f.Prefault(); err != nil {
			q.discard(f)
		}
	}
	if err != nil {
		q.preparing.Store(-1)
		return err
	}
	q.ready = f
	return nil
}

// Prepared says whether the next file is allocated ahead, or being allocated. It never waits:
// the writer asks it after every round.
func (q *Queue) Prepared() bool {
	last := q.Last()
	return last != nil && q.preparing.Load() == last.End()
}

// create makes a new file at base and syncs the directory (or leaves that to DirSyncs), so that
// the file's name survives a crash as soon as the file is used. REQUIRES: allocMu held.
func (q *Queue) create(base int64) (*File, error) {
	name := filepath.Join(q.opts.Dir, Name(base))
	if base > math.MaxInt64-q.opts.FileSize {
		return nil, fmt.Errorf("%w: %s, of %d bytes", ErrEnd, name, q.opts.FileSize)
	}
	reserve := q.opts.FileSize
	if q.opts.ReserveStep > 0 {
		reserve = min(q.opts.ReserveStep, q.opts.FileSize)
	}
	seg, err := q.opts.FS.CreateSegment(name, q.opts.FileSize, reserve)
	if err != nil {
		return nil, err
	}
	if q.opts.Random {
		seg.AdviseRandom()
	}
	// Only a queue's first file is left to DirSyncs. A file after it is synced at once, which
	// makes every entry before it durable too: a crash that loses unsynced entries one by one
	// could otherwise keep a later file without an earlier one, a queue with a hole.
	if q.opts.DirSyncs != nil && len(q.Files()) == 0 {
		q.opts.DirSyncs.add(q.opts.Dir)
	} else if err := q.opts.FS.SyncDir(q.opts.Dir); err != nil {
		seg.Close()
		q.opts.FS.Remove(name)
		return nil, err
	}
	return newFile(seg, name, base, q.opts.ReserveStep), nil
}

// discard unmaps and removes a file that never joined the queue.
func (q *Queue) discard(f *File) {
	f.Release()
	q.opts.FS.Remove(f.Name())
}

// Flush makes every byte below target durable, syncing only what was not synced yet, file by
// file, and with DirSyncs first the directory entries still pending (every queue's: one sync
// a directory). One goroutine at a time may call it.
func (q *Queue) Flush(target int64) error {
	if q.opts.DirSyncs != nil {
		if err := q.opts.DirSyncs.Sync(); err != nil {
			return err
		}
	}
	for {
		where := q.flushedWhere.Load()
		if where >= target {
			return nil
		}
		f := q.File(where)
		if f == nil {
			if q.flushedWhere.Load() > where {
				continue // retention deleted the file (see DeleteFirst)
			}
			return nil
		}
		if !f.Acquire() {
			if q.flushedWhere.Load() > where {
				continue // retention deleted the file: its bytes need no flush (see DeleteFirst)
			}
			return fmt.Errorf("%w: flush %s", ErrDeleted, f.Name())
		}
		err := f.Flush(target - f.Base())
		next := f.Base() + f.Flushed()
		f.Release()
		if err != nil {
			return err
		}
		if next <= where {
			if q.flushedWhere.Load() > where {
				continue // the file was deleted while it was flushed
			}
			return nil // nothing more has been written
		}
		q.advanceFlushed(next)
	}
}

// advanceFlushed moves flushedWhere up to off, never down: DeleteFirst may have moved it past
// a file that a flush was still syncing.
func (q *Queue) advanceFlushed(off int64) {
	for {
		cur := q.flushedWhere.Load()
		if off <= cur || q.flushedWhere.CompareAndSwap(cur, off) {
			return
		}
	}
}

// DeleteFirst deletes files from the oldest on while del says so, at most max of them, and
// never the last file. It stops at the first file del keeps. Deleted files leave the queue at
// once and are unmapped when their last reader releases them. It returns the names it deleted.
//
// Files are unlinked oldest first, each unlink made durable before the next, so that a crash
// in the middle leaves the files that remain contiguous (Open refuses a gap); the writer's Roll
// does not wait for those directory syncs. If an unlink fails, the files after it stay on disk
// (out of the queue, they come back at the next Open and are deleted again later).
//
// The flushed offset moves up to the first file kept: bytes that are gone need no flush, and a
// flush that was on its way into a deleted file goes on with the next one instead of stalling
// below the queue's start.
func (q *Queue) DeleteFirst(max int, del func(*File) bool) ([]string, error) {
	if q.opts.ReadOnly {
		return nil, fmt.Errorf("segment: %s is read-only", q.opts.Dir)
	}
	q.delMu.Lock()
	defer q.delMu.Unlock()
	q.mu.Lock()
	fs := q.Files()
	n := 0
	for n < max && n < len(fs)-1 && del(fs[n]) {
		n++
	}
	if n == 0 {
		q.mu.Unlock()
		return nil, nil
	}
	// Before the list changes and before any release: a flush that then misses a deleted file
	// in the list, or fails to acquire it, sees the flushed offset past it.
	q.advanceFlushed(fs[n].Base())
	rest := append([]*File(nil), fs[n:]...)
	q.files.Store(&rest)
	q.mu.Unlock()

	var names []string
	var errs []error
	failed := false
	for _, f := range fs[:n] {
		if !failed {
			if err := q.opts.FS.Remove(f.Name()); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, fmt.Errorf("segment: delete %s: %w", f.Name(), err))
				failed = true
			} else {
				names = append(names, f.Name())
				if err := q.opts.FS.SyncDir(q.opts.Dir); err != nil {
					errs = append(errs, fmt.Errorf("segment: delete %s: %w", f.Name(), err))
					failed = true
				}
			}
		}
		errs = append(errs, f.Release())
	}
	return names, errors.Join(errs...)
}

// TruncateTo makes off the end of the queue: files that start past off are deleted, the file
// that holds off gets write and flush positions at off, and earlier files are left full. Bytes
// past off are not touched (File.ZeroFrom clears them when wanted).
func (q *Queue) TruncateTo(off int64) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	fs := q.Files()
	keep := len(fs)
	for i, f := range fs {
		switch {
		case f.Base() > off:
			if keep == len(fs) {
				keep = i
			}
		case off < f.End():
			f.SetWrote(off - f.Base())
			f.flushed.Store(off - f.Base())
		}
	}
	if keep == len(fs) {
		q.flushedWhere.Store(off)
		return nil
	}
	rest := append([]*File(nil), fs[:keep]...)
	q.files.Store(&rest)
	// From the last file back, the directory synced after each removal, stopping at the first
	// failure: whatever a crash keeps of the removals, the files left are a gap-free run from
	// the first. Removals made durable together in no particular order (entry by entry) could
	// keep a later file without an earlier one, a queue with a hole, which the next open
	// refuses.
	var errs []error
	for i := len(fs) - 1; i >= keep; i-- {
		if err := q.opts.FS.Remove(fs[i].Name()); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("segment: delete %s: %w", fs[i].Name(), err))
			break
		}
		if err := q.opts.FS.SyncDir(q.opts.Dir); err != nil {
			errs = append(errs, fmt.Errorf("segment: delete %s: %w", fs[i].Name(), err))
			break
		}
	}
	for _, f := range fs[keep:] {
		errs = append(errs, f.Release())
	}
	q.flushedWhere.Store(off)
	return errors.Join(errs...)
}

// Close releases the queue's references; files still held by readers are unmapped when they
// release them.
func (q *Queue) Close() error {
	q.allocMu.Lock()
	if q.ready != nil {
		q.ready.Release()
		q.ready = nil
	}
	q.allocMu.Unlock()
	q.mu.Lock()
	defer q.mu.Unlock()
	var errs []error
	for _, f := range q.Files() {
		errs = append(errs, f.Release())
	}
	q.files.Store(new([]*File))
	return errors.Join(errs...)
}

// Unflushed is what a Queue holds written and not flushed below a target, file by file, each
// file acquired until Done: for one sync of the whole file system (vfs.Syncer) to make it
// durable together with other queues' (see DirSyncs.SyncAll).
type Unflushed struct {
	q     *Queue
	files []*File
	to    []int64 // each file's write position when taken
}

// Unflushed returns what Flush(target) would sync now.
func (q *Queue) Unflushed(target int64) Unflushed {
	u := Unflushed{q: q}
	for where := q.flushedWhere.Load(); where < target; {
		f := q.File(where)
		if f == nil || !f.Acquire() {
			break
		}
		to := min(target-f.Base(), f.Wrote())
		if to <= f.Flushed() {
			f.Release()
			break
		}
		u.files, u.to = append(u.files, f), append(u.to, to)
		if to < f.Size() {
			break
		}
		where = f.End()
	}
	return u
}

// Empty says there is nothing to sync.
func (u Unflushed) Empty() bool { return len(u.files) == 0 }

// Ranges appends the ranges to sync to dst.
func (u Unflushed) Ranges(dst []vfs.SegmentRange) []vfs.SegmentRange {
	for i, f := range u.files {
		dst = append(dst, vfs.SegmentRange{Seg: f.seg, From: f.Flushed(), To: u.to[i]})
	}
	return dst
}

// Done releases the files; synced says the ranges are durable, and moves the flushed offsets
// past them, as Flush would have.
func (u Unflushed) Done(synced bool) {
	for i, f := range u.files {
		if synced && u.to[i] > f.Flushed() {
			f.flushed.Store(u.to[i])
			u.q.advanceFlushed(f.Base() + u.to[i])
		}
		f.Release()
	}
}
