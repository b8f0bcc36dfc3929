package reader

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"unicode"
	"unicode/utf8"

	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/internal/store/meta"
	"github.com/rocketstore/engine/internal/vfs"
)

// MaxGroupLen bounds a consumer group name in bytes (RocketMQ's limit for group names).
const MaxGroupLen = 255

// ConsumerOffsets holds the offsets consumer groups have committed, per (topic, queue), and
// persists them to <store>/config/consumerOffset.json in RocketMQ's format
// ({"offsetTable": {"<topic>@<group>": {"<queueId>": offset}}}), with meta.Save: atomic
// replacement, the previous version kept as .bak.
//
// Commit and Fetch are safe for concurrent use and never touch the disk. Persist writes the
// table when it changed since the last Persist; the engine calls it on an interval and at
// shutdown. Commits after the last Persist are lost in a crash, as in RocketMQ.
type ConsumerOffsets struct {
	fs    vfs.FS
	dir   string // <store>/config
	path  string
	table *meta.ConsumerOffsets

	version atomic.Uint64 // bumped by every Commit

	saveMu sync.Mutex // Persist calls must not overlap (meta.Save)
	saved  uint64     // version of the last Persist; guarded by saveMu
}

// OpenConsumerOffsets loads the committed offsets of the store in storeDir; a missing file
// (and backup) is an empty table. A file that is damaged with no usable backup is an error
// (wrapping meta.ErrCorrupt), so that a damaged table is never silently replaced.
func OpenConsumerOffsets(fsys vfs.FS, storeDir string) (*ConsumerOffsets, error) {
	if fsys == nil {
		fsys = vfs.Default
	}
	dir := filepath.Join(storeDir, meta.ConfigDirName)
	c := &ConsumerOffsets{fs: fsys, dir: dir, path: filepath.Join(dir, meta.ConsumerOffsetFileName)}
	var f meta.ConsumerOffsetFile
	if _, err := meta.Load(fsys, c.path, &f); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("reader: consumer offsets: %w", err)
	}
	c.table = meta.NewConsumerOffsets(f)
	return c, nil
}

// Commit records offset (the next offset the group will consume) for group in the queue
// (topic, queueID). The group must pass ValidateGroup and the topic commitlog.ValidateTopic;
// queueID and offset must not be negative.
func (c *ConsumerOffsets) Commit(group, topic string, queueID int32, offset int64) error {
	if err := ValidateGroup(group); err != nil {
		return err
	}
	if err := commitlog.ValidateTopic(topic); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidRequest, err)
	}
	if queueID < 0 || offset < 0 {
		return fmt.Errorf("%w: queue %d, offset %d: neither may be negative", ErrInvalidRequest, queueID, offset)
	}
	c.table.SetOffset(group, topic, queueID, offset)
	c.version.Add(1)
	return nil
}

// Fetch returns the offset group committed in the queue (topic, queueID), and whether it
// committed one.
func (c *ConsumerOffsets) Fetch(group, topic string, queueID int32) (int64, bool) {
	return c.table.Offset(group, topic, queueID)
}

// Persist writes the table to consumerOffset.json if a Commit happened since the last
// Persist. Commits may go on meanwhile; the ones it misses are written by the next call.
func (c *ConsumerOffsets) Persist() error {
	c.saveMu.Lock()
	defer c.saveMu.Unlock()
	v := c.version.Load() // before the snapshot: a commit it misses bumps past v
	if v == c.saved {
		return nil
	}
	if err := c.fs.MkdirAll(c.dir); err != nil {
		return fmt.Errorf("reader: consumer offsets: %w", err)
	}
	if err := meta.Save(c.fs, c.path, c.table.Snapshot()); err != nil {
		return fmt.Errorf("reader: consumer offsets: %w", err)
	}
	c.saved = v
	return nil
}

// ValidateGroup checks a consumer group name: non-empty, at most MaxGroupLen bytes, valid
// UTF-8 of printable characters, without '@' (the file's keys are topic@group, so a group
// with '@' could not be read back as itself). The error wraps ErrInvalidGroup.
func ValidateGroup(group string) error {
	switch {
	case group == "":
		return fmt.Errorf("%w: empty name", ErrInvalidGroup)
	case len(group) > MaxGroupLen:
		return fmt.Errorf("%w: %d bytes, more than %d", ErrInvalidGroup, len(group), MaxGroupLen)
	case !utf8.ValidString(group):
		return fmt.Errorf("%w: %q is not valid UTF-8", ErrInvalidGroup, group)
	case strings.Contains(group, meta.OffsetKeySeparator):
		return fmt.Errorf("%w: %q contains %q, which separates topic and group in %s",
			ErrInvalidGroup, group, meta.OffsetKeySeparator, meta.ConsumerOffsetFileName)
	}
	for i, c := range group {
		if !unicode.IsPrint(c) {
			return fmt.Errorf("%w: %q has the unprintable character %U at byte %d", ErrInvalidGroup, group, c, i)
		}
	}
	return nil
}
