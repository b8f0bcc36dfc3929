package engine

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"time"
)

// Retention are the retention settings of Options (see Options.FileReservedTime) that an engine
// can change while it runs (Engine.SetRetention): a running service reloads them on SIGHUP. As
// in Options, a zero value means the default, and the ratios are clamped to RocketMQ's bounds.
type Retention struct {
	FileReservedTime       time.Duration
	DeleteWhen             string
	CleanInterval          time.Duration
	DiskMaxUsedRatio       float64
	DiskCleanForciblyRatio float64
	DiskWarningRatio       float64
	DeleteFilesPerPass     int
	NoRetention            bool
}

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

// withDefaults fills in the defaults (RocketMQ's) and clamps the ratios like RocketMQ does.
func (r Retention) withDefaults() Retention {
	r.FileReservedTime = cmp.Or(r.FileReservedTime, 72*time.Hour)
	r.DeleteWhen = cmp.Or(r.DeleteWhen, "04")
	r.CleanInterval = cmp.Or(r.CleanInterval, 10*time.Second)
	r.DiskMaxUsedRatio = min(max(cmp.Or(r.DiskMaxUsedRatio, 0.75), 0.10), 0.95)
	r.DiskCleanForciblyRatio = min(max(cmp.Or(r.DiskCleanForciblyRatio, 0.85), 0.30), 0.85)
	r.DiskWarningRatio = min(max(cmp.Or(r.DiskWarningRatio, 0.90), 0.35), 0.90)
	r.DeleteFilesPerPass = cmp.Or(r.DeleteFilesPerPass, 10)
	return r
}

// Validate checks r: DeleteWhen lists hours 0-23 separated by ';', durations and the files per
// pass are not negative, ratios are fractions (0 to 1; 0 means the default). It does not
// complain about ratios outside RocketMQ's bounds: those are clamped.
func (r Retention) Validate() error {
	var errs []error
	if _, err := parseHours(r.DeleteWhen); err != nil {
		errs = append(errs, err)
	}
	if r.FileReservedTime < 0 {
		errs = append(errs, fmt.Errorf("engine: FileReservedTime %v is negative", r.FileReservedTime))
	}
	if r.CleanInterval < 0 {
		errs = append(errs, fmt.Errorf("engine: CleanInterval %v is negative", r.CleanInterval))
	}
	if r.DeleteFilesPerPass < 0 {
		errs = append(errs, fmt.Errorf("engine: DeleteFilesPerPass %d is negative", r.DeleteFilesPerPass))
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"DiskMaxUsedRatio", r.DiskMaxUsedRatio}, {"DiskCleanForciblyRatio", r.DiskCleanForciblyRatio}, {"DiskWarningRatio", r.DiskWarningRatio}} {
		if math.IsNaN(f.v) || f.v < 0 || f.v > 1 {
			errs = append(errs, fmt.Errorf("engine: %s %v is not a fraction between 0 and 1", f.name, f.v))
		}
	}
	return errors.Join(errs...)
}

// retentionSettings are the retention settings in force, with what the passes compute from
// them. They are immutable: SetRetention swaps the pointer, and each pass or disk check reads
// one snapshot.
type retentionSettings struct {
	Retention                 // defaults filled in
	hours                     [24]bool
	maxUsed, forcibly, refuse int // percent thresholds
}

func compileRetention(r Retention) (*retentionSettings, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	r = r.withDefaults()
	s := &retentionSettings{
		Retention: r,
		maxUsed:   percent(r.DiskMaxUsedRatio),
		forcibly:  percent(r.DiskCleanForciblyRatio),
		refuse:    percent(r.DiskWarningRatio),
	}
	var err error
	s.hours, err = parseHours(r.DeleteWhen)
	return s, err
}

// Retention returns the retention settings in force, with the defaults filled in and the ratios
// clamped.
func (e *Engine) Retention() Retention { return e.retention.settings.Load().Retention }

// SetRetention changes the retention settings while the engine runs; it is safe to call from
// any goroutine. Zero values mean the defaults, as in Options. The next retention pass uses the
// new settings (a new CleanInterval from the next tick on); the disk is measured again at once,
// so that a new DiskWarningRatio refuses or admits writes right away. An invalid r changes
// nothing and returns the error.
func (e *Engine) SetRetention(r Retention) error {
	s, err := compileRetention(r)
	if err != nil {
		return err
	}
	e.retention.settings.Store(s)
	e.retention.checkDisk(e.opts.Now())
	return nil
}
