package benchmarks

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// childRoleEnv makes the test binary a benchmark child (see TestMain): the tests run the real
// two-process setup, with this binary in place of the engine's.
const childRoleEnv = "ROCKETSTORE_BENCH_TEST_CHILD"

func TestMain(m *testing.M) {
	if role := os.Getenv(childRoleEnv); role != "" {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
		log := zerolog.New(os.Stderr).Level(zerolog.WarnLevel).With().Str("child", role).Logger()
		err := ChildMain(ctx, role, os.Stdin, os.Stdout, log)
		stop()
		if err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// testRunner runs children from the test binary; their logs go to the test's log.
func testRunner(t *testing.T) *Runner {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return &Runner{
		Command: func(ctx context.Context, role string) *exec.Cmd {
			cmd := exec.CommandContext(ctx, exe)
			// A -race binary sleeps a second at exit unless told not to.
			gorace := strings.TrimSpace(os.Getenv("GORACE") + " atexit_sleep_ms=0")
			cmd.Env = append(os.Environ(), childRoleEnv+"="+role, "GORACE="+gorace)
			return cmd
		},
		WorkDir: t.TempDir(),
		Log:     zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel),
		Stderr:  testWriter{t},
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// tinyRun is a run of a few hundred messages on a small store.
func tinyRun(scenario string, ack AckMode) Run {
	l := Load{Publishers: 2, BodySize: 64, Topics: 3, Messages: 301, Ack: ack}
	if ack == RequestReply {
		l.Window = 16
	}
	return Run{
		ID: fmt.Sprintf("%s/%s", scenario, ack), Scenario: scenario, Load: l,
		Target:  TargetOptions{CommitLogSize: 1 << 20, Small: true},
		Timeout: time.Minute, Stall: 5 * time.Second,
	}
}

// targets are the scenarios with the ack modes they are tested in.
var targets = []struct {
	scenario string
	ack      AckMode
}{
	{"ceiling-subscriber", FireAndForget},
	{"ceiling-responder", RequestReply},
	{"engine-async", FireAndForget},
	{"engine-async", RequestReply},
	{"engine-sync", FireAndForget},
	{"engine-sync", RequestReply},
}

// TestTinyRuns runs every target once: each run must be valid, with every message found, and
// the engine runs compared with the ceiling of their ack mode.
func TestTinyRuns(t *testing.T) {
	var runs []Run
	for _, tc := range targets {
		runs = append(runs, tinyRun(tc.scenario, tc.ack))
	}
	results, err := testRunner(t).Run(context.Background(), runs)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range results {
		if !r.Valid {
			t.Errorf("%s: invalid: %v", r.Run.ID, r.Problems)
			continue
		}
		if r.Sent != 301 || r.Found != 301 {
			t.Errorf("%s: sent %d, found %d, want 301", r.Run.ID, r.Sent, r.Found)
		}
		if r.MsgsPerSec <= 0 || r.TargetCPU <= 0 || r.TargetRSS <= 0 {
			t.Errorf("%s: figures missing: %+v", r.Run.ID, r)
		}
		if r.Ceiling == "" || r.Ratio <= 0 {
			t.Errorf("%s: no ratio to a ceiling", r.Run.ID)
		}
		if r.Run.Load.Ack == RequestReply && (r.Acked != 301 || r.Latency.Count != 301 || r.Latency.P50 <= 0) {
			t.Errorf("%s: acked %d, latencies %+v", r.Run.ID, r.Acked, r.Latency)
		}
		if engine := scenarios[r.Run.Scenario].Engine; engine != (r.Engine != nil) {
			t.Errorf("%s: engine report %v", r.Run.ID, r.Engine)
		} else if engine && (r.Engine.Records != 301 || r.Engine.FinalSyncs == 0 ||
			(r.Run.Scenario == "engine-sync" && r.Engine.Syncs == 0)) {
			t.Errorf("%s: engine report %+v", r.Run.ID, *r.Engine)
		}
	}
	var md bytes.Buffer
	if err := WriteMarkdown(&md, Info{Command: "test"}, results); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + md.String())
}

// TestLossIsCaught makes every target lose one message, in transit (the publisher claims a
// message it never sent) or in the target (a ceiling ignores one): every such run must be
// invalid, and say what is missing. The stall is short: the waits for the lost message end
// quickly, and what is missing is counted after the target stopped, whatever the stall.
func TestLossIsCaught(t *testing.T) {
	var runs []Run
	for _, tc := range targets {
		r := tinyRun(tc.scenario, tc.ack)
		r.ID += "/publisher-skip"
		r.Fault.PublisherSkip = 17
		r.Stall = 300 * time.Millisecond
		runs = append(runs, r)
	}
	for _, sc := range []string{"ceiling-subscriber", "ceiling-responder"} {
		r := tinyRun(sc, scenarios[sc].Modes[0])
		r.ID += "/target-drop"
		r.Fault.TargetDrop = 42
		r.Stall = 300 * time.Millisecond
		runs = append(runs, r)
	}
	results, err := testRunner(t).Run(context.Background(), runs)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range results {
		if r.Valid {
			t.Errorf("%s: a lost message went unnoticed: %+v", r.Run.ID, r)
			continue
		}
		if all := strings.Join(r.Problems, "; "); !strings.Contains(all, "1 of 301 messages missing") {
			t.Errorf("%s: problems do not name the loss: %s", r.Run.ID, all)
		}
		if r.Ratio != 0 {
			t.Errorf("%s: an invalid run got a ratio", r.Run.ID)
		}
	}
}

// TestRateFromEarlierRun checks that a run takes its rate from an earlier run and is paced.
func TestRateFromEarlierRun(t *testing.T) {
	peak := tinyRun("ceiling-responder", RequestReply)
	half := peak
	half.ID, half.RateOf, half.RateFraction = "half", peak.ID, 0.5
	results, err := testRunner(t).Run(context.Background(), []Run{peak, half})
	if err != nil {
		t.Fatal(err)
	}
	if !results[0].Valid || !results[1].Valid {
		t.Fatalf("invalid: %v / %v", results[0].Problems, results[1].Problems)
	}
	want := results[0].MsgsPerSec / 2
	if got := results[1].Run.Load.Rate; got != want {
		t.Errorf("rate %g, want %g", got, want)
	}
	if results[1].Ratio != 0 {
		t.Error("a rate-limited run got a ratio")
	}
}
