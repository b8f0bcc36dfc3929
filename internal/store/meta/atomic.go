package meta

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/rocketstore/engine/internal/vfs"
)

// TmpSuffix is appended to a file's name for the copy WriteFileAtomic writes before renaming
// it into place. A leftover one is only the trace of a write a crash interrupted: the next
// write truncates it, and readers never look at it.
const TmpSuffix = ".tmp"

// WriteFileAtomic replaces path with data so that a crash at any point leaves either the old
// content or the new one: data goes to path+".tmp", which is fsynced, renamed over path, and
// then the directory is fsynced so that the rename itself survives. When it returns nil the new
// content is durable. An error before the rename leaves the old content at path and removes the
// temporary file when it can; an error from the directory fsync comes after the rename, so path
// already reads the new content but a crash may still bring back the old one.
//
// The new file is owner-only (vfs.FileMode, 0600, on the OS file system): the temporary file is
// made by FS.Create, which creates it so (and tightens a leftover one), and the rename gives path
// the temporary file's inode and mode, so a path that had looser bits loses them too.
//
// Calls for the same path must not overlap: they share the temporary file.
func WriteFileAtomic(fsys vfs.FS, path string, data []byte) error {
	tmp := path + TmpSuffix
	if err := writeSynced(fsys, tmp, data); err != nil {
		_ = fsys.Remove(tmp) // best effort: a leftover tmp is harmless, the next write truncates it
		return fmt.Errorf("meta: write %s: %w", path, err)
	}
	if err := fsys.Rename(tmp, path); err != nil {
		_ = fsys.Remove(tmp)
		return fmt.Errorf("meta: write %s: %w", path, err)
	}
	if err := fsys.SyncDir(filepath.Dir(path)); err != nil {
		return fmt.Errorf("meta: write %s: %w", path, err)
	}
	return nil
}

// writeSynced creates name with data and fsyncs it before closing, so that the rename that
// follows can only ever publish complete content.
func writeSynced(fsys vfs.FS, name string, data []byte) error {
	f, err := fsys.Create(name)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		return errors.Join(err, f.Close())
	}
	if err := f.Sync(); err != nil {
		return errors.Join(err, f.Close())
	}
	return f.Close()
}
