package consumequeue

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/rocketstore/engine/internal/store/segment"
	"github.com/rocketstore/engine/internal/vfs"
)

// Defaults, from RocketMQ's MessageStoreConfig where it has one.
const (
	// DefaultUnitsPerFile is mappedFileSizeConsumeQueue / 20: 300,000 units, 6,000,000 bytes.
	DefaultUnitsPerFile = 300_000
	// DefaultReserveUnits is the disk reservation step: 1024 units, 20,480 bytes. A queue that
	// holds one message costs one step of disk, not a whole 6 MB file; a busy one reserves more
	// at a time (segment.File.Reserve).
	DefaultReserveUnits = 1024
	// MinMaxMapped is the least number of queues that may stay mapped at once before idle,
	// flushed ones are unmapped (see Options.MaxMapped and DefaultMaxMapped).
	MinMaxMapped = 4096
	// DefaultSyncFSAbove is Options.SyncFSAbove when 0.
	DefaultSyncFSAbove = 64
	// mapHeadroom are the mappings left to everything but the ConsumeQueues: CommitLog
	// segments and IndexFiles (all mapped), the Go runtime, an embedded nats-server.
	mapHeadroom = 16384
)

// DefaultMaxMapped is the bound on mapped queues when Options.MaxMapped is 0: the process's
// mapping limit (vfs.MaxMapCount) less a headroom for the other mappings, and at least
// MinMaxMapped. With Linux's default limit (65,530) that is 49,146, so that 10,000 topics of 4
// queues all stay mapped: a bound below the queues in use makes every message of a round-robin
// load unmap one queue (msync, munmap) and map another (open, mmap), which measured 150 µs a
// message with a bound of 4,096 and 40,000 queues.
func DefaultMaxMapped() int { return max(MinMaxMapped, vfs.MaxMapCount()-mapHeadroom) }

// Options configure a Store and every ConsumeQueue in it.
type Options struct {
	// FS is the file system; vfs.Default when nil.
	FS vfs.FS
	// Root is the store root; queues live in Root/consumequeue/<topic>/<queueId>/.
	Root string
	// UnitsPerFile is the number of units per file (DefaultUnitsPerFile when 0). Every file of
	// an existing store must have this size, as RocketMQ requires.
	UnitsPerFile int
	// ReserveUnits is the step, in units, in which disk blocks are reserved as a file fills
	// (DefaultReserveUnits when 0; negative reserves whole files at creation, as RocketMQ).
	ReserveUnits int
	// MaxMapped bounds the queues whose files are mapped at the same time (DefaultMaxMapped()
	// when 0; negative means no bound). Each mapped queue holds one mapping per file (its
	// descriptor is closed once mapped), and Linux allows 65,530 mappings by default
	// (vm.max_map_count; raise it for more queues). Past the bound, queues that are fully flushed and not used since the last
	// sweep are unmapped and mapped again on their next use. The bound is soft: queues with
	// unflushed data are never unmapped, so it can be exceeded until the next flush.
	MaxMapped int
	// SyncFSAbove is how many files and directories a flush syncs one by one at most: past it,
	// FlushAll makes them durable with one sync of the file system (vfs.Syncer, syncfs(2)),
	// whatever their number (DefaultSyncFSAbove when 0; negative: always one by one). Each
	// msync of a file or fsync of a directory costs a journal commit, so 20,000 new queues made
	// a flush, and so a stop, take seconds; one syncfs also writes back whatever else is dirty
	// on the file system, which costs less than that many commits.
	SyncFSAbove int
	// ReadOnly opens the queues for reading only, for offline readers that may run while an
	// engine writes the same directory: files are mapped read-only, nothing is ever created,
	// truncated, zeroed or flushed, and each queue's end is found by a scan that changes
	// nothing (see Store.Refresh). The writer-side operations fail with ErrReadOnly.
	ReadOnly bool
}

// config is the validated form of Options, shared by pointer by every queue of a Store so that
// a queue costs one word for it.
type config struct {
	fs          vfs.FS
	dir         string // Root/consumequeue
	fileSize    int64
	reserveStep int64
	maxMapped   int
	syncFSAbove int
	readOnly    bool
	// dirSyncs takes the directory syncs of new queues and files (nil when read-only), run by
	// FlushAll before the checkpoint that relies on them.
	dirSyncs *segment.DirSyncs
}

func (o Options) config() (*config, error) {
	c := &config{fs: o.FS, maxMapped: o.MaxMapped, syncFSAbove: o.SyncFSAbove, readOnly: o.ReadOnly}
	if c.syncFSAbove == 0 {
		c.syncFSAbove = DefaultSyncFSAbove
	}
	if c.fs == nil {
		c.fs = vfs.Default
	}
	if o.Root == "" {
		return nil, errors.New("consumequeue: no root directory")
	}
	c.dir = filepath.Join(o.Root, "consumequeue")
	units := o.UnitsPerFile
	if units == 0 {
		units = DefaultUnitsPerFile
	}
	if units < 1 || units > (1<<31-1)/UnitSize {
		return nil, fmt.Errorf("consumequeue: %d units per file", o.UnitsPerFile)
	}
	c.fileSize = int64(units) * UnitSize
	switch step := o.ReserveUnits; {
	case step == 0:
		c.reserveStep = DefaultReserveUnits * UnitSize
	case step > 0:
		c.reserveStep = int64(step) * UnitSize
	}
	c.reserveStep = min(c.reserveStep, c.fileSize)
	if c.maxMapped == 0 {
		c.maxMapped = DefaultMaxMapped()
	}
	if c.readOnly {
		c.fs = readOnlyFS{ReadOnlyFS: vfs.ReadOnlyFS{FS: c.fs, Err: ErrReadOnly}}
	}
	return c, nil
}
