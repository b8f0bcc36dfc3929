package checkpoint

import (
	"errors"
	"fmt"
	"io"
	"io/fs"

	"github.com/rocketstore/engine/internal/store/meta"
	"github.com/rocketstore/engine/internal/vfs"
)

// FileName is the checkpoint's name in the store directory.
const FileName = "checkpoint"

// Load reads and decodes the checkpoint at path (DecodeFile: a write a crash cut short is
// resolved through the backup slot). A missing file gives a zero Checkpoint and an error
// satisfying errors.Is(err, fs.ErrNotExist): no checkpoint was ever completed, which for a
// store that has CommitLog files means "recover from the start", not "empty store". Decode
// errors (ErrCorrupt, ErrVersion) come back with what DecodeFile returned.
func Load(fsys vfs.FS, path string) (Checkpoint, error) {
	b, err := fsys.ReadFile(path)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("checkpoint: load %s: %w", path, err)
	}
	c, err := DecodeFile(b)
	if err != nil {
		return c, fmt.Errorf("checkpoint: load %s: %w", path, err)
	}
	return c, nil
}

// Save makes c the checkpoint at path, durably. It rewrites the file in place, as RocketMQ
// updates its checkpoint through a mapping, so that a disk with no byte free cannot refuse it:
// rewriting blocks a file already has takes none (ext4, XFS, tmpfs), where writing a new file
// to rename over the old one needs a block, and so failed with ENOSPC on a full disk, once a
// second, for as long as the disk stayed full. Only a missing file, or one shorter than a page,
// is written anew (meta.WriteFileAtomic: tmp, fsync, rename, directory fsync).
//
// A rewrite in place must survive a power cut in the middle, when the disk may have written any
// part of the page: some sectors and not others, or a sector torn at any byte (the crash images
// of vfs.Mem do all of these). So it is two writes, each followed by fsync, that never change
// the same bytes (a double write, as InnoDB's doublewrite buffer):
//
//  1. the second half of the page: the backup slot (backup.go) holding the 80 bytes about to
//     go in place (next) and the first 40 bytes as they are now (prev), with its own CRC;
//  2. the first half: RocketMQ's five fields and our extension, then zeros.
//
// At any moment at most one of the two halves is being written, so the other is intact on
// disk. A cut during step 1 leaves the first half as it was, a whole checkpoint (the slot is
// torn, its CRC fails, and DecodeFile goes by the first half alone; or it is whole, and then
// it is the newer checkpoint, whole, and the first 40 bytes are its prev). A cut during step 2
// leaves the slot whole and durable, and the first half anything: DecodeFile then takes next,
// since the first 40 bytes are next's or prev's unless the cut tore them mid-way (or RocketMQ
// rewrote them since); only then is next's extension taken with RocketMQ's fields marked
// Rewritten, which makes recovery treat its offsets as a lower bound and check the tail as
// after RocketMQ: slower, never wrong. In real disks the 80 bytes lie in one 512-byte sector,
// which they write whole, so that case needs a tear inside a sector. Either way a load after a
// cut gives the old checkpoint or the new one, never a torn one taken for whole: the CRCs of
// the extension and of the slot make any other mix fail to decode.
//
// An error leaves the file as the crash argument says: the old checkpoint or the new one. Saves
// of one path must not overlap.
func Save(fsys vfs.FS, path string, c Checkpoint) error {
	page := Encode(c)
	f, err := fsys.OpenUpdate(path)
	if err == nil {
		err = saveInPlace(f, page)
	}
	switch {
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, errShort):
		// Written anew, whole: its slot says so (next and prev are the page's own).
		encodeBackup(page, page)
		if err := meta.WriteFileAtomic(fsys, path, page); err != nil {
			return fmt.Errorf("checkpoint: save: %w", err)
		}
	case err != nil:
		return fmt.Errorf("checkpoint: save %s: %w", path, err)
	}
	return nil
}

// errShort says the file is shorter than a page: an in-place write would have to grow it.
var errShort = errors.New("checkpoint: file shorter than a page")

// saveInPlace is Save's two writes into f, which it closes.
func saveInPlace(f vfs.File, page []byte) (err error) {
	defer func() { err = errors.Join(err, f.Close()) }()
	var prev [Size]byte
	if n, err := f.ReadAt(prev[:], 0); n < Size {
		if err == nil || errors.Is(err, io.EOF) {
			return errShort
		}
		return err
	}
	encodeBackup(page, prev[:rocketMQLen])
	for _, half := range []int{backupOff, 0} { // the slot first: see Save
		if _, err := f.WriteAt(page[half:half+Size/2], int64(half)); err != nil {
			return err
		}
		if err := f.Sync(); err != nil {
			return err
		}
	}
	return nil
}
