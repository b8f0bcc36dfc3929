package benchmarks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
)

// Issue 28's benchmarks (`engine bench --preset issue28`): consumer groups, measured from outside
// with the engine as a process (`engine run`) and every member, reader and peer as a process of
// its own. Four parts, each reporting its figures as ratios to a peer or a ceiling measured in
// the same invocation:
//
//   - throughput (issue28throughput.go): a 4-member group catching up on a 1,000,000-message
//     topic (128 B), against a JetStream pull consumer reading the same messages, from the page
//     cache and after it was dropped; pull and the batched read from clients written from the
//     docs; the storage-free responder (the ceiling).
//   - churn (issue28churn.go): rebalance times and duplicates over clean leaves and joins, then
//     kill -9s, of a 4-member group under load.
//   - tail (issue28tail.go): publish-to-member latency at 2,000 msgs/s beside a plain NATS
//     subscriber's, async and sync flush.
//   - idle (issue28idle.go): the engine's memory and CPU with 10,000 groups of one idle member.

// Issue28Parts are the parts of the preset, in the order they run.
var Issue28Parts = []string{"throughput", "churn", "tail", "idle"}

// Issue28Options configure the issue28 preset.
type Issue28Options struct {
	// Exe is the engine binary (this program): `engine run` and `engine bench --child`.
	Exe string
	// Dir holds the scratch stores (a real disk: the cold reads read it).
	Dir string
	// Out, when set, gets results.json, results.md and the engine's CPU profiles.
	Out string
	// Parts to run (all when empty).
	Parts []string
	// Scale multiplies the message counts and durations (1 when 0).
	Scale float64
	// Rounds of the throughput part (3 when 0), each every reader warm and cold.
	Rounds int
	// Churn is the leaves (then kills) of the churn part (20 when 0); ChurnRate its load in
	// messages a second (10,000 when 0).
	Churn     int
	ChurnRate float64
	// Profile writes a CPU profile of the engine over each throughput run of the group
	// (--pprof), into Out.
	Profile bool
	// Only, when set, makes only the throughput runs whose "reader/cache" matches it.
	Only *regexp.Regexp
	// Keep leaves the scratch stores (and the engine's logs, STORE.log) in place.
	Keep     bool
	Log      zerolog.Logger
	Progress io.Writer // status lines (nil: quiet)
	Stderr   io.Writer // the children's logs
}

func (o *Issue28Options) scaled(n int64) int64 { return max(int64(float64(n)*o.Scale), 1000) }

func (o *Issue28Options) status(format string, args ...any) {
	if o.Progress != nil {
		fmt.Fprintf(o.Progress, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
	}
}

// Issue28Report is everything the preset measured.
type Issue28Report struct {
	Command    string            `json:"command"`
	Host       string            `json:"host"`
	Started    time.Time         `json:"started"`
	Took       time.Duration     `json:"took"`
	Load       []string          `json:"load"` // uptime's load averages along the way
	Throughput *ThroughputReport `json:"throughput,omitempty"`
	Churn      *ChurnReport      `json:"churn,omitempty"`
	Tail       *TailReport       `json:"tail,omitempty"`
	Idle       *IdleReport       `json:"idle,omitempty"`
	Problems   []string          `json:"problems,omitempty"`
}

// Issue28 runs the preset's parts and writes the report (Markdown) to w, and to Out.
func Issue28(ctx context.Context, o Issue28Options, rep *Issue28Report, w io.Writer) error {
	if o.Scale <= 0 {
		o.Scale = 1
	}
	o.Rounds, o.Churn = cmpOrInt(o.Rounds, 3), cmpOrInt(o.Churn, 20)
	if o.ChurnRate <= 0 {
		o.ChurnRate = 10_000
	}
	if o.Stderr == nil {
		o.Stderr = os.Stderr
	}
	if len(o.Parts) == 0 {
		o.Parts = Issue28Parts
	}
	for _, p := range o.Parts {
		if !slices.Contains(Issue28Parts, p) {
			return fmt.Errorf("issue28: unknown part %q (have %s)", p, strings.Join(Issue28Parts, ", "))
		}
	}
	rep.Started = time.Now()
	rep.Host = hostLine()
	var errs []error
	for _, part := range o.Parts {
		rep.Load = append(rep.Load, part+": "+loadAvg())
		dir, err := os.MkdirTemp(o.Dir, "issue28-"+part+"-")
		if err != nil {
			return err
		}
		o.status("%s: starting (load %s)", part, loadAvg())
		switch part {
		case "throughput":
			rep.Throughput, err = runThroughput(ctx, &o, dir)
		case "churn":
			rep.Churn, err = runChurn(ctx, &o, dir)
		case "tail":
			rep.Tail, err = runTail(ctx, &o, dir)
		case "idle":
			rep.Idle, err = runIdle(ctx, &o, dir)
		}
		if !o.Keep {
			_ = os.RemoveAll(dir)
		}
		if err != nil {
			rep.Problems = append(rep.Problems, fmt.Sprintf("%s: %v", part, err))
			errs = append(errs, fmt.Errorf("%s: %w", part, err))
			if ctx.Err() != nil {
				break
			}
		}
	}
	rep.Load = append(rep.Load, "end: "+loadAvg())
	rep.Took = time.Since(rep.Started)
	if o.Out != "" {
		if err := os.MkdirAll(o.Out, 0o755); err != nil {
			return err
		}
		b, _ := json.MarshalIndent(rep, "", "  ")
		if err := os.WriteFile(filepath.Join(o.Out, "results.json"), b, 0o644); err != nil {
			return err
		}
		f, err := os.Create(filepath.Join(o.Out, "results.md"))
		if err != nil {
			return err
		}
		writeIssue28(f, rep)
		if err := f.Close(); err != nil {
			return err
		}
	}
	writeIssue28(w, rep)
	return errors.Join(errs...)
}

// hostLine names the machine: the CPU model and count.
func hostLine() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	n := 0
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		n = strings.Count(string(b), "processor\t:")
	}
	return fmt.Sprintf("%s, %d CPUs", model, n)
}

// loadAvg is the machine's load averages (1, 5, 15 min).
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// topicOffsets asks the engine for the queues' max offsets of topic (the offsets endpoint).
func topicOffsets(url, topic string) (map[int32]int64, error) {
	nc, err := nats.Connect(url)
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	req, _ := json.Marshal(map[string]string{"topic": topic})
	m, err := nc.Request("$RS.API.offsets", req, 10*time.Second)
	if err != nil {
		return nil, err
	}
	var r struct {
		Queues []docsQueue `json:"queues"`
	}
	if err := json.Unmarshal(m.Data, &r); err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	for _, q := range r.Queues {
		out[q.ID] = q.Max
	}
	return out, nil
}

// waitStored polls the engine's offsets of topic until its queues hold n messages in all
// (observing the engine process from outside, under a deadline).
func waitStored(ctx context.Context, url, topic string, n int64) (map[int32]int64, error) {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		offs, err := topicOffsets(url, topic)
		var sum int64
		for _, v := range offs {
			sum += v
		}
		if err == nil && sum >= n {
			return offs, nil
		}
		if time.Now().After(deadline) {
			return offs, fmt.Errorf("the engine's topic %s holds %d of %d messages after 2 min (%v)", topic, sum, n, err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// fill runs a fill child to its end.
func fill(ctx context.Context, o *Issue28Options, cfg g28FillConfig) (g28FillResult, error) {
	var res g28FillResult
	p, err := startG28(ctx, o.Exe, roleG28Fill, "fill", cfg, o.Stderr)
	if err != nil {
		return res, err
	}
	if err := p.result(ctx, &res); err != nil {
		p.kill()
		return res, err
	}
	return res, p.wait()
}
