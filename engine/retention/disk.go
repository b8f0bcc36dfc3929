package retention

import (
	"errors"
	"fmt"
	"math/bits"
	"syscall"
	"time"

	"github.com/rocketstore/engine/internal/vfs"
)

// ErrDiskFull is wrapped by the error writes get while the disk is too full to take them. It
// wraps syscall.ENOSPC.
var ErrDiskFull = fmt.Errorf("engine: disk full: %w", syscall.ENOSPC)

// DiskFullError is the error of every write refused because the store's disk use is above
// Settings.DiskWarningRatio. errors.Is(err, ErrDiskFull) and errors.Is(err, syscall.ENOSPC)
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

// recheckRefused is how often, at most, a refusing gate measures the disk again.
const recheckRefused = time.Second

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
func (r *Stage) measure() (int, error) {
	pct := -1
	var errs []error
	for _, dir := range r.cfg.Dirs {
		u, err := r.cfg.Usage(dir)
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

// CheckDisk measures the disk and refuses or admits writes accordingly; it returns the use in
// percent (-1: unknown). An unknown use admits writes, as RocketMQ does (a full disk still
// fails each new segment with ENOSPC).
func (r *Stage) CheckDisk(now time.Time) int {
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
func (r *Stage) kick() {
	select {
	case r.urgent <- struct{}{}:
	default:
	}
}

// Admit is the appender's Gate (appender.Gate): nil while writes are taken; the no-space
// refusal while dispatch waits for space (NoSpace); the *DiskFullError while the disk is above
// its limit. It costs two atomic loads unless writes are refused; then it measures the disk
// again when the last check is a second old, so that writes resume promptly.
func (r *Stage) Admit() error {
	if p := r.noSpace.Load(); p != nil {
		return *p
	}
	ref := r.refusal.Load()
	if ref == nil {
		return nil
	}
	now := r.cfg.Now()
	if now.UnixNano()-r.checkedAt.Load() >= int64(recheckRefused) {
		r.CheckDisk(now)
		if ref = r.refusal.Load(); ref == nil {
			return nil
		}
	}
	return ref
}

// LogFull is the appender's hook (appender.Gate): the CommitLog could not make a new segment
// for want of space. The disk may have filled since it was last measured (every CleanInterval,
// or by a quota df does not show): a pass runs now, which measures it again and makes room.
func (r *Stage) LogFull(err error) {
	now, last := r.cfg.Now().UnixNano(), r.fullLoggedAt.Load()
	if now-last >= int64(logFullEvery) && r.fullLoggedAt.CompareAndSwap(last, now) {
		r.log.Error().Err(err).Int64("more", r.fullHeld.Swap(0)).
			Msg("no disk space for a new commitlog segment: the record is refused (507); a retention pass runs now")
	} else {
		r.fullHeld.Add(1)
	}
	r.kick()
}

// logFullEvery is how often LogFull logs at most.
const logFullEvery = 10 * time.Second

// NoSpace is the dispatcher's hook (dispatch.Dispatcher's NoSpace): err while dispatch cannot
// build for want of disk space (the CommitLog had room for a record, but its ConsumeQueue or
// the IndexFile cannot grow), nil once it goes on. While it is stalled new messages get ENOSPC
// (reply code 507) at once, rather than piling up behind it until back-pressure blocks every
// publisher; when it starts, a pass runs to make room, and when it ends, the disk is measured
// again.
func (r *Stage) NoSpace(err error) {
	if err == nil {
		if r.noSpace.Swap(nil) != nil {
			r.dispatchLog.Info().Msg("disk space is back: dispatch goes on and writes resume")
			r.CheckDisk(r.cfg.Now())
		}
		return
	}
	refusal := fmt.Errorf("engine: no disk space to grow the ConsumeQueue or the index (%w); writes resume once space is freed", err)
	if r.noSpace.Swap(&refusal) == nil {
		r.dispatchLog.Error().Err(err).Msg("no disk space for dispatch: refusing writes, retrying until space is freed")
		r.kick()
	}
}
