// Package retention is the retention stage and the disk guard (STORE-FORMAT §10: RocketMQ's
// CleanCommitLogService and CleanConsumeQueueService). It owns what the store deletes and when,
// and whether writes are taken: the appender's Gate is a *Stage (Admit), and so is dispatch's
// no-space hook (NoSpace). It declares what it needs of the stores (Log, ConsumeQueues, Index).
//
// Every CleanInterval, once the first delay has passed, a pass measures the disk use of the
// store's file system (the CommitLog and ConsumeQueue directories, the higher of the two, as a
// percentage rounded up like RocketMQ's UtilAll.getDiskPartitionSpaceUsedPercent) and then:
//
//   - deletes CommitLog segments, oldest first, when the local hour is one of DeleteWhen, or the
//     use is above DiskMaxUsedRatio (or unknown), or on a manual DeleteExpired. A segment goes
//     when its file mtime + FileReservedTime has passed, or, when the use is above
//     DiskCleanForciblyRatio, whatever its age (RocketMQ's cleanImmediately). The pass stops at
//     the first segment kept and deletes at most DeleteFilesPerPass; the segment being written
//     is never deleted;
//   - then, when the CommitLog's min offset went up, deletes the ConsumeQueue files and
//     IndexFiles that lie wholly below it and corrects every queue's min offset, so that reads
//     of deleted offsets answer OffsetTooSmall with the new min.
//
// Above DiskWarningRatio the engine refuses writes: Admit fails every batch with a
// *DiskFullError (it wraps ErrDiskFull and so syscall.ENOSPC: ingress replies 507), nothing is
// written, and the engine's Ready reports it. Admit only reads atomic pointers; while writes are
// refused it measures the disk again at most once a second (store clock), so writes resume
// within a second of space coming back rather than at the next pass.
//
// Deliberate differences from RocketMQ:
//   - Only segments wholly below the durable offset, the dispatched offset and the dispatched
//     offset of the last checkpoint are deleted: the flusher and dispatch never lose a byte they
//     still need, and every ConsumeQueue unit and index entry of a deleted record is on disk,
//     so recovery after a crash never has to rebuild one from a deleted record (it would lose
//     queue offsets). RocketMQ spares only the last file; with 1 GiB segments, 72 hours and a
//     checkpoint every 60 s the difference shows only when disk pressure forces cleaning.
//   - There is no 100 ms pause between the deletions of one pass (deleteCommitLogFilesInterval)
//     and no forced destroy after 120 s: a deleted segment is unlinked at once and unmapped when
//     its last reader releases it (segment reference counts), so nothing hangs.
//   - Writes resume as soon as the use is at or below DiskWarningRatio; RocketMQ marks the disk
//     OK again only at or below DiskCleanForciblyRatio.
//   - A manual DeleteExpired runs its passes at once (until one deletes nothing, at most 20)
//     instead of letting the next 20 scheduled passes ignore DeleteWhen.
package retention

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketstore/engine/internal/store/checkpoint"
	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/internal/vfs"
	"github.com/rocketstore/engine/stages"
)

// Log is what retention needs of the CommitLog (commitlog.Log implements it).
type Log interface {
	// DeleteFirst deletes at most n segments from the start, wholly below limit, while del
	// says so.
	DeleteFirst(n int, limit int64, del func(commitlog.Segment) bool) ([]commitlog.Segment, error)
	MinOffset() int64
}

// ConsumeQueues deletes the ConsumeQueue files below a CommitLog offset
// (consumequeue.Store implements it).
type ConsumeQueues interface {
	DeleteExpiredAll(minCommitLogOffset int64) (int, error)
}

// Index deletes the IndexFiles below a CommitLog offset (indexfile.Service implements it).
type Index interface {
	DeleteExpired(minPhyOffset int64) ([]string, error)
}

// Config wires a Stage.
type Config struct {
	// Settings are the settings at the start (Stage.SetSettings changes them).
	Settings Settings
	// FirstDelay is how long after the start the first pass runs (CleanFirstDelay); before it,
	// the ticks only measure the disk.
	FirstDelay time.Duration
	// Dirs are measured for disk use, with Usage (vfs.FS.DiskUsage).
	Dirs  []string
	Usage func(dir string) (vfs.Usage, error)
	// Now is the store clock: file ages, the hour, the refusal's recheck.
	Now    func() time.Time
	Logger zerolog.Logger

	Log           Log
	ConsumeQueues ConsumeQueues
	Index         Index // nil without an IndexFile
	// Written ends the stage when it freezes (the writer stopped); Durable and Dispatched bound
	// what a pass deletes.
	Written, Durable, Dispatched *stages.Watermark
}

// manualRounds is how many passes a manual delete runs at most (RocketMQ's
// manualDeleteFileSeveralTimes).
const manualRounds = 20

// Stage is the retention stage and the disk guard.
type Stage struct {
	cfg              Config
	log, dispatchLog zerolog.Logger

	// settings are the settings in force: SetSettings swaps them while the engine runs; each
	// pass and disk check reads one snapshot.
	settings atomic.Pointer[compiled]

	// safe is the dispatched offset of the last checkpoint written: every ConsumeQueue unit and
	// index entry below it is on disk, so recovery never needs a record below it again.
	safe atomic.Int64

	// mu makes passes one at a time (the stage and manual deletes); lastMin is the CommitLog
	// min offset the derived files were last cleaned for.
	mu      sync.Mutex
	lastMin int64

	// diskMu orders disk checks, so that each change of state is logged once.
	diskMu    sync.Mutex
	usedPct   atomic.Int64                  // last measured, -1 unknown
	checkedAt atomic.Int64                  // store clock of the last check, unix ns
	refusal   atomic.Pointer[DiskFullError] // non-nil while writes are refused
	// noSpace is the refusal while dispatch waits for disk space (NoSpace), nil otherwise.
	noSpace atomic.Pointer[error]
	// urgent asks the stage for a pass now, whatever the first delay and CleanInterval say:
	// writes were just refused for a full disk (capacity 1: one pending request is enough).
	urgent chan struct{}
	// fullLoggedAt is when LogFull last logged (store clock, unix ns); fullHeld counts the
	// refusals since, so that a full disk is one line per logFullEvery, not one per record.
	fullLoggedAt, fullHeld atomic.Int64

	segments, bytes, cqFiles, indexFiles atomic.Int64
}

// New checks the settings and makes the stage; Run starts it.
func New(cfg Config) (*Stage, error) {
	r := &Stage{
		cfg:         cfg,
		log:         cfg.Logger.With().Str("stage", "retention").Logger(),
		dispatchLog: cfg.Logger.With().Str("stage", "dispatch").Logger(),
		urgent:      make(chan struct{}, 1),
	}
	s, err := compile(cfg.Settings)
	if err != nil {
		return nil, err
	}
	r.settings.Store(s)
	r.usedPct.Store(-1)
	return r, nil
}

// Settings returns the settings in force, with the defaults filled in and the ratios clamped.
func (r *Stage) Settings() Settings { return r.settings.Load().Settings }

// SetSettings changes the settings while the stage runs; it is safe to call from any
// goroutine. The next pass uses them (a new CleanInterval from the next tick on); the disk is
// measured again at once, so that a new DiskWarningRatio refuses or admits writes right away.
// Invalid settings change nothing and return the error.
func (r *Stage) SetSettings(set Settings) error {
	s, err := compile(set)
	if err != nil {
		return err
	}
	r.settings.Store(s)
	r.CheckDisk(r.cfg.Now())
	return nil
}

// Checkpointed is the checkpointer's Saved hook: passes delete only below the last checkpoint.
func (r *Stage) Checkpointed(cp checkpoint.Checkpoint) {
	if cp.Ext.Valid {
		r.safe.Store(cp.Ext.DispatchedOffset)
	}
}

// Run is the stage: a pass every CleanInterval once the first delay has passed, a disk check
// on the ticks before, and a pass at once whenever writes start being refused for a full disk.
// It stops when the writer does (the engine is closing). CleanInterval is read at each tick,
// so that SetSettings changes it from the next tick on.
func (r *Stage) Run(ctx context.Context) error {
	done := r.cfg.Written.WaitChan(math.MaxInt64)
	start := time.Now()
	first := start.Add(r.cfg.FirstDelay)
	timer := time.NewTimer(min(r.settings.Load().CleanInterval, r.cfg.FirstDelay))
	defer timer.Stop()
	for {
		select {
		case <-timer.C:
			next := r.settings.Load().CleanInterval
			if now := time.Now(); now.Before(first) {
				r.CheckDisk(r.cfg.Now())
				next = min(next, first.Sub(now))
			} else if _, err := r.pass(r.cfg.Now(), false); err != nil {
				r.log.Warn().Err(err).Msg("retention pass failed; the next one retries")
			}
			timer.Reset(next)
		case <-r.urgent:
			if _, err := r.pass(r.cfg.Now(), false); err != nil {
				r.log.Warn().Err(err).Msg("retention pass for a full disk failed; the next one retries")
			}
		case <-done:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Result is what a retention pass (or a manual DeleteExpired) did.
type Result struct {
	// Segments are the CommitLog segments deleted, oldest first.
	Segments []DeletedSegment
	// ConsumeQueueFiles and IndexFiles were deleted because they lay wholly below the new min
	// offset (IndexFiles by name).
	ConsumeQueueFiles int
	IndexFiles        []string
	// MinOffset is the CommitLog's first offset afterwards.
	MinOffset int64
	// DiskUsedRatio is the disk use the pass measured before deleting (-1: unknown).
	DiskUsedRatio float64
}

// Bytes is the size of the segments deleted.
func (r Result) Bytes() int64 {
	var n int64
	for _, s := range r.Segments {
		n += s.Bytes
	}
	return n
}

// DeletedSegment is a CommitLog segment retention deleted.
type DeletedSegment struct {
	// Name is the file name: the segment's base offset in 20 digits.
	Name    string
	Bytes   int64
	ModTime time.Time
	// Reason says which rule deleted it.
	Reason string
}

// Pass runs one scheduled pass at now, as the stage's ticks do.
func (r *Stage) Pass(now time.Time) (Result, error) { return r.pass(now, false) }

// DeleteExpired deletes expired CommitLog segments now, whatever the hour (RocketMQ's manual
// delete, executeDeleteFilesManually), with the ConsumeQueue and index files below the new
// start. It runs passes until one deletes nothing (at most 20, each of at most
// DeleteFilesPerPass segments) and returns what they did together. Above
// DiskCleanForciblyRatio the oldest segments go whatever their age, as in scheduled passes.
func (r *Stage) DeleteExpired(ctx context.Context) (Result, error) {
	var total Result
	for i := range manualRounds {
		if err := ctx.Err(); err != nil {
			return total, err
		}
		res, err := r.pass(r.cfg.Now(), true)
		total.Segments = append(total.Segments, res.Segments...)
		total.ConsumeQueueFiles += res.ConsumeQueueFiles
		total.IndexFiles = append(total.IndexFiles, res.IndexFiles...)
		total.MinOffset = res.MinOffset
		if i == 0 {
			total.DiskUsedRatio = res.DiskUsedRatio
		}
		if err != nil || len(res.Segments) == 0 {
			return total, err
		}
	}
	return total, nil
}

// pass is one retention pass at now; manual passes ignore DeleteWhen and NoRetention.
func (r *Stage) pass(now time.Time, manual bool) (Result, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, set := r.cfg, r.settings.Load()
	pct := r.CheckDisk(now)
	res := Result{DiskUsedRatio: float64(pct) / 100}
	if pct < 0 {
		res.DiskUsedRatio = -1
	}
	hour := now.In(time.Local).Hour()
	timeUp := set.hours[hour]
	spaceFull := pct < 0 || pct > set.maxUsed
	cleanNow := pct > set.forcibly // also above the refusal limit
	var why string
	switch {
	case cleanNow:
		why = fmt.Sprintf("disk use %d%% is above %d%%: oldest first, whatever the age", pct, set.forcibly)
	case manual:
		why = "expired (manual delete)"
	case timeUp:
		why = fmt.Sprintf("expired (deletion hour %02d)", hour)
	case pct < 0:
		why = "expired (disk use unknown: any hour)"
	default:
		why = fmt.Sprintf("expired (disk use %d%% is above %d%%: any hour)", pct, set.maxUsed)
	}

	var errs []error
	if manual || (!set.NoRetention && (timeUp || spaceFull)) {
		limit := min(c.Durable.Load(), c.Dispatched.Load(), r.safe.Load())
		segs, err := c.Log.DeleteFirst(set.DeleteFilesPerPass, limit, func(s commitlog.Segment) bool {
			return cleanNow || !now.Before(s.ModTime.Add(set.FileReservedTime))
		})
		errs = append(errs, err)
		for _, s := range segs {
			d := DeletedSegment{Name: filepath.Base(s.Name), Bytes: s.Size, ModTime: s.ModTime, Reason: why}
			res.Segments = append(res.Segments, d)
			r.log.Info().Str("segment", d.Name).Int64("bytes", d.Bytes).Time("mtime", d.ModTime).
				Dur("age", now.Sub(d.ModTime)).Str("reason", why).Msg("deleted commitlog segment")
		}
		r.segments.Add(int64(len(segs)))
		r.bytes.Add(res.Bytes())
		if cleanNow && len(segs) == 0 && err == nil {
			r.log.Warn().Int("disk_used_pct", pct).Int64("min_offset", c.Log.MinOffset()).Int64("below", limit).
				Msg("disk space will be full soon, but no commitlog segment can be deleted: only the one being written, or ones not yet flushed, dispatched and checkpointed, are left")
		}
	}
	res.MinOffset = c.Log.MinOffset()

	// CleanConsumeQueueService: the derived files follow the CommitLog's new start.
	if start := res.MinOffset; start > r.lastMin {
		n, err := c.ConsumeQueues.DeleteExpiredAll(start)
		res.ConsumeQueueFiles = n
		errs = append(errs, err)
		if c.Index != nil {
			names, ierr := c.Index.DeleteExpired(start)
			for _, name := range names {
				res.IndexFiles = append(res.IndexFiles, filepath.Base(name))
			}
			errs = append(errs, ierr)
			err = errors.Join(err, ierr)
		}
		r.cqFiles.Add(int64(n))
		r.indexFiles.Add(int64(len(res.IndexFiles)))
		if err == nil {
			r.lastMin = start // after an error the next pass tries again
		}
	}

	err := errors.Join(errs...)
	if n := len(res.Segments); n > 0 || res.ConsumeQueueFiles > 0 || len(res.IndexFiles) > 0 {
		r.log.Info().Int("segments", n).Int64("bytes", res.Bytes()).Int("consumequeue_files", res.ConsumeQueueFiles).
			Strs("index_files", res.IndexFiles).Int64("min_offset", res.MinOffset).Int("disk_used_pct", pct).
			Str("reason", why).Err(err).Msg("retention deleted files")
		if n > 0 && pct >= 0 {
			r.CheckDisk(now) // space came back: writes may resume now
		}
	}
	return res, err
}

// Stats are retention's counters and the disk's state.
type Stats struct {
	// DiskUsedRatio is the use at the last check (-1: unknown); RefusingWrites is set while
	// Admit refuses (a full disk, or dispatch waiting for space).
	DiskUsedRatio  float64
	RefusingWrites bool
	// What the passes deleted so far.
	SegmentsDeleted, BytesDeleted               int64
	ConsumeQueueFilesDeleted, IndexFilesDeleted int64
}

// Stats returns the counters.
func (r *Stage) Stats() Stats {
	st := Stats{
		DiskUsedRatio:            float64(r.usedPct.Load()) / 100,
		RefusingWrites:           r.refusal.Load() != nil || r.noSpace.Load() != nil,
		SegmentsDeleted:          r.segments.Load(),
		BytesDeleted:             r.bytes.Load(),
		ConsumeQueueFilesDeleted: r.cqFiles.Load(),
		IndexFilesDeleted:        r.indexFiles.Load(),
	}
	if st.DiskUsedRatio < 0 {
		st.DiskUsedRatio = -1
	}
	return st
}
