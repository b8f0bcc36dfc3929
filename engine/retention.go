package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	appender "github.com/rocketstore/engine/append"
	"github.com/rocketstore/engine/internal/store/checkpoint"
	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/internal/store/consumequeue"
	"github.com/rocketstore/engine/internal/vfs"
)

// Retention and the disk-full guard (STORE-FORMAT §10: RocketMQ's CleanCommitLogService and
// CleanConsumeQueueService).
//
// Every CleanInterval, once CleanFirstDelay has passed, a pass measures the disk use of the
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
// Above DiskWarningRatio the engine refuses writes: the appender's Gate fails every batch with
// a *DiskFullError (it wraps ErrDiskFull and so syscall.ENOSPC: ingress replies 507), nothing
// is written, and Ready reports it. The gate only reads an atomic pointer; while writes are
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

// ErrDiskFull is wrapped by the error writes get while the disk is too full to take them. It
// wraps syscall.ENOSPC.
var ErrDiskFull = fmt.Errorf("engine: disk full: %w", syscall.ENOSPC)

// DiskFullError is the error of every write refused because the store's disk use is above
// Options.DiskWarningRatio. errors.Is(err, ErrDiskFull) and errors.Is(err, syscall.ENOSPC)
// hold for it.
type DiskFullError struct {
	// UsedPercent is the disk use measured, LimitPercent the DiskWarningRatio, in percent.
	UsedPercent, LimitPercent int
}

func (e *DiskFullError) Error() string {
	return fmt.Sprintf("engine: disk use %d%% is above the %d%% limit; writes resume below it", e.UsedPercent, e.LimitPercent)
}

// Unwrap returns ErrDiskFull.
func (e *DiskFullError) Unwrap() error { return ErrDiskFull }

// RetentionResult is what a retention pass (or a manual DeleteExpired) did.
type RetentionResult struct {
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
func (r RetentionResult) Bytes() int64 {
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

// recheckRefused is how often, at most, a refusing gate measures the disk again.
const recheckRefused = time.Second

// manualRounds is how many passes a manual delete runs at most (RocketMQ's
// manualDeleteFileSeveralTimes).
const manualRounds = 20

// retention is the retention stage and the disk guard.
type retention struct {
	e   *Engine
	log zerolog.Logger

	// settings are the retention settings in force (retentionsettings.go): SetRetention swaps
	// them while the engine runs; each pass and disk check reads one snapshot.
	settings atomic.Pointer[retentionSettings]
	dirs     []string // measured for disk use

	// usage reads the disk use of one directory (FS.DiskUsage; tests replace it).
	usage func(dir string) (vfs.Usage, error)

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
	// urgent asks the stage for a pass now, whatever CleanFirstDelay and CleanInterval say:
	// writes were just refused for a full disk (capacity 1: one pending request is enough).
	urgent chan struct{}

	segments, bytes, cqFiles, indexFiles atomic.Int64
}

// newRetention checks the retention options; the stage starts with the engine.
func newRetention(e *Engine) (*retention, error) {
	o := e.opts
	r := &retention{
		e:      e,
		log:    o.Logger.With().Str("stage", "retention").Logger(),
		dirs:   []string{filepath.Join(o.Dir, "commitlog"), filepath.Join(o.Dir, "consumequeue")},
		usage:  o.FS.DiskUsage,
		urgent: make(chan struct{}, 1),
	}
	s, err := compileRetention(o.Retention())
	if err != nil {
		return nil, err
	}
	r.settings.Store(s)
	r.usedPct.Store(-1)
	return r, nil
}

// percent turns a ratio option into whole percent.
func percent(ratio float64) int { return int(math.Round(ratio * 100)) }

// parseHours reads DeleteWhen: hours of the day (0-23) separated by ';', as RocketMQ's
// isItTimeToDo.
func parseHours(s string) (h [24]bool, err error) {
	for part := range strings.SplitSeq(s, ";") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		n, err := strconv.Atoi(part)
		if err != nil || n < 0 || n > 23 {
			return h, fmt.Errorf("engine: DeleteWhen %q: %q is not an hour 0-23", s, part)
		}
		h[n] = true
	}
	return h, nil
}

// usedPercent is the used part of u in percent, rounded up, as RocketMQ's
// getDiskPartitionSpaceUsedPercent: used = total - free, out of used + available.
func usedPercent(u vfs.Usage) int {
	used := u.Total - min(u.Free, u.Total)
	entire := used + u.Avail
	if entire == 0 {
		return 0
	}
	hi, lo := bits.Mul64(used, 100)
	q, rem := bits.Div64(hi, lo, entire) // hi < entire: used <= entire
	if rem != 0 {
		q++
	}
	return int(q)
}

// measure is the disk use of the store in percent: the higher of its directories, -1 with the
// error when none can be read.
func (r *retention) measure() (int, error) {
	pct := -1
	var errs []error
	for _, dir := range r.dirs {
		u, err := r.usage(dir)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		pct = max(pct, usedPercent(u))
	}
	if pct < 0 {
		return -1, errors.Join(errs...)
	}
	return pct, nil
}

// checkDisk measures the disk and refuses or admits writes accordingly; it returns the use in
// percent (-1: unknown). An unknown use admits writes, as RocketMQ does (a full disk still
// fails each new segment with ENOSPC).
func (r *retention) checkDisk(now time.Time) int {
	r.diskMu.Lock()
	defer r.diskMu.Unlock()
	refuse := r.settings.Load().refuse
	pct, err := r.measure()
	r.checkedAt.Store(now.UnixNano())
	r.usedPct.Store(int64(pct))
	if err != nil {
		r.log.Warn().Err(err).Msg("cannot read the disk use")
	}
	was := r.refusal.Load()
	switch {
	case pct > refuse:
		if was == nil || was.UsedPercent != pct || was.LimitPercent != refuse {
			r.refusal.Store(&DiskFullError{UsedPercent: pct, LimitPercent: refuse})
		}
		if was == nil {
			r.log.Error().Int("disk_used_pct", pct).Int("limit_pct", refuse).
				Msgf("disk use %d%% is above the %d%% limit: refusing writes until it falls below; a retention pass runs now", pct, refuse)
			r.kick()
		}
	case was != nil:
		r.refusal.Store(nil)
		r.log.Info().Int("disk_used_pct", pct).Int("limit_pct", refuse).Msg("disk use is back under the limit: writes resume")
	}
	return pct
}

// kick asks the stage for a pass now (urgent): a full disk refuses writes, so waiting for
// CleanFirstDelay after a start, or for the next CleanInterval, would refuse them for longer
// than retention needs to make room.
func (r *retention) kick() {
	select {
	case r.urgent <- struct{}{}:
	default:
	}
}

// checkpointed is the checkpointer's Saved hook.
func (r *retention) checkpointed(cp checkpoint.Checkpoint) {
	if cp.Ext.Valid {
		r.safe.Store(cp.Ext.DispatchedOffset)
	}
}

// gate is the appender's Gate: nil while writes are taken, the *DiskFullError while they are
// refused. It costs an atomic load unless writes are refused; then it measures the disk again
// when the last check is a second old, so that writes resume promptly.
func (r *retention) gate() error {
	ref := r.refusal.Load()
	if ref == nil {
		return nil
	}
	now := r.e.opts.Now()
	if now.UnixNano()-r.checkedAt.Load() >= int64(recheckRefused) {
		r.checkDisk(now)
		if ref = r.refusal.Load(); ref == nil {
			return nil
		}
	}
	return ref
}

// run is the stage: a pass every CleanInterval once CleanFirstDelay has passed, a disk check
// on the ticks before, and a pass at once whenever writes start being refused for a full disk. It stops when the writer does (the engine is closing). CleanInterval is
// read at each tick, so that SetRetention changes it from the next tick on.
func (r *retention) run(ctx context.Context) error {
	o := r.e.opts
	done := r.e.written.WaitChan(math.MaxInt64)
	start := time.Now()
	first := start.Add(o.CleanFirstDelay)
	timer := time.NewTimer(min(r.settings.Load().CleanInterval, o.CleanFirstDelay))
	defer timer.Stop()
	for {
		select {
		case <-timer.C:
			next := r.settings.Load().CleanInterval
			if now := time.Now(); now.Before(first) {
				r.checkDisk(o.Now())
				next = min(next, first.Sub(now))
			} else if _, err := r.pass(o.Now(), false); err != nil {
				r.log.Warn().Err(err).Msg("retention pass failed; the next one retries")
			}
			timer.Reset(next)
		case <-r.urgent:
			if _, err := r.pass(o.Now(), false); err != nil {
				r.log.Warn().Err(err).Msg("retention pass for a full disk failed; the next one retries")
			}
		case <-done:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// pass is one retention pass at now; manual passes ignore DeleteWhen and NoRetention.
func (r *retention) pass(now time.Time, manual bool) (RetentionResult, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, set := r.e, r.settings.Load()
	pct := r.checkDisk(now)
	res := RetentionResult{DiskUsedRatio: float64(pct) / 100}
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
		limit := min(e.durable.Load(), e.dispatched.Load(), r.safe.Load())
		segs, err := e.log.DeleteFirst(set.DeleteFilesPerPass, limit, func(s commitlog.Segment) bool {
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
			r.log.Warn().Int("disk_used_pct", pct).Int64("min_offset", e.log.MinOffset()).Int64("below", limit).
				Msg("disk space will be full soon, but no commitlog segment can be deleted: only the one being written, or ones not yet flushed, dispatched and checkpointed, are left")
		}
	}
	res.MinOffset = e.log.MinOffset()

	// CleanConsumeQueueService: the derived files follow the CommitLog's new start.
	if start := res.MinOffset; start > r.lastMin {
		n, err := e.cq.DeleteExpiredAll(start)
		res.ConsumeQueueFiles = n
		errs = append(errs, err)
		if e.index != nil {
			names, ierr := e.index.DeleteExpired(start)
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
			r.checkDisk(now) // space came back: writes may resume now
		}
	}
	return res, err
}

// unitVerifier is recovery's check of a ConsumeQueue unit below from after an unclean exit
// (see consumequeue.TruncateUnverified): a unit must match the CommitLog record it names. A
// unit that names a record retention deleted (below the log's start) cannot be read back; it
// is kept as long as it is not where re-dispatch will build a unit anyway. Retention deletes
// only records whose units a checkpoint had flushed, so such units are on disk whole; only
// units written after the last checkpoint, for records at or past from, can be torn into
// garbage, and those sit at or past the first queue offset the records from from on take.
func (e *Engine) unitVerifier(from int64) func(*consumequeue.ConsumeQueue, int64, consumequeue.Unit) bool {
	start := e.log.MinOffset()
	var once sync.Once
	var first map[appender.QueueKey]int64 // each queue's lowest queue offset among records from from on
	return func(cq *consumequeue.ConsumeQueue, n int64, u consumequeue.Unit) bool {
		if u.Phys >= start {
			return e.unitMatchesRecord(cq, n, u)
		}
		size := e.log.FileSize()
		if !u.Valid() || u.End() > start || u.Phys%size+int64(u.Size) > size {
			return false // no record could be there
		}
		once.Do(func() {
			first = make(map[appender.QueueKey]int64)
			// The scan ends at the first invalid record: where recovery will cut the log.
			e.log.Each(max(from, start), e.log.MaxOffset(), commitlog.Check{}, func(_ int64, v commitlog.View) error {
				if tx := v.TransactionType(); tx != commitlog.TxNotType && tx != commitlog.TxCommit {
					return nil // prepared and rolled back records get no unit
				}
				k := appender.QueueKey{Topic: string(v.Topic()), QueueID: v.QueueID()}
				if q, ok := first[k]; !ok || v.QueueOffset() < q {
					first[k] = v.QueueOffset()
				}
				return nil
			})
		})
		k, ok := first[appender.QueueKey{Topic: cq.Topic(), QueueID: cq.QueueID()}]
		return !ok || n < k
	}
}

// DeleteExpired deletes expired CommitLog segments now, whatever the hour (RocketMQ's manual
// delete, executeDeleteFilesManually), with the ConsumeQueue and index files below the new
// start. It runs passes until one deletes nothing (at most 20, each of at most
// DeleteFilesPerPass segments) and returns what they did together. Above
// DiskCleanForciblyRatio the oldest segments go whatever their age, as in scheduled passes.
func (e *Engine) DeleteExpired(ctx context.Context) (RetentionResult, error) {
	release, err := e.readStart()
	if err != nil {
		return RetentionResult{}, err
	}
	defer release()
	var total RetentionResult
	for i := range manualRounds {
		if err := ctx.Err(); err != nil {
			return total, err
		}
		res, err := e.retention.pass(e.opts.Now(), true)
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

// Ready says whether the engine takes writes: nil when it does; an error wrapping ErrClosed
// once it is closing or its pipeline stopped; a *DiskFullError (ENOSPC) while the disk use is
// above DiskWarningRatio. While writes are refused it measures the disk again (at most once a
// second), so it turns ready as soon as space returns.
func (e *Engine) Ready() error {
	select {
	case <-e.group.Done():
		if err := e.group.Err(); err != nil {
			return fmt.Errorf("%w: %w", ErrClosed, err)
		}
		return ErrClosed
	default:
	}
	e.producers.RLock()
	closed := e.closed
	e.producers.RUnlock()
	if closed {
		return ErrClosed
	}
	return e.gate()
}

// retentionStats fills the disk and retention fields of st.
func (e *Engine) retentionStats(st *Stats) {
	r := e.retention
	st.DiskUsedRatio = float64(r.usedPct.Load()) / 100
	if st.DiskUsedRatio < 0 {
		st.DiskUsedRatio = -1
	}
	st.RefusingWrites = r.refusal.Load() != nil || e.noSpace.refusal() != nil
	st.MinOffset = e.log.MinOffset()
	st.SegmentsDeleted = r.segments.Load()
	st.BytesDeleted = r.bytes.Load()
	st.ConsumeQueueFilesDeleted = r.cqFiles.Load()
	st.IndexFilesDeleted = r.indexFiles.Load()
}
