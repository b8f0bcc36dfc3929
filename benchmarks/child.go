package benchmarks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"sync"

	"github.com/rs/zerolog"
)

// The roles of the child processes. The parent starts, for every run, one target child and then
// one publisher child, so that the target's CPU time and peak RSS are its own and neither is
// the harness's.
const (
	RoleTarget    = "target"
	RolePublisher = "publish"
)

// Protocol. The parent writes JSON lines on a child's stdin, the child JSON lines on its stdout
// (its logs go to stderr):
//
//	target child:    <- {"target": TargetConfig}
//	                 -> {"ready": url}                 (the target takes messages)
//	                 <- {"expect": n}                  (the publishers are done and sent n)
//	                 -> {"target_result": TargetResult} and exits
//	publisher child: <- {"publish": PublishConfig}
//	                 -> {"progress": ...}              (now and then)
//	                 -> {"publish_result": PublishResult} and exits
//
// Either child reports a failure as {"error": "..."} and exits non-zero. A target child whose
// stdin ends before "expect" (the parent went away) stops its target and exits.
type parentLine struct {
	Target  *TargetConfig  `json:"target,omitempty"`
	Publish *PublishConfig `json:"publish,omitempty"`
	Expect  *int64         `json:"expect,omitempty"`
}

type childLine struct {
	Ready         string         `json:"ready,omitempty"`
	Progress      *progressLine  `json:"progress,omitempty"`
	TargetResult  *TargetResult  `json:"target_result,omitempty"`
	PublishResult *PublishResult `json:"publish_result,omitempty"`
	Error         string         `json:"error,omitempty"`
}

type progressLine struct {
	Published int64 `json:"published"`
	Acked     int64 `json:"acked"`
}

// TargetResult is what the target child reports.
type TargetResult struct {
	Report TargetReport `json:"report"`
	// Done is when the target held every message the publishers sent (unix ns; 0 if never).
	Done int64 `json:"done"`
	// Usage is the target process's CPU from the moment it was ready to the moment it held
	// every message (its shutdown and the parent's verification are not in it).
	Usage Usage `json:"usage"`
	// DoneMono is Done on the machine's monotonic clock (monoNanos; 0 if never), to be set
	// against the publishers' PublishResult.LastPublishMono.
	DoneMono int64 `json:"done_mono,omitempty"`
	// PeakRSS is the target process's peak resident set over its whole life, shutdown included.
	PeakRSS int64 `json:"peak_rss"`
	// PeakHeap is the peak of the target process's heap in use (runtime.MemStats.HeapInuse),
	// sampled every heapSampleEvery from before the target started until it stopped.
	PeakHeap int64 `json:"peak_heap"`
	// PeakAnon is the peak of its anonymous resident memory (RssAnon), sampled with PeakHeap.
	PeakAnon int64  `json:"peak_anon,omitempty"`
	AwaitErr string `json:"await_err,omitempty"`
	StopErr  string `json:"stop_err,omitempty"`
}

// lineWriter writes JSON lines from several goroutines.
type lineWriter struct {
	mu  sync.Mutex
	enc *json.Encoder
}

func newLineWriter(w io.Writer) *lineWriter { return &lineWriter{enc: json.NewEncoder(w)} }

func (w *lineWriter) send(v any) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.enc.Encode(v)
}

// ChildMain runs one child process's role (RoleTarget or RolePublisher), talking to the parent
// over in and out. `engine bench --child=ROLE` calls it; so do the package's tests, which
// re-execute their own binary. ctx should end on SIGTERM, which the parent sends at a run's
// deadline.
func ChildMain(ctx context.Context, role string, in io.Reader, out io.Writer, log zerolog.Logger) error {
	if slices.Contains(G28Roles, role) {
		return g28ChildMain(ctx, role, in, out, log) // issue 28's (issue28roles.go)
	}
	w := newLineWriter(out)
	var err error
	switch role {
	case RoleTarget:
		err = targetMain(ctx, json.NewDecoder(in), w, log)
	case RolePublisher:
		err = publisherMain(ctx, json.NewDecoder(in), w, log)
	default:
		err = fmt.Errorf("unknown child role %q", role)
	}
	if err != nil {
		_ = w.send(childLine{Error: err.Error()})
	}
	return err
}

func targetMain(ctx context.Context, dec *json.Decoder, w *lineWriter, log zerolog.Logger) error {
	var first parentLine
	if err := dec.Decode(&first); err != nil {
		return fmt.Errorf("reading the target configuration: %w", err)
	}
	if first.Target == nil {
		return errors.New("the first line is not a target configuration")
	}
	cfg := *first.Target
	sc, ok := scenarios[cfg.Run.Scenario]
	if !ok {
		return fmt.Errorf("unknown scenario %q", cfg.Run.Scenario)
	}
	t, err := sc.New(cfg, log)
	if err != nil {
		return err
	}
	heap := startHeapSampler()
	defer heap.stop() // also on the early returns
	url, err := t.Start(ctx)
	if err != nil {
		return fmt.Errorf("starting %s: %w", sc.Name, err)
	}
	stopProfile, err := startCPUProfile(cfg.Run.Target.CPUProfile)
	if err != nil {
		return errors.Join(err, t.Stop())
	}
	before := selfUsage()
	if err := w.send(childLine{Ready: url}); err != nil {
		return errors.Join(err, stopProfile(), t.Stop())
	}

	expect := make(chan int64, 1)
	go func() {
		defer close(expect)
		for {
			var l parentLine
			if err := dec.Decode(&l); err != nil {
				return // EOF: the parent is gone
			}
			if l.Expect != nil {
				expect <- *l.Expect
				return
			}
		}
	}()
	var n int64
	select {
	case v, ok := <-expect:
		if !ok {
			return errors.Join(errors.New("stdin closed before the expected count came"), stopProfile(), t.Stop())
		}
		n = v
	case <-ctx.Done():
		return errors.Join(ctx.Err(), stopProfile(), t.Stop())
	}

	var res TargetResult
	done, err := t.Await(ctx, n, cfg.Run.stall())
	res.Usage = selfUsage().Sub(before)
	err = errors.Join(err, stopProfile())
	if err != nil {
		res.AwaitErr = err.Error()
	} else {
		res.Done, res.DoneMono = done.UnixNano(), monoNanos(done)
	}
	if err := t.Stop(); err != nil {
		res.StopErr = err.Error()
	}
	res.Report = t.Report()
	res.PeakRSS, res.PeakHeap = selfUsage().MaxRSS, heap.stop()
	res.PeakAnon = heap.peakAnon()
	return w.send(childLine{TargetResult: &res})
}

func publisherMain(ctx context.Context, dec *json.Decoder, w *lineWriter, log zerolog.Logger) error {
	var first parentLine
	if err := dec.Decode(&first); err != nil {
		return fmt.Errorf("reading the publisher configuration: %w", err)
	}
	if first.Publish == nil {
		return errors.New("the first line is not a publisher configuration")
	}
	stopProfile, err := startCPUProfile(first.Publish.CPUProfile)
	if err != nil {
		return err
	}
	res, err := Publish(ctx, *first.Publish, log, func(published, acked int64) {
		_ = w.send(childLine{Progress: &progressLine{Published: published, Acked: acked}})
	})
	err = errors.Join(err, stopProfile())
	if serr := w.send(childLine{PublishResult: &res}); serr != nil {
		return serr
	}
	if err != nil {
		// The result carries the error; exit non-zero without a second report.
		return fmt.Errorf("publishers: %w", err)
	}
	return nil
}

// startCPUProfile starts a pprof CPU profile of this process into path ("": none) and returns
// what stops it and closes the file.
func startCPUProfile(path string) (stop func() error, err error) {
	if path == "" {
		return func() error { return nil }, nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		return nil, errors.Join(err, f.Close())
	}
	var once sync.Once
	return func() error {
		err := error(nil)
		once.Do(func() {
			pprof.StopCPUProfile()
			err = f.Close()
		})
		return err
	}, nil
}
