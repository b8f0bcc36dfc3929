package meta

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/rocketstore/engine/internal/vfs"
)

// The abort marker's file names, as RocketMQ's StorePathConfigHelper and MixAll.string2File
// spell them.
const (
	AbortFileName    = "abort"
	AbortBakFileName = "abort.bak"
)

// CreateAbort marks the store at storeDir as running: it writes "abort" holding pid as decimal
// text, which is what RocketMQ writes at the end of start(), so that a start after a crash sees
// the marker and recovers abnormally, and so that LockStore can name the running process.
//
// Like RocketMQ (createNewFile, then MixAll.string2File) it first writes "abort.bak" with the
// marker's previous content: empty on a clean start, the crashed process's pid after a crash.
// Both files are durable when CreateAbort returns; the marker must be, since a crash before it
// reaches the disk would let the next start take the fast, normal recovery path.
//
// On a disk with no block free (vfs.IsNoSpace) the pid cannot be written, but the marker can
// still be made: an empty file takes no block. CreateAbort then keeps the marker a crash left,
// or creates it empty (as RocketMQ's createNewFile does first), durably, and returns nil; the
// pid is missing (ReadAbortPID fails), which only costs LockStore the holder's name. Without
// the marker a crash would be taken for a clean stop, so it fails only when even that cannot be
// done (no inode left).
func CreateAbort(fsys vfs.FS, storeDir string, pid int) error {
	name := filepath.Join(storeDir, AbortFileName)
	prev, err := fsys.ReadFile(name)
	existed := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("meta: create abort: %w", err)
	}
	err = WriteFileAtomic(fsys, filepath.Join(storeDir, AbortBakFileName), prev)
	if err == nil {
		err = WriteFileAtomic(fsys, name, []byte(strconv.Itoa(pid)))
	}
	switch {
	case err == nil:
		return nil
	case !vfs.IsNoSpace(err):
		return fmt.Errorf("meta: create abort: %w", err)
	case existed:
		return nil // the marker a crash left marks this run too; WriteFileAtomic left it whole
	}
	f, cerr := fsys.Create(name)
	if cerr != nil {
		return fmt.Errorf("meta: create abort: %w (and empty: %w)", err, cerr)
	}
	if cerr = errors.Join(f.Sync(), f.Close(), fsys.SyncDir(storeDir)); cerr != nil {
		return fmt.Errorf("meta: create abort: %w (and empty: %w)", err, cerr)
	}
	return nil
}

// AbortExists reports whether the abort marker is present, i.e. whether the last process using
// the store did not shut down cleanly (or is still running).
func AbortExists(fsys vfs.FS, storeDir string) (bool, error) {
	_, err := fsys.Stat(filepath.Join(storeDir, AbortFileName))
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	default:
		return false, fmt.Errorf("meta: stat abort: %w", err)
	}
}

// RemoveAbort marks a clean shutdown by removing the abort marker, durably (remove, then fsync
// the directory): the caller removes it last, after everything else is flushed, and a removal a
// crash could undo would send the next start into abnormal recovery for nothing. A missing
// marker is not an error. abort.bak stays, as in RocketMQ.
func RemoveAbort(fsys vfs.FS, storeDir string) error {
	if err := fsys.Remove(filepath.Join(storeDir, AbortFileName)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("meta: remove abort: %w", err)
	}
	// Synced even when the file was already gone: an earlier removal may not have been.
	if err := fsys.SyncDir(storeDir); err != nil {
		return fmt.Errorf("meta: remove abort: %w", err)
	}
	return nil
}

// ReadAbortPID returns the pid written in the abort marker. A missing marker gives an error
// satisfying errors.Is(err, fs.ErrNotExist); a marker that does not hold a positive decimal
// number (RocketMQ's createNewFile leaves it empty for a moment) gives an error too.
func ReadAbortPID(fsys vfs.FS, storeDir string) (int, error) {
	b, err := fsys.ReadFile(filepath.Join(storeDir, AbortFileName))
	if err != nil {
		return 0, fmt.Errorf("meta: read abort: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("meta: read abort: content %q is not a pid", b)
	}
	return pid, nil
}
