package benchmarks

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"
)

// Runner runs benchmark runs one after another. Every run has two child processes: the target
// (a Scenario's Target) and the publishers; the Runner, in the parent, starts them, hands the
// target's URL to the publishers, tells the target how many messages to expect, verifies what
// the target kept once both exited, and makes the Result.
type Runner struct {
	// Command makes the command that runs a child in role: a binary that calls ChildMain (see
	// SelfCommand). Its stdin and stdout are the runner's; its stderr is Stderr if unset.
	Command func(ctx context.Context, role string) *exec.Cmd
	// WorkDir holds the runs' scratch directories (os.TempDir() when empty); each is removed
	// after its run's verification.
	WorkDir string
	// Keep leaves the scratch directories in place (for a look at the store).
	Keep bool
	Log  zerolog.Logger
	// Progress, when set, gets a progress bar and status line rewritten in place (a
	// terminal); nil is quiet.
	Progress io.Writer
	// Estimate, when set, is the expected wall time of a run (see Run.Estimate): the
	// progress bar's time left comes from it, corrected by how long the runs so far took.
	Estimate func(Run) time.Duration
	// ProfileDir, when set, gets a pprof CPU profile of every run's target child and of its
	// publisher child, named after the run (see ProfileName and PublisherProfileName).
	ProfileDir string
	// Stderr receives the children's logs (os.Stderr when nil).
	Stderr io.Writer

	bar progressBar
}

// Check validates runs as a whole: each run, unique IDs, rates taken from earlier runs.
func Check(runs []Run) error {
	seen := map[string]bool{}
	var errs []error
	for _, r := range runs {
		if err := r.Validate(); err != nil {
			errs = append(errs, err)
		}
		if r.ID == "" || seen[r.ID] {
			errs = append(errs, fmt.Errorf("run id %q is empty or not unique", r.ID))
		}
		for _, src := range r.rateSources() {
			if !seen[src] {
				errs = append(errs, fmt.Errorf("run %s takes its rate from %q, which is not an earlier run", r.ID, src))
			}
		}
		seen[r.ID] = true
	}
	return errors.Join(errs...)
}

// Run runs every run in order and returns their results, ratios computed. It fails only when
// the runs are malformed; a run that fails is an invalid Result. Once ctx ends (the invocation's
// deadline), the runs not started are reported invalid without running.
func (r *Runner) Run(ctx context.Context, runs []Run) ([]Result, error) {
	if err := Check(runs); err != nil {
		return nil, err
	}
	results := make([]Result, 0, len(runs))
	byID := map[string]int{}
	r.bar = progressBar{estimate: r.Estimate, runs: runs, begun: time.Now()}
	for i, run := range runs {
		r.bar.start(i)
		var res Result
		rate, why := sourceRate(results, byID, run.rateSources())
		switch {
		case ctx.Err() != nil:
			res = Result{Run: run, Started: time.Now()}
			res.invalid("not run: %v", context.Cause(ctx))
		case why != "":
			res = Result{Run: run, Started: time.Now()}
			res.invalid("not run: %s", why)
		default:
			if rate > 0 {
				run.Load.Rate = run.RateFraction * rate
			}
			r.status("%s: starting", run.ID)
			res = r.runOne(ctx, run, run.ID)
		}
		r.bar.finish(i, res.Took)
		r.done(i+1, len(runs), &res)
		results = append(results, res)
		byID[run.ID] = len(results) - 1
	}
	computeRatios(results)
	return results, nil
}

// sourceRate is the rate a run takes from the earlier runs srcs (none: 0): the one run's, which
// must be valid, or the median of the valid ones of several. why says why there is none.
func sourceRate(results []Result, byID map[string]int, srcs []string) (rate float64, why string) {
	var rates []float64
	for _, id := range srcs {
		if j, ok := byID[id]; ok && results[j].Valid && results[j].MsgsPerSec > 0 {
			rates = append(rates, results[j].MsgsPerSec)
		}
	}
	switch {
	case len(srcs) == 0:
		return 0, ""
	case len(rates) == 0 && len(srcs) == 1:
		return 0, fmt.Sprintf("its rate comes from %s, which is invalid", srcs[0])
	case len(rates) == 0:
		return 0, fmt.Sprintf("its rate comes from %s, all invalid", strings.Join(srcs, ", "))
	}
	return median(rates), ""
}

// median is the median of xs (the mean of the middle two of an even count); xs is sorted.
func median(xs []float64) float64 {
	slices.Sort(xs)
	if n := len(xs); n%2 == 1 {
		return xs[n/2]
	} else if n > 0 {
		return (xs[n/2-1] + xs[n/2]) / 2
	}
	return 0
}

// runOne runs one run under its deadline; every failure ends up in the Result.
func (r *Runner) runOne(parent context.Context, run Run, label string) (res Result) {
	res = Result{Run: run, Started: time.Now(), Valid: true}
	defer func() { res.Took = time.Since(res.Started) }()
	ctx, cancel := context.WithTimeout(parent, run.timeout())
	defer cancel()
	log := r.Log.With().Str("run", run.ID).Logger()

	dir, err := os.MkdirTemp(r.WorkDir, "bench-"+fileSafe(run.ID)+"-")
	if err != nil {
		res.invalid("scratch directory: %v", err)
		return res
	}
	if r.Keep {
		log.Info().Str("dir", dir).Msg("keeping the run's directory")
	} else {
		defer os.RemoveAll(dir)
	}
	if r.ProfileDir != "" {
		run.Target.CPUProfile = filepath.Join(r.ProfileDir, ProfileName(run.ID))
		res.Profile = run.Target.CPUProfile
	}
	sc := scenarios[run.Scenario]

	tgt, err := r.startChild(ctx, RoleTarget, parentLine{Target: &TargetConfig{Run: run, Dir: dir}})
	if err != nil {
		tgt.kill()
		res.invalid("%v", err)
		return res
	}
	ready, err := tgt.next(ctx, nil)
	if err == nil && ready.Ready == "" {
		err = errors.New("the target child did not report ready")
	}
	if err != nil {
		tgt.kill()
		res.invalid("target: %v", err)
		return res
	}

	var pres PublishResult
	if sc.SelfLoaded {
		r.status("%s: the target runs its own load", label)
	} else {
		pres, err = r.publish(ctx, run, ready.Ready, label)
		if err != nil {
			res.invalid("%v", err)
		}
		res.PublisherCPU, res.PublisherRSS = pres.Usage.CPU(), pres.Usage.MaxRSS
	}
	n := pres.Sent.Count
	if err := tgt.send(parentLine{Expect: &n}); err != nil {
		tgt.kill()
		res.invalid("%v", err)
		return res
	}
	if !sc.SelfLoaded {
		r.status("%s: published %s, waiting for the target", label, count(pres.Published))
	}
	tl, err := tgt.next(ctx, nil)
	if err == nil && tl.TargetResult == nil {
		err = errors.New("the target child sent no result")
	}
	werr := tgt.wait()
	if err != nil {
		res.invalid("target: %v", err)
		return res
	}
	if werr != nil {
		res.invalid("%v", werr)
	}
	tres := *tl.TargetResult
	res.TargetCPU, res.TargetRSS, res.PeakHeap, res.PeakAnon = tres.Usage.CPU(), tres.PeakRSS, tres.PeakHeap, tres.PeakAnon
	res.Dropped = tres.Report.Dropped
	res.Engine = tres.Report.Engine
	res.Syncs, res.Synced, res.Preloaded = tres.Report.Syncs, tres.Report.Synced, tres.Report.Preloaded.Count
	if g := tres.Report.Generated; sc.SelfLoaded && g != nil {
		pres.Sent, pres.Published, pres.Start, pres.Flushed = *g, g.Count, tres.Report.Start, tres.Done
	}
	if tres.AwaitErr != "" {
		res.invalid("target: %s", tres.AwaitErr)
	}
	if tres.StopErr != "" {
		res.invalid("target stop: %s", tres.StopErr)
	}

	r.status("%s: verifying", label)
	found, problems := sc.Verify(ctx, VerifyInput{Run: run, Dir: dir, Sent: pres.Sent, SentBy: pres.SentBy, Target: tres.Report})
	for _, p := range problems {
		res.invalid("%s", p)
	}
	res.Found = found.Count
	r.figures(&res, &pres, &tres)
	log.Debug().Bool("valid", res.Valid).Float64("msgs_per_sec", res.MsgsPerSec).Msg("run done")
	return res
}

// publish runs the publisher child to its end.
func (r *Runner) publish(ctx context.Context, run Run, url, label string) (PublishResult, error) {
	var pres PublishResult
	cfg := PublishConfig{URL: url, Load: run.Load, Fault: run.Fault, Stall: run.stall()}
	if r.ProfileDir != "" {
		cfg.CPUProfile = filepath.Join(r.ProfileDir, PublisherProfileName(run.ID))
	}
	pub, err := r.startChild(ctx, RolePublisher, parentLine{Publish: &cfg})
	if err != nil {
		pub.kill()
		return pres, err
	}
	start := time.Now()
	l, err := pub.next(ctx, func(p progressLine) {
		if run.Load.Ack.windowed() {
			r.status("%s: %s published, %s acked, %.0fs", label, count(p.Published), count(p.Acked), time.Since(start).Seconds())
		} else {
			r.status("%s: %s published, %.0fs", label, count(p.Published), time.Since(start).Seconds())
		}
	})
	if err == nil && l.PublishResult == nil {
		err = errors.New("the publisher child sent no result")
	}
	if err != nil {
		pub.kill()
		return pres, fmt.Errorf("publisher: %w", err)
	}
	pres = *l.PublishResult
	werr := pub.wait()
	if pres.Err != "" {
		return pres, fmt.Errorf("publisher: %s", pres.Err)
	}
	return pres, werr
}

// figures fills in the rates and checks the replies.
func (r *Runner) figures(res *Result, pres *PublishResult, tres *TargetResult) {
	l := res.Run.Load
	res.Sent, res.Acked, res.WindowWaits = pres.Sent.Count, pres.Acked, pres.WindowWaits
	res.Resent, res.AckMessages = pres.Resent, pres.AckMessages
	if l.Ack.windowed() {
		failed := "error replies"
		if l.Ack == Batched {
			failed = "failed futures"
		}
		if pres.Acked != pres.Sent.Count || pres.AckErrors > 0 {
			res.invalid("%d of %d messages acked, %d %s, %d never answered",
				pres.Acked, pres.Sent.Count, pres.AckErrors, failed, pres.Missing)
		}
		var err error
		if res.Latency, err = summarize(pres.Latency); err != nil {
			res.invalid("%v", err)
		}
	}
	end := pres.LastReply
	held := res.Sent
	if l.Ack == FireAndForget {
		end = tres.Done
		// What the target dropped it never held (a run that does not tolerate drops is invalid
		// for them): the rate is what it held, from the first publish to the last held.
		held = res.Sent - res.Dropped
		if tres.DoneMono != 0 && pres.LastPublishMono != 0 {
			res.Lag = time.Duration(tres.DoneMono - pres.LastPublishMono)
		}
	}
	if end <= pres.Start || res.Sent == 0 {
		res.invalid("no end of run measured")
		return
	}
	res.Elapsed = time.Duration(end - pres.Start)
	secs := res.Elapsed.Seconds()
	res.MsgsPerSec = float64(held) / secs
	res.MBPerSec = float64(pres.Sent.Bytes) * (float64(held) / float64(res.Sent)) / secs / 1e6
	if pres.Flushed > pres.Start {
		res.PublishPerSec = float64(pres.Published) / time.Duration(pres.Flushed-pres.Start).Seconds()
	}
}

// status rewrites the progress line: the bar, then what the current run is doing.
func (r *Runner) status(format string, args ...any) {
	if r.Progress != nil {
		fmt.Fprintf(r.Progress, "\r\033[K%s %s", r.bar.render(), truncate(fmt.Sprintf(format, args...), 90))
	}
}

// ProfileName is the file name of a run's CPU profile.
func ProfileName(runID string) string { return fileSafe(runID) + ".cpu.pprof" }

// PublisherProfileName is the file name of a run's publisher CPU profile.
func PublisherProfileName(runID string) string { return fileSafe(runID) + ".publisher.cpu.pprof" }

// fileSafe turns a run id into a file name.
func fileSafe(id string) string {
	return strings.NewReplacer("/", "_", " ", "_", "%", "pct", "@", "at-").Replace(id)
}

// done replaces the progress line with the run's outcome and logs it.
func (r *Runner) done(i, n int, res *Result) {
	verdict := "valid"
	if !res.Valid {
		verdict = "INVALID: " + strings.Join(res.Problems, "; ")
	}
	if r.Progress != nil {
		fmt.Fprintf(r.Progress, "\r\033[K[%d/%d] %s: %s msgs/s, %s (%.1fs)\n", i, n, res.Run.ID,
			count(int64(res.MsgsPerSec)), verdict, res.Took.Seconds())
	}
	ev := r.Log.Debug() // quiet unless asked: the progress line (on a terminal) and the table say it
	if !res.Valid {
		ev = r.Log.Warn().Strs("problems", res.Problems)
	}
	ev.Str("run", res.Run.ID).Float64("msgs_per_sec", res.MsgsPerSec).Bool("valid", res.Valid).
		Dur("took", res.Took).Msg("run finished")
}

// count formats n with thousands separators.
func count(n int64) string {
	s := fmt.Sprint(n)
	if n < 0 {
		return "-" + count(-n)
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
