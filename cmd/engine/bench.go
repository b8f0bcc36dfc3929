package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketstore/engine/benchmarks"
)

// benchCmd is `engine bench`: the ingest benchmarks of benchmarks/README.md. Each run has its
// own target process and publisher process, both this binary re-executed with the hidden
// --child flag.
type benchCmd struct {
	Preset        string        `help:"Runs to make: ${enum} (see benchmarks/README.md)." enum:"quick,issue3,issue8,issue18,issue19,issue28,full" default:"quick"`
	Out           string        `help:"Write results.csv, results.md, the charts (charts/*.svg, *.png) and the profiles into this directory." type:"path" placeholder:"DIR"`
	CSV           string        `name:"csv" help:"Also write every figure of every run as CSV to this file." type:"path" placeholder:"FILE"`
	Profile       bool          `help:"Write a pprof CPU profile of every run's target process (the measurement only) and of its publisher process into --out DIR/profiles."`
	Dir           string        `help:"Directory for the runs' scratch stores (the system's temporary directory if empty; use a real disk)." type:"path"`
	Timeout       time.Duration `help:"Deadline of the whole invocation; runs not started by then are reported invalid (default: 15m, or twice the preset's estimate if longer)."`
	CommitLogSize byteSize      `name:"commitlog-size" help:"CommitLog segment size of the engine targets." default:"256MiB"`
	Scale         float64       `help:"Multiply every run's duration and message count." default:"1"`
	Publishers    int           `help:"Publishers (connections) of the base load; 0 keeps the preset's."`
	Topics        int           `help:"Topics (subjects) of the base load; 0 keeps the preset's."`
	Body          byteSize      `help:"Body size of the base load; 0 keeps the preset's." default:"0"`
	Only          string        `help:"Make only the preset's runs whose ID matches this regular expression (and the runs their rates come from)." placeholder:"REGEXP"`
	Cold          bool          `help:"Start the store targets without their topics: the runs then include creating every topic's files."`
	Keep          bool          `help:"Keep the runs' scratch directories (the stores) instead of removing them."`
	ChildLogLevel string        `help:"Log level of the target and publisher processes." enum:"trace,debug,info,warn,error" default:"warn"`

	Rounds int    `help:"issue28: rounds of the throughput part (each reader warm and cold)." default:"3"`
	Churn  int    `help:"issue28: clean leaves, then kill -9s, of the churn part." default:"20"`
	Parts  string `help:"issue28: the parts to run, comma-separated: throughput, churn, tail, idle (default: all)." placeholder:"PARTS"`

	Child string `hidden:"" help:"Run as a benchmark's child process (target, publish, or one of issue28's g28-* roles)." default:""`
}

func (b *benchCmd) Run(log zerolog.Logger) error {
	if b.Child != "" {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
		defer stop()
		return benchmarks.ChildMain(ctx, b.Child, os.Stdin, os.Stdout, log)
	}
	if b.Profile && b.Out == "" {
		return errors.New("--profile writes into the --out directory: give --out DIR")
	}
	if b.Preset == "issue28" {
		return b.issue28(log)
	}
	popts := benchmarks.PresetOptions{
		CommitLogSize: int64(b.CommitLogSize), Scale: b.Scale,
		Publishers: b.Publishers, Topics: b.Topics, BodySize: int(b.Body), Cold: b.Cold,
	}
	runs, err := benchmarks.Preset(b.Preset, popts)
	if err != nil {
		return err
	}
	if b.Only != "" {
		if runs, err = benchmarks.SelectRuns(runs, b.Only); err != nil {
			return err
		}
	}
	estimate := benchmarks.EstimateRuns(runs)
	timeout := b.Timeout
	if timeout == 0 {
		timeout = max(15*time.Minute, 2*estimate)
	}
	fmt.Fprintf(os.Stderr, "engine bench --preset %s: %d runs, about %s on a 2-core machine (deadline %s)\n",
		b.Preset, len(runs), estimate.Round(time.Second), timeout.Round(time.Second))

	self, err := benchmarks.SelfCommand("bench", "--child")
	if err != nil {
		return err
	}
	command := func(ctx context.Context, role string) *exec.Cmd {
		cmd := self(ctx, role)
		cmd.Env = append(os.Environ(), "ENGINE_LOG_LEVEL="+b.ChildLogLevel)
		return cmd
	}
	r := &benchmarks.Runner{Command: command, WorkDir: b.Dir, Keep: b.Keep, Log: log,
		Estimate: benchmarks.Run.Estimate}
	if b.Out != "" {
		if err := os.MkdirAll(b.Out, 0o755); err != nil {
			return err
		}
		if b.Profile {
			r.ProfileDir = filepath.Join(b.Out, "profiles")
		}
	}
	if isTerminal(os.Stderr) {
		r.Progress = os.Stderr
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeoutCause(ctx, timeout, fmt.Errorf("the invocation's deadline (--timeout %s) passed", timeout))
	defer cancel()
	info := benchmarks.Info{
		Command: "engine " + strings.Join(os.Args[1:], " "),
		Started: time.Now(),
		Host: fmt.Sprintf("%d CPUs, GOMAXPROCS %d, %s/%s, %s", runtime.NumCPU(), runtime.GOMAXPROCS(0),
			runtime.GOOS, runtime.GOARCH, runtime.Version()),
		Preset: b.Preset,
	}
	results, err := r.Run(ctx, runs)
	if err != nil {
		return err
	}
	info.Took, info.Invalid, info.TotalRuns = time.Since(info.Started), benchmarks.Invalid(results), len(results)
	info.Goals = benchmarks.CheckGoals(results, benchmarks.BaseLoad(popts))
	if b.Out != "" {
		if info.Charts, err = benchmarks.WriteCharts(filepath.Join(b.Out, "charts"), results); err != nil {
			return err
		}
		for i, c := range info.Charts {
			info.Charts[i] = filepath.Join("charts", c)
		}
		if err := writeFile(filepath.Join(b.Out, "results.csv"), func(f *os.File) error { return benchmarks.WriteCSV(f, results) }); err != nil {
			return err
		}
		if err := writeFile(filepath.Join(b.Out, "results.md"), func(f *os.File) error { return benchmarks.WriteMarkdown(f, info, results) }); err != nil {
			return err
		}
	}
	if err := benchmarks.WriteMarkdown(os.Stdout, info, results); err != nil {
		return err
	}
	if b.CSV != "" {
		if err := writeFile(b.CSV, func(f *os.File) error { return benchmarks.WriteCSV(f, results) }); err != nil {
			return err
		}
	}
	if info.Invalid > 0 {
		return fmt.Errorf("%d of %d runs invalid: their figures do not count", info.Invalid, len(results))
	}
	return nil
}

// writeFile creates path and writes it with write.
func writeFile(path string, write func(*os.File) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	return errors.Join(write(f), f.Close())
}

// issue28 runs issue 28's consumer-group benchmarks (benchmarks/issue28.go): their own
// orchestration, with the engine as an `engine run` process.
func (b *benchCmd) issue28(log zerolog.Logger) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	timeout := b.Timeout
	if timeout == 0 {
		timeout = time.Hour
	}
	ctx, cancel := context.WithTimeoutCause(ctx, timeout, fmt.Errorf("the invocation's deadline (--timeout %s) passed", timeout))
	defer cancel()
	o := benchmarks.Issue28Options{Exe: exe, Dir: b.Dir, Out: b.Out, Scale: b.Scale, Rounds: b.Rounds, Churn: b.Churn,
		Profile: b.Profile, Keep: b.Keep, Log: log, Progress: os.Stderr}
	if b.Parts != "" {
		o.Parts = strings.Split(b.Parts, ",")
	}
	if b.Only != "" {
		if o.Only, err = regexp.Compile(b.Only); err != nil {
			return fmt.Errorf("--only: %w", err)
		}
	}
	rep := benchmarks.Issue28Report{Command: "engine " + strings.Join(os.Args[1:], " ")}
	return benchmarks.Issue28(ctx, o, &rep, os.Stdout)
}
