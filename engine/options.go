package engine

import (
	"cmp"
	"fmt"
	"math"
	"net/netip"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketstore/engine/flushers"
	"github.com/rocketstore/engine/internal/vfs"
)

// FlushMode is what an ack promises.
type FlushMode int

const (
	// FlushSync (the default): an ack means the record is on disk. Group commit: one sync
	// releases every waiter at or below it. Dispatch follows the durable offset, so consumers
	// never see a record that a crash could take back.
	FlushSync FlushMode = iota
	// FlushAsync: an ack means the record is in the OS page cache (it survives a crash of the
	// process, not of the machine). The log is synced on RocketMQ's schedule; dispatch follows
	// the written offset.
	FlushAsync
)

func (m FlushMode) String() string {
	if m == FlushAsync {
		return "async"
	}
	return "sync"
}

// Options configure an Engine. The zero value of every field means its default (RocketMQ's
// where RocketMQ has one); Dir is required.
type Options struct {
	// Dir is the store directory (RocketMQ's storePathRootDir).
	Dir string
	// FS is the file system (vfs.Default); tests pass vfs.Mem or vfs.Faulty.
	FS     vfs.FS
	Logger zerolog.Logger

	FlushMode FlushMode

	// File sizes: CommitLog segments (1 GiB), ConsumeQueue files in units of 20 bytes
	// (300,000), IndexFile slots and entries (5,000,000 and 20,000,000).
	CommitLogFileSize int64
	ConsumeQueueUnits int
	IndexSlots        int
	IndexEntries      int
	// NoIndex turns the IndexFile off (RocketMQ's messageIndexEnable=false).
	NoIndex bool
	// NoPropCRC turns off the whole-record __CRC32# property that protects every header field
	// (RocketMQ's enabledAppendPropCRC, which this engine turns on by default).
	NoPropCRC bool
	// MaxBodySize bounds a message body (RocketMQ's maxMessageSize, 4 MiB).
	MaxBodySize int
	// MmapWrites has the writer copy each record into the CommitLog's mapping, as RocketMQ
	// does by default, instead of gathering an append round and writing it with one pwrite.
	// The mapping costs a write fault per new page (ext4's page_mkwrite included), taken ahead
	// by the allocator when prefaulting is on; pwrite fills the page cache without them.
	MmapWrites bool
	// NoPrefault leaves the page faults of a new CommitLog segment to the writer (prefaulting
	// off the writer makes copies into it about five times faster). Only with MmapWrites.
	NoPrefault bool
	// StoreHost is the address written into records and message ids (127.0.0.1:10911).
	StoreHost netip.AddrPort

	// Queue bounds. AppendInbox: batches waiting for the writer (256); a full inbox blocks
	// ingress. AckQueue: appended batches waiting for their acks (1024); it bounds how far the
	// writer runs ahead of acks. MaxAppendBatch: batches the writer takes per round (64).
	// MaxDispatchLag: bytes the writer may run ahead of dispatch (256 MiB).
	AppendInbox    int
	AckQueue       int
	MaxAppendBatch int
	MaxDispatchLag int64
	// CommitLogCache is how many bytes of the CommitLog below its durable and dispatched head
	// stay in the page cache (flushers.DefaultCacheWindow; negative: all, the kernel's choice).
	CommitLogCache int64
	// DispatchStopTimeout bounds how long Close lets dispatch go on with what it has not
	// dispatched yet (5 s; negative: until it is all dispatched). Past it dispatch stops at the
	// next record and the next start dispatches the rest from the checkpoint, so that a stop
	// with a large backlog (many new topics, each its files to create) ends within a service
	// manager's stop timeout.
	DispatchStopTimeout time.Duration

	// Dedupe window for publisher message ids (2 minutes, at most 500,000 ids in memory); a
	// negative DedupeMax turns dedupe off. Ids past DedupeMax are looked up in the IndexFile for
	// the rest of their window (without one, NoIndex, they are forgotten).
	DedupeWindow time.Duration
	DedupeMax    int
	// forgetPastDedupeMax makes the window forget ids past DedupeMax even with an IndexFile, as
	// it did before it looked them up: the benchmarks' reference.
	forgetPastDedupeMax bool

	// Async CommitLog flush: RocketMQ's 500 ms, 4 pages, thorough every 10 s.
	FlushInterval         time.Duration
	FlushLeastPages       int
	FlushThoroughInterval time.Duration
	// ConsumeQueue flush and checkpoint: 1 s, 2 pages, thorough (and checkpoint) every 60 s.
	CQFlushInterval         time.Duration
	CQFlushLeastPages       int
	CQFlushThoroughInterval time.Duration
	// SlowSync is the sync time above which a warning is logged (1 s).
	SlowSync time.Duration
	// OffsetPersistInterval is how often the consumer offsets journal is fsynced in async flush
	// mode (RocketMQ flushes its offsets every 5 s); in sync mode every commit is fsynced before
	// it is answered. MaxGroups bounds the consumer groups whose offsets the store keeps
	// (offsets.DefaultMaxGroups; -1: no bound).
	OffsetPersistInterval time.Duration
	MaxGroups             int

	// Retention (RocketMQ's CleanCommitLogService, STORE-FORMAT §10; see engine/retention). Every
	// CleanInterval (10 s; the first pass after CleanFirstDelay, 60 s) a pass deletes the oldest
	// CommitLog segments whose file mtime is older than FileReservedTime (72 h), only at the
	// local hours of DeleteWhen ("04"; ';'-separated, e.g. "04;16") unless disk use is above
	// DiskMaxUsedRatio (0.75; then at any hour); above DiskCleanForciblyRatio (0.85) it deletes
	// the oldest segments whatever their age. At most DeleteFilesPerPass (10) segments go per
	// pass, never the one being written. Above DiskWarningRatio (0.90) writes are refused with
	// a *DiskFullError (errors.Is ENOSPC: ingress replies 507) until use falls back to it.
	// Ratios are fractions of the file system (used / (used + available)), compared with the
	// use rounded up to whole percent, and clamped like RocketMQ's: DiskMaxUsedRatio to
	// [0.10, 0.95], DiskCleanForciblyRatio to [0.30, 0.85], DiskWarningRatio to [0.35, 0.90].
	FileReservedTime       time.Duration
	DeleteWhen             string
	CleanInterval          time.Duration
	CleanFirstDelay        time.Duration
	DiskMaxUsedRatio       float64
	DiskCleanForciblyRatio float64
	DiskWarningRatio       float64
	DeleteFilesPerPass     int
	// NoRetention turns scheduled deletion off: files are kept whatever their age and the
	// disk use. Writes are still refused above DiskWarningRatio, and Engine.DeleteExpired
	// still deletes expired segments when asked.
	NoRetention bool

	// Now is the store clock (time.Now). Retention reads it for file ages and the hour.
	Now func() time.Time
}

func (o Options) withDefaults() Options {
	if o.FS == nil {
		o.FS = vfs.Default
	}
	if o.CommitLogFileSize == 0 {
		o.CommitLogFileSize = 1 << 30
	}
	if o.MaxBodySize == 0 {
		o.MaxBodySize = 4 << 20
	}
	if !o.StoreHost.IsValid() {
		o.StoreHost = defaultStoreHost
	}
	o.AppendInbox, o.AckQueue, o.MaxAppendBatch = cmp.Or(o.AppendInbox, 256), cmp.Or(o.AckQueue, 1024), cmp.Or(o.MaxAppendBatch, 64)
	o.MaxDispatchLag = cmp.Or(o.MaxDispatchLag, 256<<20)
	o.CommitLogCache = cmp.Or(o.CommitLogCache, flushers.DefaultCacheWindow)
	if o.DispatchStopTimeout == 0 {
		o.DispatchStopTimeout = DefaultDispatchStopTimeout
	}
	if o.DedupeWindow == 0 {
		o.DedupeWindow = 2 * time.Minute
	}
	if o.DedupeMax == 0 {
		o.DedupeMax = 500_000
	}
	if o.OffsetPersistInterval == 0 {
		o.OffsetPersistInterval = 5 * time.Second
	}
	if o.SlowSync == 0 {
		o.SlowSync = time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	o.setRetention(o.Retention().WithDefaults()) // retention.go
	o.CleanFirstDelay = cmp.Or(o.CleanFirstDelay, time.Minute)
	return o
}

// check refuses sizes that do not fit the 32-bit fields they end up in (RocketMQ's Java ints: a
// segment's size and write position, the IndexFile header's counts, NATS's max payload): cut to
// 32 bits, they would wrap into other sizes, or into the defaults.
func (o Options) check() error {
	for _, f := range []struct {
		name string
		v    int64
		max  int64
	}{
		{"CommitLogFileSize", o.CommitLogFileSize, math.MaxInt32},
		{"IndexSlots", int64(o.IndexSlots), math.MaxInt32},
		{"IndexEntries", int64(o.IndexEntries), math.MaxInt32},
		{"MaxBodySize", int64(o.MaxBodySize), math.MaxInt32 - payloadHeadroom},
	} {
		if f.v < 0 || f.v > f.max {
			return fmt.Errorf("engine: Options.%s %d: want 0 (the default) to %d", f.name, f.v, f.max)
		}
	}
	return nil
}

// defaultStoreHost is Options.StoreHost's default.
var defaultStoreHost = netip.MustParseAddrPort("127.0.0.1:10911")

// DefaultDispatchStopTimeout is Options.DispatchStopTimeout's default: with the drains before it
// and the last checkpoint after it, a stop stays well under 10 s.
const DefaultDispatchStopTimeout = 5 * time.Second

// DefaultMemoryLimit is the memory budget of an engine's whole process (`engine run
// --memory-limit`): the Go runtime's soft limit, under which the collector keeps the heap, the
// stacks and the runtime's own memory. The default pending limits (ingress.DefaultPendingMsgs,
// DefaultPendingBytes) are sized to fit in it with the rest of the pipeline (docs/CONFIG.md,
// "Memory").
const DefaultMemoryLimit = 256 << 20
