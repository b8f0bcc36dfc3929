package checkpoint

import (
	"fmt"

	"github.com/rocketstore/engine/internal/store/meta"
	"github.com/rocketstore/engine/internal/vfs"
)

// FileName is the checkpoint's name in the store directory.
const FileName = "checkpoint"

// Load reads and decodes the checkpoint at path. A missing file gives a zero Checkpoint and an
// error satisfying errors.Is(err, fs.ErrNotExist): no checkpoint was ever completed, which for
// a store that has CommitLog files means "recover from the start", not "empty store". Decode
// errors (ErrCorrupt, ErrVersion) come back with what Decode returned.
func Load(fsys vfs.FS, path string) (Checkpoint, error) {
	b, err := fsys.ReadFile(path)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("checkpoint: load %s: %w", path, err)
	}
	c, err := Decode(b)
	if err != nil {
		return c, fmt.Errorf("checkpoint: load %s: %w", path, err)
	}
	return c, nil
}

// Save replaces the checkpoint at path with c atomically and durably (meta.WriteFileAtomic: tmp,
// fsync, rename, directory fsync), so a crash leaves the previous checkpoint or this one, never
// a torn one. RocketMQ updates its checkpoint in place through a mapping; replacing the file
// instead is invisible to it, since it reads the file only at startup.
func Save(fsys vfs.FS, path string, c Checkpoint) error {
	if err := meta.WriteFileAtomic(fsys, path, Encode(c)); err != nil {
		return fmt.Errorf("checkpoint: save: %w", err)
	}
	return nil
}
