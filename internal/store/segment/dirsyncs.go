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
type DirSyncs struct {
	fs vfs.FS

	// syncMu is held through a whole Sync, so that a Sync that finds nothing pending because
	// another one took it returns only once that one has synced it.
	syncMu sync.Mutex
	mu     sync.Mutex
	dirs   map[string]struct{}
}

// NewDirSyncs returns an empty set of directories of fsys to sync.
func NewDirSyncs(fsys vfs.FS) *DirSyncs {
	return &DirSyncs{fs: fsys, dirs: make(map[string]struct{})}
}

// add notes that dir has an entry that is not durable yet.
func (d *DirSyncs) add(dir string) {
	d.mu.Lock()
	d.dirs[dir] = struct{}{}
	d.mu.Unlock()
}

// Sync makes durable every entry noted before the call. A directory that fails stays pending
// for the next call; every error is returned. Safe for concurrent use, as queues keep being
// created while it syncs.
func (d *DirSyncs) Sync() error {
	d.syncMu.Lock()
	defer d.syncMu.Unlock()
	d.mu.Lock()
	dirs := make([]string, 0, len(d.dirs))
	for dir := range d.dirs {
		dirs = append(dirs, dir)
	}
	clear(d.dirs)
	d.mu.Unlock()
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
