package reader

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/netip"
	"path"
	"sync"

	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/internal/store/consumequeue"
	"github.com/rocketstore/engine/internal/store/indexfile"
	"github.com/rocketstore/engine/internal/store/segment"
	"github.com/rocketstore/engine/internal/vfs"
)

// OfflineOptions describe the store an offline Reader opens. The sizes of its files are read
// from the files (see sizes.go): leave them zero. A size given must be the one the files have,
// or OpenOffline fails with ErrSizeMismatch rather than read the store wrong; it only decides
// where the files cannot tell (a store with no such file yet, or IndexFiles that fit two
// geometries: ErrSizeUnknown without it).
type OfflineOptions struct {
	// CommitLogFileSize is the CommitLog segment size (1 GiB when the log has no segment).
	CommitLogFileSize int64
	// ConsumeQueueUnits is the number of units per ConsumeQueue file (300,000 when no queue
	// has a file).
	ConsumeQueueUnits int
	// IndexSlots and IndexEntries are the IndexFile geometry (5,000,000 and 20,000,000 when
	// there is no index file); either one alone narrows down what the files fit.
	IndexSlots, IndexEntries int
	// NoIndex leaves the IndexFiles closed: Query then fails with ErrIndexDisabled.
	NoIndex bool
	// StoreHost names message ids (see New); the zero value uses each record's STOREHOST.
	StoreHost netip.AddrPort
	// MaxMappedQueues bounds the ConsumeQueues mapped at once (consumequeue.Options.MaxMapped).
	MaxMappedQueues int
}

// offline is what an offline Reader owns besides the Reader's fields.
type offline struct {
	fs   vfs.FS
	dir  string
	opts OfflineOptions

	// refresh serializes Refresh, which alone changes sizes after the open.
	refresh sync.Mutex
	sizes   sizes

	// mu is held shared by every read and exclusively by Refresh while it swaps the
	// CommitLog and the index, and by Close.
	mu     sync.RWMutex
	closed bool
}

// OpenOffline opens the store in dir for reading only, without its lock: an engine may be
// writing it at the same time. Nothing in dir is ever created, changed or deleted. The
// Reader sees the store as it was when it opened; Refresh shows what was written since. Long
// polling is off (GetRequest.Wait is ignored). Close releases the files.
func OpenOffline(fsys vfs.FS, dir string, opts OfflineOptions) (_ *Reader, err error) {
	if fsys == nil {
		fsys = vfs.Default
	}
	if _, err := fsys.Stat(dir); err != nil {
		return nil, fmt.Errorf("reader: open %s: %w", dir, err)
	}
	sz, err := newSizes(dir, opts)
	if err != nil {
		return nil, err
	}
	r := &Reader{host: opts.StoreHost, off: &offline{fs: fsys, dir: dir, opts: opts, sizes: sz}}
	defer func() {
		if err != nil {
			r.closeStores()
		}
	}()
	if err := errors.Join(r.off.resolveLog(), r.off.resolveUnits()); err != nil {
		return nil, err
	}
	if r.log, err = r.off.openLog(); err != nil {
		return nil, err
	}
	if r.cq, err = consumequeue.Open(consumequeue.Options{
		FS: fsys, Root: dir, UnitsPerFile: r.off.sizes.units, MaxMapped: opts.MaxMappedQueues, ReadOnly: true,
	}); err != nil {
		return nil, err
	}
	if _, err := r.cq.Load(); err != nil {
		return nil, err
	}
	if r.index, err = r.off.openIndex(); err != nil {
		return nil, err
	}
	if err := r.LoadSubjectTags(readOnlyFS{FS: fsys}, dir); err != nil {
		return nil, err
	}
	r.loadPropCRCRule(readOnlyFS{FS: fsys}, dir)
	return r, nil
}

func (o *offline) openLog() (*commitlog.Log, error) {
	return commitlog.OpenLog(commitlog.LogOptions{
		FS:       readOnlyFS{FS: o.fs},
		Dir:      o.sizes.commitLogDir,
		FileSize: o.sizes.logSize,
		ReadOnly: true,
	})
}

// openIndex opens the IndexFiles read-only, or returns nil when the index is off.
func (o *offline) openIndex() (*indexfile.Service, error) {
	if o.opts.NoIndex {
		return nil, nil
	}
	if err := o.resolveIndex(); err != nil {
		return nil, err
	}
	return indexfile.Open(indexfile.Options{
		FS:       o.fs,
		Dir:      o.sizes.indexDir,
		Geometry: o.sizes.index,
		ReadOnly: true,
	})
}

// Refresh makes an offline Reader see what the writer added since it opened or last
// refreshed: new ConsumeQueues, files and units (consumequeue.Store.Refresh), new CommitLog
// segments and new index entries. Reads may run meanwhile; they briefly wait while the
// CommitLog and index are swapped. A writer's restart that cut data away (recovery after a
// crash) is not followed: open a new Reader then.
//
// The ConsumeQueues are scanned first, so that the CommitLog opened next holds every record
// their units name. A queue that is not mapped when Refresh runs (never read yet, or unmapped
// under OfflineOptions.MaxMappedQueues) is scanned when it is next read instead, and may then
// show units newer than this CommitLog and index: Get stops at a unit whose record lies past
// the CommitLog it has (as at the end of the queue), and Query may miss the newest messages
// until the next Refresh.
func (r *Reader) Refresh() error {
	o := r.off
	if o == nil {
		return errors.New("reader: Refresh is for offline readers; an engine's reader is always current")
	}
	o.refresh.Lock()
	defer o.refresh.Unlock()
	// The ConsumeQueues first: every unit they show then names a record in a segment the
	// CommitLog opened below has.
	if err := o.checkUnits(); err != nil {
		return err
	}
	if err := r.cq.Refresh(); err != nil {
		return err
	}
	if err := o.resolveLog(); err != nil {
		return err
	}
	o.mu.RLock()
	closed, oldLog := o.closed, r.log
	o.mu.RUnlock()
	if closed {
		return ErrClosed
	}
	log := oldLog
	if changed, err := o.logChanged(oldLog); err != nil {
		return err
	} else if changed {
		if log, err = o.openLog(); err != nil {
			return err
		}
	}
	index, err := o.openIndex()
	if err != nil {
		if log != oldLog {
			log.Close()
		}
		return err
	}
	o.mu.Lock()
	oldIndex := r.index
	if o.closed {
		o.mu.Unlock()
		return errors.Join(ErrClosed, closeIf(index), closeLogIf(log, oldLog))
	}
	r.log, r.index = log, index
	o.mu.Unlock()
	return errors.Join(closeIf(oldIndex), closeLogIf(oldLog, log))
}

func closeIf(s *indexfile.Service) error {
	if s == nil {
		return nil
	}
	return s.Close()
}

// closeLogIf closes l unless it is keep.
func closeLogIf(l, keep *commitlog.Log) error {
	if l == keep {
		return nil
	}
	return l.Close()
}

// logChanged says whether the CommitLog directory lists other segments than l has mapped.
func (o *offline) logChanged(l *commitlog.Log) (bool, error) {
	files := l.Queue().Files()
	ents, err := readOnlyFS{FS: o.fs}.ReadDir(l.Queue().Dir())
	if errors.Is(err, fs.ErrNotExist) {
		return len(files) > 0, nil
	}
	if err != nil {
		return false, fmt.Errorf("reader: %w", err)
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

// Close closes an offline Reader's files (reads in progress finish first); for an engine's
// Reader it does nothing. Later reads of an offline Reader fail with ErrClosed.
func (r *Reader) Close() error {
	if r.off == nil {
		return nil
	}
	r.off.mu.Lock()
	defer r.off.mu.Unlock()
	if r.off.closed {
		return nil
	}
	r.off.closed = true
	return r.closeStores()
}

func (r *Reader) closeStores() error {
	var errs []error
	if r.index != nil {
		errs = append(errs, r.index.Close())
	}
	if r.cq != nil {
		errs = append(errs, r.cq.Close())
	}
	if r.log != nil {
		errs = append(errs, r.log.Close())
	}
	return errors.Join(errs...)
}

// readOnlyFS is the file system of an offline CommitLog: it refuses every change, and its
// ReadDir leaves out a last segment of zero length, which the writer creates empty and sizes
// right after (listing it in between would make the open fail). A last segment of any other
// size is listed: one that is not the segment size is an error when it is opened, never a
// segment silently left out.
type readOnlyFS struct {
	vfs.FS
}

var errReadOnly = errors.New("reader: read-only")

func roErr(op, name string) error { return &fs.PathError{Op: op, Path: name, Err: errReadOnly} }

// CreateSegment refuses.
func (readOnlyFS) CreateSegment(name string, _, _ int64) (vfs.Segment, error) {
	return nil, roErr("create", name)
}

// OpenSegment maps name read-only; it refuses to map it read-write.
func (f readOnlyFS) OpenSegment(name string, size int64, mode vfs.Mode) (vfs.Segment, error) {
	if mode != vfs.ReadOnly {
		return nil, roErr("open", name)
	}
	return f.FS.OpenSegment(name, size, mode)
}

// Create refuses.
func (readOnlyFS) Create(name string) (vfs.File, error) { return nil, roErr("create", name) }

// OpenUpdate refuses.
func (readOnlyFS) OpenUpdate(name string) (vfs.File, error) { return nil, roErr("open", name) }

// Remove refuses.
func (readOnlyFS) Remove(name string) error { return roErr("remove", name) }

// Rename refuses.
func (readOnlyFS) Rename(oldname, _ string) error { return roErr("rename", oldname) }

// MkdirAll refuses.
func (readOnlyFS) MkdirAll(dir string) error { return roErr("mkdir", dir) }

// Mkdir refuses.
func (readOnlyFS) Mkdir(dir string) error { return roErr("mkdir", dir) }

// SyncDir refuses.
func (readOnlyFS) SyncDir(dir string) error { return roErr("sync", dir) }

// OpenSyncer refuses.
func (readOnlyFS) OpenSyncer(dir string) (vfs.Syncer, error) { return nil, roErr("sync", dir) }

// Lock refuses.
func (readOnlyFS) Lock(name string) (io.Closer, error) { return nil, roErr("lock", name) }

// ReadDir lists dir without a last segment that is being created (zero length).
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
