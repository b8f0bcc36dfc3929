package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
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
	Preset        string        `help:"Runs to make: ${enum} (see benchmarks/README.md)." enum:"quick,issue3" default:"quick"`
	CSV           string        `name:"csv" help:"Also write every figure of every run as CSV to this file." type:"path" placeholder:"FILE"`
	Dir           string        `help:"Directory for the runs' scratch stores (the system's temporary directory if empty)." type:"path"`
	Timeout       time.Duration `help:"Deadline of the whole invocation; runs not started by then are reported invalid." default:"15m"`
	CommitLogSize byteSize      `name:"commitlog-size" help:"CommitLog segment size of the engine targets (prefaulted)." default:"256MiB"`
	Scale         float64       `help:"Multiply every run's duration and message count." default:"1"`
	Publishers    int           `help:"Publishers (connections) per run; 0 keeps the preset's."`
	Topics        int           `help:"Topics (subjects) per run; 0 keeps the preset's."`
	Body          byteSize      `help:"Body size; 0 keeps the preset's." default:"0"`
	Keep          bool          `help:"Keep the runs' scratch directories (the stores) instead of removing them."`
	ChildLogLevel string        `help:"Log level of the target and publisher processes." enum:"trace,debug,info,warn,error" default:"warn"`

	Child string `hidden:"" help:"Run as a benchmark's child process (target or publish)." enum:",target,publish" default:""`
}

func (b *benchCmd) Run(log zerolog.Logger) error {
	if b.Child != "" {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
		defer stop()
		return benchmarks.ChildMain(ctx, b.Child, os.Stdin, os.Stdout, log)
	}
	runs, err := benchmarks.Preset(b.Preset, benchmarks.PresetOptions{
		CommitLogSize: int64(b.CommitLogSize), Scale: b.Scale,
		Publishers: b.Publishers, Topics: b.Topics, BodySize: int(b.Body),
	})
	if err != nil {
		return err
	}
	self, err := benchmarks.SelfCommand("bench", "--child")
	if err != nil {
		return err
	}
	command := func(ctx context.Context, role string) *exec.Cmd {
		cmd := self(ctx, role)
		cmd.Env = append(os.Environ(), "ENGINE_LOG_LEVEL="+b.ChildLogLevel)
		return cmd
	}
	r := &benchmarks.Runner{Command: command, WorkDir: b.Dir, Keep: b.Keep, Log: log}
	if isTerminal(os.Stderr) {
		r.Progress = os.Stderr
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeoutCause(ctx, b.Timeout, fmt.Errorf("the invocation's deadline (--timeout %s) passed", b.Timeout))
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
	if err := benchmarks.WriteMarkdown(os.Stdout, info, results); err != nil {
		return err
	}
	if b.CSV != "" {
		if err := writeCSVFile(b.CSV, results); err != nil {
			return err
		}
	}
	if info.Invalid > 0 {
		return fmt.Errorf("%d of %d runs invalid: their figures do not count", info.Invalid, len(results))
	}
	return nil
}

func writeCSVFile(path string, results []benchmarks.Result) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	return errors.Join(benchmarks.WriteCSV(f, results), f.Close())
}
