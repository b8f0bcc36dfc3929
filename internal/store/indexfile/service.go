package indexfile

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"sync"
	"time"

	"github.com/rocketstore/engine/internal/vfs"
)

// DefaultMaxQueryNum is RocketMQ's maxMsgsNumBatch: the most offsets one query returns.
const DefaultMaxQueryNum = 64

// DefaultReserveStep is how much of a file's entry area is reserved on disk at a time: 4 MiB,
// about 210,000 entries, so a new 420 MB file costs its 20 MB slot table plus one step.
const DefaultReserveStep = 4 << 20

// Options configure a Service.
type Options struct {
	FS vfs.FS
	// Dir is the index directory, <root>/index.
	Dir string
	// Geometry of every file; the zero value means DefaultGeometry.
	Geometry Geometry
	// ReserveStep is the step in which entry areas are reserved on disk; 0 means
	// DefaultReserveStep, < 0 reserves a whole file at its first put.
	ReserveStep int64
	// MaxQueryNum caps maxNum in Query; 0 means DefaultMaxQueryNum.
	MaxQueryNum int
	// Now and Location name new files (local time, yyyyMMddHHmmssSSS); nil means time.Now and
	// time.Local.
	Now      func() time.Time
	Location *time.Location
	// ReadOnly maps files read-only and refuses every change (for verifiers and dump tools).
	ReadOnly bool
}

// Service is the index directory (RocketMQ's IndexService): files ordered by name, the last one
// written by the single writer (BuildHashes), all of them queried by any goroutine.
//
// The file list is guarded by mu. BuildHashes, DropNewerThan and Close are the writer's; Query,
// Files and Flush may run from any goroutine; DeleteExpired from any one goroutine at a time
// (retention), since it never touches the last file, which is the only one the writer changes.
type Service struct {
	opts Options
	step int64

	mu     sync.RWMutex
	files  []*File
	closed bool
}

// Open loads the index files in opts.Dir (creating the directory unless read-only) in name order,
// as IndexService.load does. Only names of the 17-digit form are taken; other entries are left
// alone. A zero-length file (a creation cut short) is removed. Any other file whose size is not
// the geometry's is an error, since its entries cannot be located.
func Open(opts Options) (*Service, error) {
	if opts.FS == nil {
		return nil, errors.New("indexfile: Options.FS is nil")
	}
	if opts.Geometry == (Geometry{}) {
		opts.Geometry = DefaultGeometry
	}
	if err := opts.Geometry.Validate(); err != nil {
		return nil, err
	}
	opts.MaxQueryNum = cmp.Or(opts.MaxQueryNum, DefaultMaxQueryNum)
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Location == nil {
		opts.Location = time.Local
	}
	s := &Service{opts: opts, step: cmp.Or(opts.ReserveStep, DefaultReserveStep)}
	if s.step < 0 {
		s.step = 0 // segment.File reserves the whole file when the step is 0
	}
	if !opts.ReadOnly {
		if err := opts.FS.MkdirAll(opts.Dir); err != nil {
			return nil, err
		}
	}
	ents, err := opts.FS.ReadDir(opts.Dir)
	if err != nil {
		if opts.ReadOnly && errors.Is(err, fs.ErrNotExist) {
			return s, nil
		}
		return nil, err
	}
	slices.SortFunc(ents, func(a, b vfs.DirEntry) int { return cmp.Compare(a.Name, b.Name) })
	mode := vfs.ReadWrite
	if opts.ReadOnly {
		mode = vfs.ReadOnly
	}
	for _, e := range ents {
		if e.IsDir || !IsName(e.Name) {
			continue
		}
		name := path.Join(opts.Dir, e.Name)
		st, err := opts.FS.Stat(name)
		if err != nil {
			return nil, errors.Join(err, s.closeFiles())
		}
		if st.Size == 0 {
			if opts.ReadOnly {
				continue
			}
			if err := opts.FS.Remove(name); err != nil {
				return nil, errors.Join(err, s.closeFiles())
			}
			continue
		}
		f, err := OpenFile(opts.FS, name, opts.Geometry, s.step, mode)
		if err != nil {
			return nil, errors.Join(err, s.closeFiles())
		}
		s.files = append(s.files, f)
	}
	return s, nil
}

// Files returns the files, oldest first. The slice is a copy; the files may be deleted by
// retention afterwards, which their read methods tolerate.
func (s *Service) Files() []*File {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return slices.Clone(s.files)
}

// LastEndTimestamp is the store time (Unix ms) of the last record indexed, where the newest file
// ends: 0 for none, and for a nil Service (the index is off).
func (s *Service) LastEndTimestamp() int64 {
	if s == nil {
		return 0
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if len(s.files) == 0 {
		return 0
	}
	return s.files[len(s.files)-1].EndTimestamp()
}

// QueryResult is what Query returns (RocketMQ's QueryOffsetResult).
type QueryResult struct {
	// PhyOffsets are CommitLog offsets of entries whose hash matches, newest first. They may
	// belong to other keys with the same hash: read each message and compare its keys.
	PhyOffsets []int64
	// IndexLastUpdateTimestamp and IndexLastUpdatePhyOffset are the end values of the last
	// file, telling the caller how far the index reaches.
	IndexLastUpdateTimestamp int64
	IndexLastUpdatePhyOffset int64
}

// Query looks key up in topic as IndexService.queryOffset does: maxNum is capped at
// Options.MaxQueryNum; files are visited newest to oldest, a file is searched only if its time
// range overlaps [begin, end], and the visit stops after a file whose beginTimestamp < begin or
// once maxNum offsets are found. The offsets are appended to dst[:0].
func (s *Service) Query(dst []int64, topic, key string, maxNum int, begin, end int64) (QueryResult, error) {
	maxNum = min(maxNum, s.opts.MaxQueryNum)
	hash := KeyHash(topic, key)
	res := QueryResult{PhyOffsets: dst[:0]}
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return res, ErrClosed
	}
	// The snapshot stays valid after unlocking: no element below its length is ever overwritten
	// (a roll appends past it, deletion builds a new slice).
	files := s.files
	s.mu.RUnlock()
	for i := len(files) - 1; i >= 0; i-- {
		f := files[i]
		h := f.Header()
		if i == len(files)-1 {
			res.IndexLastUpdateTimestamp = h.EndTimestamp
			res.IndexLastUpdatePhyOffset = h.EndPhyOffset
		}
		if h.TimeMatched(begin, end) {
			res.PhyOffsets = f.SelectPhyOffsets(res.PhyOffsets, hash, maxNum, begin, end)
		}
		if h.BeginTimestamp < begin || len(res.PhyOffsets) >= maxNum {
			break
		}
	}
	return res, nil
}

// DeleteExpired deletes the oldest files whose endPhyOffset < minPhyOffset (the CommitLog's new
// minimum offset), never the last file, stopping at the first file kept, as
// IndexService.deleteExpiredFile does. A file is unlinked at once and unmapped when its last
// query releases it. It returns the names deleted.
func (s *Service) DeleteExpired(minPhyOffset int64) ([]string, error) {
	return s.remove(func(i int, f *File, last bool) (del, stop bool) {
		if last || f.EndPhyOffset() >= minPhyOffset {
			return false, true
		}
		return true, false
	})
}

// DropNewerThan deletes every file whose endTimestamp > indexMsgTimestamp (the checkpoint's),
// which RocketMQ does at load after an abnormal exit: those files may lack entries that never
// reached the disk, and re-dispatch rebuilds them. It returns the names deleted. Call it before
// the writer starts.
func (s *Service) DropNewerThan(indexMsgTimestamp int64) ([]string, error) {
	return s.remove(func(i int, f *File, last bool) (del, stop bool) {
		return f.EndTimestamp() > indexMsgTimestamp, false
	})
}

// DropPast deletes the newest files that hold entries at or past end (a CommitLog offset that
// recovery made the new end: entries past it point at records that are gone, and the writer's
// already-indexed rule would skip new records below them). It returns the names deleted and
// the lowest begin offset among those that held entries: re-dispatching from there rebuilds what
// they held below end. rebuildFrom is -1 when no deleted file held an entry.
func (s *Service) DropPast(end int64) (deleted []string, rebuildFrom int64, err error) {
	rebuildFrom = -1
	files := s.Files()
	first := len(files)
	// An empty file rolled after a full one inherits its end offset, so it is dropped too.
	for first > 0 && files[first-1].EndPhyOffset() >= end {
		first--
		if h := files[first].Header(); h.IndexCount > 1 {
			rebuildFrom = h.BeginPhyOffset
		}
	}
	if first == len(files) {
		return nil, -1, nil
	}
	deleted, err = s.remove(func(i int, f *File, last bool) (del, stop bool) {
		return i >= first, false
	})
	return deleted, rebuildFrom, err
}

// remove deletes the files pick selects, in order, until it says stop.
func (s *Service) remove(pick func(i int, f *File, last bool) (del, stop bool)) ([]string, error) {
	if s.opts.ReadOnly {
		return nil, ErrReadOnly
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	var (
		deleted []string
		keep    = make([]*File, 0, len(s.files))
		stopped bool
		err     error
	)
	for i, f := range s.files {
		del := false
		if !stopped {
			del, stopped = pick(i, f, i == len(s.files)-1)
		}
		if !del {
			keep = append(keep, f)
			continue
		}
		if rerr := s.opts.FS.Remove(f.Name()); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			err = fmt.Errorf("indexfile: delete %s: %w", f.Name(), rerr)
			stopped = true // keep the order of what remains: no gap after a file that stays
			keep = append(keep, f)
			continue
		}
		deleted = append(deleted, f.Name())
		err = errors.Join(err, f.Close())
	}
	s.files = keep // a new slice: Query may still iterate over the old one
	if len(deleted) > 0 {
		err = errors.Join(err, s.opts.FS.SyncDir(s.opts.Dir))
	}
	return deleted, err
}

// Flush makes every file durable (IndexFile.flush); files untouched since their last flush cost
// nothing. The caller flushes after BuildHashes reports a filled file and before it writes that
// file's endTimestamp to the checkpoint.
func (s *Service) Flush() error {
	var errs []error
	for _, f := range s.Files() {
		if err := f.Flush(); err != nil && !errors.Is(err, ErrClosed) {
			errs = append(errs, err) // ErrClosed: deleted meanwhile, nothing to keep
		}
	}
	return errors.Join(errs...)
}

// Close flushes every file and drops the service's references (RocketMQ flushes index files at
// shutdown). Files stay mapped until running queries release them. Later calls fail with
// ErrClosed.
func (s *Service) Close() error { return s.close(true) }

// Abandon drops the service's references without flushing, as a crash would leave the files:
// for an engine that stops without draining.
func (s *Service) Abandon() error { return s.close(false) }

func (s *Service) close(flush bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	s.closed = true
	var errs []error
	for _, f := range s.files {
		if flush && !s.opts.ReadOnly {
			errs = append(errs, f.Flush())
		}
	}
	errs = append(errs, s.closeFiles())
	return errors.Join(errs...)
}

// closeFiles drops the references to every file. REQUIRES: mu held or s not shared.
func (s *Service) closeFiles() error {
	var errs []error
	for _, f := range s.files {
		errs = append(errs, f.Close())
	}
	s.files = nil
	return errors.Join(errs...)
}
