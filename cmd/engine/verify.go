package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/rocketstore/engine/internal/verify"
)

// Exit codes of verify and repair.
const (
	exitConsistent = 0 // no problem found (or nothing to repair)
	exitProblems   = 1 // problems found, or a repair was needed (and done); also runtime errors
	exitUsage      = 2 // no store at --store, or sizes no store can have
)

// checkFlags are what verify and repair share: the store and the sizes it is written with,
// which must be the writer's (run's flags of the same names and defaults), since a file of
// another size cannot be read.
type checkFlags struct {
	Store       string `help:"Store directory." default:"./store" env:"ENGINE_STORE" type:"path"`
	JSON        bool   `name:"json" help:"Print the report as JSON on stdout instead of text."`
	MaxProblems int    `help:"Problems of each kind to list (every problem is counted)." default:"100"`

	CommitLogSize byteSize `help:"Size of each CommitLog segment, as the store was written." default:"1GiB"`
	CQUnits       int      `name:"cq-units" help:"ConsumeQueue units (20 bytes each) per file, as the store was written." default:"300000"`
	IndexSlots    int      `help:"IndexFile hash slots per file, as the store was written." default:"5000000"`
	IndexEntries  int      `help:"IndexFile entries per file, as the store was written." default:"20000000"`
	NoIndex       bool     `help:"The store is written without an IndexFile: neither check nor build one."`
	NoPropCRC     bool     `name:"no-prop-crc" help:"Require the whole-record __CRC32# property nowhere (by default it is required where the checkpoint says the engine wrote it on every record); it is checked where present either way."`

	DryRun   bool `name:"dry-run" help:"With repair: print what the repair would remove (file, range, count, reason) and change nothing."`
	ForceCut bool `name:"force-cut" help:"With repair: cut the CommitLog even where RocketMQ's own recovery would keep the records cut (they fail only the engine's whole-record CRC or PHYSICALOFFSET check); without it such a repair is refused."`
}

// verifyCmd is `engine verify`: a full read-only check of a store, without its lock.
type verifyCmd struct {
	Flags  checkFlags `embed:""`
	Repair bool       `help:"Repair the store when problems are found, as engine repair does (see engine repair --help)."`
}

// repairCmd is `engine repair`, the same as `engine verify --repair`.
type repairCmd struct {
	Flags checkFlags `embed:""`
}

func (c *verifyCmd) Run() error { return runCheck(c.Flags, c.Repair) }

func (c *repairCmd) Run() error { return runCheck(c.Flags, true) }

// Help is the long help of engine repair.
func (c *repairCmd) Help() string {
	return `Repair takes the store's lock (refused while an engine runs) and verifies the store. If it
finds problems, it first prints its plan: every removal, with its file, range, count and
reason (the CommitLog cut at the first invalid record and the segments after it, the
ConsumeQueue units and IndexFiles that are wrong or point past the new end). Only then does it
cut the CommitLog, rebuild the derived files, rewrite the checkpoint and report what it did.
With --dry-run it prints the plan and changes nothing. With --json the plan is part of the one
report printed at the end: use --dry-run to see it first.

A record without the __CRC32# property is valid on its body CRC (RocketMQ writes none by
default); the property is required only where the checkpoint says the engine wrote it on
every record. Repair never removes a record that RocketMQ's own recovery keeps (one that fails
only the engine's stricter checks) unless --force-cut is given.

Exit codes: 0 nothing to repair, 1 repaired (or, with --dry-run, a repair is needed) or failed,
2 usage.`
}

// runCheck runs the command and exits with its code: kong's Run can only fail with 1, and a
// verify that found problems has a report to print, not an error.
func runCheck(f checkFlags, repair bool) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	code, err := f.execute(ctx, os.Stdout, os.Stderr, isTerminal(os.Stderr), repair)
	if err != nil {
		return err // main logs it and exits with 1
	}
	if code != exitConsistent {
		stop()
		os.Exit(code)
	}
	return nil
}

func (f checkFlags) options() verify.Options {
	return verify.Options{
		Dir:               f.Store,
		CommitLogFileSize: int64(f.CommitLogSize),
		ConsumeQueueUnits: f.CQUnits,
		IndexSlots:        f.IndexSlots,
		IndexEntries:      f.IndexEntries,
		NoIndex:           f.NoIndex,
		NoPropCRC:         f.NoPropCRC,
		DryRun:            f.DryRun,
		ForceCut:          f.ForceCut,
		MaxProblems:       f.MaxProblems,
	}
}

// execute verifies (and with repair, repairs) the store, writes the report to stdout, and
// returns the exit code; tty draws a progress bar on stderr. A usage error is told on stderr
// with exitUsage; an error is a failure to check or repair at all.
func (f checkFlags) execute(ctx context.Context, stdout, stderr io.Writer, tty, repair bool) (int, error) {
	opts := f.options()
	if f.CommitLogSize <= 0 || f.CQUnits <= 0 || f.IndexSlots <= 0 || f.IndexEntries <= 0 {
		fmt.Fprintln(stderr, "engine verify: --commit-log-size, --cq-units, --index-slots and --index-entries must be positive")
		return exitUsage, nil
	}
	if tty {
		bar := &progressBar{w: stderr, now: time.Now}
		opts.Progress = bar.update
		defer bar.clear()
	}
	if repair {
		return f.repair(ctx, opts, stdout, stderr)
	}
	rep, err := verify.Verify(ctx, opts)
	if code, ok := usage(err, stderr); ok {
		return code, nil
	}
	if err != nil {
		return 0, err
	}
	if err := f.print(stdout, rep); err != nil {
		return 0, err
	}
	if !f.JSON && !rep.Consistent() {
		fmt.Fprintf(stdout, "to repair: engine repair --store %s (with the same size flags); a cut inside sealed data loses the records after it\n", f.Store)
	}
	if !rep.Consistent() {
		return exitProblems, nil
	}
	return exitConsistent, nil
}

// repair repairs the store. In text, what was found and the plan are printed before the
// repair changes anything, then what it did; in JSON, one report at the end.
func (f checkFlags) repair(ctx context.Context, opts verify.Options, stdout, stderr io.Writer) (int, error) {
	var printed bool
	var perr error
	if !f.JSON {
		opts.OnPlan = func(before *verify.Report, p *verify.Plan) {
			printed = true
			perr = errors.Join(before.WriteText(stdout), p.WriteText(stdout))
		}
	}
	rep, err := verify.Repair(ctx, opts)
	if code, ok := usage(err, stderr); ok {
		return code, nil
	}
	if rep == nil {
		return 0, err
	}
	if perr == nil {
		if printed {
			perr = rep.WriteDoneText(stdout)
		} else {
			perr = f.print(stdout, rep)
		}
	}
	if perr != nil {
		return 0, errors.Join(err, perr)
	}
	switch {
	case err != nil:
		return 0, err
	case !rep.Needed:
		return exitConsistent, nil
	case rep.After != nil && !rep.After.Consistent():
		return 0, fmt.Errorf("the store still has problems after the repair (see the report)")
	}
	return exitProblems, nil
}

// print writes v as text or JSON.
func (f checkFlags) print(w io.Writer, v interface{ WriteText(io.Writer) error }) error {
	if !f.JSON {
		return v.WriteText(w)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// usage maps the errors of a wrong invocation to exitUsage, telling why on stderr.
func usage(err error, stderr io.Writer) (int, bool) {
	if errors.Is(err, verify.ErrNoStore) || errors.Is(err, verify.ErrOptions) {
		fmt.Fprintf(stderr, "engine verify: %v\n", err)
		return exitUsage, true
	}
	return 0, false
}

// progressBar draws one line per phase on a terminal: the phase, a bar, the share done, the
// bytes and the rate. It redraws at most ten times a second.
type progressBar struct {
	w     io.Writer
	now   func() time.Time
	phase verify.Phase
	start time.Time
	last  time.Time
	drawn bool // the current line has been drawn and not ended
}

const barWidth = 30

func (b *progressBar) update(p verify.Progress) {
	now := b.now()
	if p.Phase != b.phase {
		b.clear()
		b.phase, b.start, b.last = p.Phase, now, time.Time{}
	}
	done := p.Done >= p.Total
	if !done && now.Sub(b.last) < 100*time.Millisecond {
		return
	}
	if done && !b.drawn && !b.last.IsZero() {
		return // this phase's last line is drawn already
	}
	b.last = now
	frac := 1.0
	if p.Total > 0 {
		frac = float64(p.Done) / float64(p.Total)
	}
	filled := int(frac * barWidth)
	amount := fmt.Sprintf("%d / %d queues", p.Done, p.Total)
	if p.Bytes {
		amount = verify.Bytes(p.Done) + " / " + verify.Bytes(p.Total)
		if s := now.Sub(b.start).Seconds(); s > 0 {
			amount += fmt.Sprintf(" %s/s", verify.Bytes(int64(float64(p.Done)/s)))
		}
	}
	fmt.Fprintf(b.w, "\r%-13s [%s%s] %3.0f%% %s\x1b[K", p.Phase, strings.Repeat("=", filled),
		strings.Repeat(" ", barWidth-filled), frac*100, amount)
	b.drawn = true
	if done {
		fmt.Fprintln(b.w)
		b.drawn = false
	}
}

// clear ends a line left drawn.
func (b *progressBar) clear() {
	if b.drawn {
		fmt.Fprintln(b.w)
		b.drawn = false
	}
}
