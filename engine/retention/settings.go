package retention

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Settings are the retention settings (engine.Options' FileReservedTime and the fields after
// it) that an engine can change while it runs (Stage.SetSettings): a running service reloads
// them on SIGHUP. A zero value means the default, and the ratios are clamped to RocketMQ's
// bounds.
type Settings struct {
	FileReservedTime       time.Duration
	DeleteWhen             string
	CleanInterval          time.Duration
	DiskMaxUsedRatio       float64
	DiskCleanForciblyRatio float64
	DiskWarningRatio       float64
	DeleteFilesPerPass     int
	NoRetention            bool
}

// WithDefaults fills in the defaults (RocketMQ's) and clamps the ratios like RocketMQ does.
func (r Settings) WithDefaults() Settings {
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
func (r Settings) Validate() error {
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

// compiled are the settings in force, with what the passes compute from them. They are
// immutable: SetSettings swaps the pointer, and each pass or disk check reads one snapshot.
type compiled struct {
	Settings                  // defaults filled in
	hours                     [24]bool
	maxUsed, forcibly, refuse int // percent thresholds
}

func compile(r Settings) (*compiled, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	r = r.WithDefaults()
	s := &compiled{
		Settings: r,
		maxUsed:  percent(r.DiskMaxUsedRatio),
		forcibly: percent(r.DiskCleanForciblyRatio),
		refuse:   percent(r.DiskWarningRatio),
	}
	var err error
	s.hours, err = parseHours(r.DeleteWhen)
	return s, err
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
