package segment

import (
	"errors"
	"io/fs"
	"path/filepath"
	"slices"
	"sync"

	"github.com/rocketstore/engine/internal/vfs"
)

// DirSyncs holds the directories whose new entries (a queue's directories, its files) are not
// durable yet, for queues whose durability a later flush asserts anyway: a ConsumeQueue is
// rebuilt from the CommitLog past the checkpoint, so its files need to be durable only before
// the checkpoint that covers them is written. A new topic's four ConsumeQueues otherwise cost
// nine directory syncs on the dispatcher's path; with DirSyncs the flusher syncs each directory
// once, for every queue created since its last flush.
//
// Past a bound, a directory sync each is itself the cost: 20,000 new topics made 40,000 of them,
// each a journal commit, and a stop took seconds more per 10,000 topics. Above Above directories
// Sync (and SyncAll always) makes them durable with one sync of the whole file system under
// Root (vfs.Syncer), whatever their number.
type DirSyncs struct {
	fs    vfs.FS
	root  string
	above int

	// syncMu is held through a whole Sync, so that a Sync that finds nothing pending because
	// another one took it returns only once that one has synced it; it also guards syncer,
	// opened on the first sync of the file system.
	syncMu sync.Mutex
	syncer vfs.Syncer
	mu     sync.Mutex
	dirs   map[string]struct{}
}

// NewDirSyncs returns an empty set of directories of fsys to sync, all under root. Past above
// directories (never when negative) Sync syncs the file system under root at once.
func NewDirSyncs(fsys vfs.FS, root string, above int) *DirSyncs {
	return &DirSyncs{fs: fsys, root: root, above: above, dirs: make(map[string]struct{})}
}

// add notes that dir has an entry that is not durable yet.
func (d *DirSyncs) add(dir string) {
	d.mu.Lock()
	d.dirs[dir] = struct{}{}
	d.mu.Unlock()
}

// Len is the number of directories to sync.
func (d *DirSyncs) Len() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.dirs)
}

// take returns and forgets the directories to sync. REQUIRES: syncMu held.
func (d *DirSyncs) take() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	dirs := make([]string, 0, len(d.dirs))
	for dir := range d.dirs {
		dirs = append(dirs, dir)
	}
	clear(d.dirs)
	return dirs
}

// Sync makes durable every entry noted before the call: a directory sync each, or past the
// bound one sync of the file system. A directory that fails stays pending for the next call;
// every error is returned. Safe for concurrent use, as queues keep being created while it syncs.
func (d *DirSyncs) Sync() error {
	d.syncMu.Lock()
	defer d.syncMu.Unlock()
	dirs := d.take()
	if d.above >= 0 && len(dirs) > d.above {
		return d.syncAllLocked(dirs, nil)
	}
	slices.Sort(dirs)
	var errs []error
	for _, dir := range dirs {
		if err := d.fs.SyncDir(dir); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue // removed since (a deleted topic): nothing of it to keep
			}
			errs = append(errs, err)
			d.add(dir)
		}
	}
	return errors.Join(errs...)
}

// SyncAll makes durable, with one sync of the file system under the root, every entry noted
// before the call and the segment ranges written (vfs.Syncer.SyncAll). On an error every entry
// stays pending.
func (d *DirSyncs) SyncAll(written []vfs.SegmentRange) error {
	d.syncMu.Lock()
	defer d.syncMu.Unlock()
	return d.syncAllLocked(d.take(), written)
}

// syncAllLocked is SyncAll for dirs, taken. REQUIRES: syncMu held.
func (d *DirSyncs) syncAllLocked(dirs []string, written []vfs.SegmentRange) error {
	err := func() error {
		if d.syncer == nil {
			s, err := d.fs.OpenSyncer(d.root)
			if err != nil {
				return err
			}
			d.syncer = s
		}
		return d.syncer.SyncAll(written)
	}()
	if err != nil {
		for _, dir := range dirs {
			d.add(dir)
		}
	}
	return err
}

// Close releases the file system's handle, if one was opened.
func (d *DirSyncs) Close() error {
	d.syncMu.Lock()
	defer d.syncMu.Unlock()
	if d.syncer == nil {
		return nil
	}
	err := d.syncer.Close()
	d.syncer = nil
	return err
}

// mkdirAll creates dir and its missing parents without syncing, noting the parent of each
// directory it created. It tries dir first: a new queue's topic directory usually exists, so
// that is one mkdir.
func (d *DirSyncs) mkdirAll(dir string) error {
	err := d.fs.Mkdir(dir)
	if parent := filepath.Dir(dir); errors.Is(err, fs.ErrNotExist) && parent != dir {
		if err := d.mkdirAll(parent); err != nil {
			return err
		}
		err = d.fs.Mkdir(dir)
	}
	switch {
	case errors.Is(err, fs.ErrExist):
		return nil
	case err != nil:
		return err
	}
	d.add(filepath.Dir(dir))
	return nil
}
