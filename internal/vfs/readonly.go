package vfs

import (
	"io"
	"io/fs"
)

// ReadOnlyFS is FS for readers that must never change a store an engine may be writing (offline
// reads, verify): segments map read-only, and every call that would change something fails
// with a *fs.PathError wrapping Err. Embed it to override ReadDir.
type ReadOnlyFS struct {
	FS
	Err error
}

func (r ReadOnlyFS) refuse(op, name string) error {
	return &fs.PathError{Op: op, Path: name, Err: r.Err}
}

// CreateSegment refuses.
func (r ReadOnlyFS) CreateSegment(name string, _, _ int64) (Segment, error) {
	return nil, r.refuse("create", name)
}

// OpenSegment maps name read-only; it refuses to map it read-write.
func (r ReadOnlyFS) OpenSegment(name string, size int64, mode Mode) (Segment, error) {
	if mode != ReadOnly {
		return nil, r.refuse("open", name)
	}
	return r.FS.OpenSegment(name, size, mode)
}

// Create refuses.
func (r ReadOnlyFS) Create(name string) (File, error) { return nil, r.refuse("create", name) }

// OpenUpdate refuses.
func (r ReadOnlyFS) OpenUpdate(name string) (File, error) { return nil, r.refuse("open", name) }

// Remove refuses.
func (r ReadOnlyFS) Remove(name string) error { return r.refuse("remove", name) }

// Rename refuses.
func (r ReadOnlyFS) Rename(oldname, _ string) error { return r.refuse("rename", oldname) }

// MkdirAll refuses.
func (r ReadOnlyFS) MkdirAll(dir string) error { return r.refuse("mkdir", dir) }

// Mkdir refuses.
func (r ReadOnlyFS) Mkdir(dir string) error { return r.refuse("mkdir", dir) }

// SyncDir refuses.
func (r ReadOnlyFS) SyncDir(dir string) error { return r.refuse("sync", dir) }

// OpenSyncer refuses.
func (r ReadOnlyFS) OpenSyncer(dir string) (Syncer, error) { return nil, r.refuse("sync", dir) }

// Lock refuses.
func (r ReadOnlyFS) Lock(name string) (io.Closer, error) { return nil, r.refuse("lock", name) }
