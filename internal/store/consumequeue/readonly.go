package consumequeue

import (
	"errors"
	"fmt"
	"io/fs"
	"path"

	"github.com/rocketstore/engine/internal/store/segment"
	"github.com/rocketstore/engine/internal/vfs"
)

// Read-only stores (Options.ReadOnly) serve offline readers, which may run while an engine
// writes the same directory. Three things differ from a writable store:
//
//   - The files are mapped read-only through readOnlyFS, which refuses every change, so that
//     no code path can create, truncate, zero, sync or delete anything.
//   - A queue's end is not recovered but found: findEnd runs Recover's scan (from the third
//     newest file, units until the first with Phys < 0 or Size <= 0) and keeps the result in
//     memory (roEnd). Loaded files count as full, so the segment queue's own end is not the
//     queue's; endOf answers with roEnd instead.
//   - Refresh picks up what the writer added since: new queues, new files (a queue whose file
//     set changed is mapped anew) and new units (the scan goes on from the end it knew).
//
// A unit the writer is storing at the very moment of a scan can be seen half written: the
// writer stores Phys, then Size, then TagsCode, so a scan may take it (Phys and Size valid)
// with a tags code that is not there yet, and on CPUs that do not keep stores in order as
// x86-64 does, with other fields not there yet. Only the newest unit a scan found can be
// caught so: readers must check it against its record, and confirm a tags-code miss on it
// with the record (the reader package does both).

// endOf is the queue's end in bytes: the segment queue's write position, or for a read-only
// queue the end findEnd found.
func (cq *ConsumeQueue) endOf(q *segment.Queue) int64 {
	if cq.cfg.readOnly {
		return cq.roEnd.Load()
	}
	return q.MaxOffset()
}

// segOptions are the options the queue's files are opened with.
func (cq *ConsumeQueue) segOptions() segment.Options {
	return segment.Options{
		FS:          cq.cfg.fs,
		Dir:         cq.dir,
		FileSize:    cq.cfg.fileSize,
		ReserveStep: cq.cfg.reserveStep,
		Random:      true,
		ReadOnly:    cq.cfg.readOnly,
		DirSyncs:    cq.cfg.dirSyncs,
	}
}

// findEnd is Recover for a read-only queue: the same scan, with the result kept in memory
// (the end, the max physical offset, a min offset at least the first file's base and past
// the pre-blank units there) and nothing changed on disk. known is an end found before, or
// -1: while the unit before it is still valid, the scan goes on from there, so that a
// Refresh reads only what was written since. REQUIRES: minMu held; mu held or q not yet
// published.
func (cq *ConsumeQueue) findEnd(q *segment.Queue, known int64) error {
	files := q.Files()
	if len(files) == 0 {
		cq.roEnd.Store(0)
		cq.minLogic.Store(0)
		cq.minPhys.Store(-1)
		cq.maxPhys.Store(-1)
		cq.recovered.Store(true)
		return nil
	}
	first, last := files[0], files[len(files)-1]
	from, maxPhys := files[max(0, len(files)-recoverFiles)].Base(), int64(-1)
	if known > first.Base() && known <= last.End() {
		if u, err := unitAt(q, known-UnitSize); err == nil && u.Valid() {
			from, maxPhys = known, cq.maxPhys.Load()
		}
	}
	end, m, err := scanFrom(q, from)
	if err != nil {
		return fmt.Errorf("consumequeue %s: find end: %w", cq, err)
	}
	if m >= 0 {
		maxPhys = m
	}
	cq.roEnd.Store(end)
	cq.maxPhys.Store(maxPhys)
	if cq.minLogic.Load() < first.Base() { // unknown, or its file was deleted by retention
		cq.minLogic.Store(first.Base())
		cq.minPhys.Store(-1)
	}
	if err := cq.skipLeadingBlanks(first, end); err != nil {
		return err
	}
	cq.clampMin(end)
	cq.recovered.Store(true)
	return nil
}

// scanFrom runs Recover's scan from byte offset from: valid units, file after file while
// files are full of them. It returns the end and the End of the last unit with Phys > 0 it
// passed (-1 if none).
func scanFrom(q *segment.Queue, from int64) (end, maxPhys int64, err error) {
	end, maxPhys = from, -1
	for {
		f := q.File(end)
		if f == nil {
			return end, maxPhys, nil // end is the end of the last file
		}
		if !f.Acquire() {
			return end, maxPhys, fmt.Errorf("%w: %s", segment.ErrDeleted, f.Name())
		}
		n, m := ScanValid(f.Data()[end-f.Base() : f.Size()])
		if err := f.Release(); err != nil {
			return end, maxPhys, err
		}
		if m >= 0 {
			maxPhys = m
		}
		end += int64(n) * UnitSize
		if end < f.End() {
			return end, maxPhys, nil
		}
	}
}

// Refresh brings a read-only Store up to date with what a writer added since Load or the last
// Refresh: queues created since are loaded, and every queue picks up new files and units
// (see ConsumeQueue.Refresh). It does not follow a writer's recovery that cut a queue below
// what was seen; reopen the store after the writer restarts.
func (s *Store) Refresh() error {
	if !s.cfg.readOnly {
		return errNotReadOnly
	}
	if _, err := s.Load(); err != nil {
		return err
	}
	var errs []error
	for _, cq := range s.Queues() {
		errs = append(errs, cq.Refresh())
	}
	return errors.Join(errs...)
}

var errNotReadOnly = errors.New("consumequeue: Refresh is for read-only stores")

// Refresh brings a read-only queue up to date with what a writer added since it was mapped or
// last refreshed: when its files are the same it scans on from the end it knew; when the
// writer rolled to a new file or retention deleted old ones, it maps the files anew and scans
// (readers keep using the old mapping until then). An unmapped queue is scanned when it is
// next used. Safe to call while readers read the queue.
func (cq *ConsumeQueue) Refresh() error {
	if !cq.cfg.readOnly {
		return errNotReadOnly
	}
	cq.mu.RLock()
	q := cq.seg
	if q == nil {
		cq.mu.RUnlock()
		return cq.remap()
	}
	changed, err := cq.filesChanged(q)
	if err == nil && !changed {
		cq.minMu.Lock()
		err = cq.findEnd(q, cq.roEnd.Load())
		cq.minMu.Unlock()
	}
	cq.mu.RUnlock()
	if err != nil || !changed {
		return err
	}
	return cq.remap()
}

// remap maps a read-only queue's files anew and finds its end, then unmaps the old mapping
// (readers in the middle of a read hold their file until they are done). An unmapped queue
// only forgets its end, so that its next use scans.
func (cq *ConsumeQueue) remap() error {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	if cq.closed {
		return fmt.Errorf("%w: %s", ErrClosed, cq)
	}
	old := cq.seg
	if old == nil {
		cq.end = -1
		return nil
	}
	q, err := segment.Open(cq.segOptions())
	if err != nil {
		return fmt.Errorf("consumequeue %s: %w", cq, err)
	}
	cq.minMu.Lock()
	err = cq.findEnd(q, cq.roEnd.Load())
	cq.minMu.Unlock()
	if err != nil {
		return errors.Join(err, q.Close())
	}
	cq.seg = q
	return old.Close()
}

// filesChanged says whether the queue's directory lists other files than q holds.
func (cq *ConsumeQueue) filesChanged(q *segment.Queue) (bool, error) {
	files := q.Files()
	ents, err := cq.cfg.fs.ReadDir(cq.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return len(files) > 0, nil
	}
	if err != nil {
		return false, fmt.Errorf("consumequeue %s: %w", cq, err)
	}
	i := 0
	for _, e := range ents {
		base, ok := segment.ParseName(e.Name)
		if e.IsDir || !ok {
			continue
		}
		if i >= len(files) || files[i].Base() != base {
			return true, nil
		}
		i++
	}
	return i != len(files), nil
}

// readOnlyFS is the file system of a read-only Store: it maps files read-only and refuses
// every change with ErrReadOnly. Its ReadDir leaves out a last segment file of zero length: the
// writer creates a file empty and sizes it right after, and a reader that listed it in between
// would fail to load the queue. A last file of any other size is listed, so that one that is
// not the file size is an error when the queue is mapped, never a file silently left out.
type readOnlyFS struct {
	vfs.ReadOnlyFS
}

// ReadDir lists dir without a last segment file that is being created (zero length).
func (f readOnlyFS) ReadDir(dir string) ([]vfs.DirEntry, error) {
	ents, err := f.FS.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	for i := len(ents) - 1; i >= 0; i-- {
		e := ents[i]
		if _, ok := segment.ParseName(e.Name); e.IsDir || !ok {
			continue
		}
		if st, err := f.FS.Stat(path.Join(dir, e.Name)); err != nil || st.Size == 0 {
			ents = append(ents[:i:i], ents[i+1:]...)
		}
		break
	}
	return ents, nil
}
