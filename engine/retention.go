package engine

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/rocketstore/engine/engine/retention"
)

// Retention and the disk-full guard are the stage of engine/retention; these are its types
// under the names the engine's API has always used.
type (
	// Retention are the retention settings that can change while the engine runs.
	Retention = retention.Settings
	// RetentionResult is what a retention pass (or DeleteExpired) did.
	RetentionResult = retention.Result
	// DeletedSegment is a CommitLog segment retention deleted.
	DeletedSegment = retention.DeletedSegment
	// DiskFullError is the error of every write refused for a full disk.
	DiskFullError = retention.DiskFullError
)

// ErrDiskFull is wrapped by the error writes get while the disk is too full (ENOSPC).
var ErrDiskFull = retention.ErrDiskFull

// Retention returns the retention settings of o, as given (zero values are not filled in).
func (o Options) Retention() Retention {
	return Retention{
		FileReservedTime: o.FileReservedTime, DeleteWhen: o.DeleteWhen, CleanInterval: o.CleanInterval,
		DiskMaxUsedRatio: o.DiskMaxUsedRatio, DiskCleanForciblyRatio: o.DiskCleanForciblyRatio,
		DiskWarningRatio: o.DiskWarningRatio, DeleteFilesPerPass: o.DeleteFilesPerPass, NoRetention: o.NoRetention,
	}
}

// setRetention copies r into o.
func (o *Options) setRetention(r Retention) {
	o.FileReservedTime, o.DeleteWhen, o.CleanInterval = r.FileReservedTime, r.DeleteWhen, r.CleanInterval
	o.DiskMaxUsedRatio, o.DiskCleanForciblyRatio, o.DiskWarningRatio = r.DiskMaxUsedRatio, r.DiskCleanForciblyRatio, r.DiskWarningRatio
	o.DeleteFilesPerPass, o.NoRetention = r.DeleteFilesPerPass, r.NoRetention
}

// newRetention makes the retention stage over the open stores and the watermarks.
func (e *Engine) newRetention() (err error) {
	o := e.opts
	cfg := retention.Config{
		Settings: o.Retention(), FirstDelay: o.CleanFirstDelay,
		Dirs:  []string{filepath.Join(o.Dir, "commitlog"), filepath.Join(o.Dir, "consumequeue")},
		Usage: o.FS.DiskUsage, Now: o.Now, Logger: o.Logger,
		Log: e.log, ConsumeQueues: e.cq, Written: e.written, Durable: e.durable, Dispatched: e.dispatched,
	}
	if e.index != nil {
		cfg.Index = e.index
	}
	e.retention, err = retention.New(cfg)
	return err
}

// Retention returns the retention settings in force, with the defaults filled in and the ratios
// clamped.
func (e *Engine) Retention() Retention { return e.retention.Settings() }

// SetRetention changes the retention settings while the engine runs; it is safe to call from
// any goroutine. Zero values mean the defaults, as in Options. The next retention pass uses the
// new settings (a new CleanInterval from the next tick on); the disk is measured again at once,
// so that a new DiskWarningRatio refuses or admits writes right away. An invalid r changes
// nothing and returns the error.
func (e *Engine) SetRetention(r Retention) error { return e.retention.SetSettings(r) }

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
	return e.retention.DeleteExpired(ctx)
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
	return e.retention.Admit()
}

// retentionStats fills the disk and retention fields of st.
func (e *Engine) retentionStats(st *Stats) {
	r := e.retention.Stats()
	st.DiskUsedRatio, st.RefusingWrites, st.MinOffset = r.DiskUsedRatio, r.RefusingWrites, e.log.MinOffset()
	st.SegmentsDeleted, st.BytesDeleted = r.SegmentsDeleted, r.BytesDeleted
	st.ConsumeQueueFilesDeleted, st.IndexFilesDeleted = r.ConsumeQueueFilesDeleted, r.IndexFilesDeleted
}
