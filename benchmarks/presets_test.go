package benchmarks

import (
	"slices"
	"testing"
	"time"
)

func TestPresets(t *testing.T) {
	for _, name := range Presets() {
		runs, err := Preset(name, PresetOptions{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, r := range runs {
			if r.Target.CommitLogSize != DefaultCommitLogSize && !scenarios[r.Scenario].SelfLoaded {
				t.Errorf("%s/%s: segment %d", name, r.ID, r.Target.CommitLogSize)
			}
		}
	}
	runs, _ := Preset("issue3", PresetOptions{})
	byID := map[string]Run{}
	for _, r := range runs {
		byID[r.ID] = r
	}
	for id, want := range map[string]Run{
		"ceiling-responder/rr4096@50%": {Scenario: "ceiling-responder", RateOf: "engine-sync/rr4096", RateFraction: 0.5},
		"engine-sync/rr4096@50%":       {Scenario: "engine-sync", RateOf: "engine-sync/rr4096", RateFraction: 0.5},
		"engine-sync/ba4096@50%":       {Scenario: "engine-sync", RateOf: "engine-sync/ba4096", RateFraction: 0.5},
		"engine-sync/ba4096":           {Scenario: "engine-sync"},
		"jetstream-default/rr4096":     {Scenario: "jetstream-default"},
	} {
		r, ok := byID[id]
		if !ok || r.RateOf != want.RateOf || r.RateFraction != want.RateFraction || r.Scenario != want.Scenario {
			t.Errorf("issue3's %s: %+v", id, r)
		}
	}
	if _, err := Preset("nope", PresetOptions{}); err == nil {
		t.Error("unknown preset accepted")
	}
}

// TestQuickPreset checks that quick has every target, at the base load, and stays short.
func TestQuickPreset(t *testing.T) {
	runs, err := Preset("quick", PresetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var have []string
	for _, r := range runs {
		have = append(have, r.ID)
	}
	for _, id := range []string{"disk-ceiling/1MiB", "ceiling-subscriber/ff", "engine-async/ff", "engine-sync/ff",
		"kafka-style/ff", "jetstream-default/ff", "jetstream-syncalways/ff", "ceiling-responder/rr4096",
		"engine-async/rr4096", "engine-sync/rr4096", "kafka-style/rr4096", "jetstream-default/rr4096",
		"jetstream-syncalways/rr4096", "engine-sync/ba4096", "engine-sync/ba4096/unpacked"} {
		if !slices.Contains(have, id) {
			t.Errorf("quick lacks %s (has %v)", id, have)
		}
	}
	if r := runs[len(runs)-2]; r.Load.Key() != "ba/p4/b128/t16/w4096" || r.Load.Duration != 3*time.Second {
		t.Errorf("quick's batched run: %+v", r)
	}
	if d := EstimateRuns(runs); d > 2*time.Minute {
		t.Errorf("quick is estimated at %s", d)
	}
}

// TestFullPreset checks the sweep planner: one dimension at a time around the base load, every
// point with its ceiling and JetStream references, IDs naming the point, a bounded estimate.
func TestFullPreset(t *testing.T) {
	runs, err := Preset("full", PresetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]Run{}
	points := map[string][]string{} // load key -> scenarios
	for _, r := range runs {
		byID[r.ID] = r
		points[r.Load.Key()] = append(points[r.Load.Key()], r.Scenario)
	}
	// 1 disk + base and topics (6 points x 2 acks x 7 runs) + body and publishers (2 x 2 x 2 x
	// 6) + window (2 x 6) + batched (128 B and 1 KiB x 2 engines, and unpacked at the base load)
	// + 3 at half rate.
	if want := 1 + 6*2*7 + 2*2*2*6 + 2*6 + 2*2 + 1 + 3; len(runs) != want {
		t.Errorf("%d runs, want %d", len(runs), want)
	}
	for _, tc := range []struct {
		id       string
		group    string
		load     Load
		scenario string
	}{
		{"engine-async/ff", "base", Load{Publishers: 4, Topics: 16, BodySize: 128, Ack: FireAndForget}, "engine-async"},
		{"kafka-style-sync/rr4096/t10000", "topics", Load{Publishers: 4, Topics: 10000, BodySize: 128, Ack: RequestReply, Window: 4096}, "kafka-style-sync"},
		{"engine-sync/ff/t1", "topics", Load{Publishers: 4, Topics: 1, BodySize: 128, Ack: FireAndForget}, "engine-sync"},
		{"jetstream-default/rr4096/b16KiB", "body", Load{Publishers: 4, Topics: 16, BodySize: 16 << 10, Ack: RequestReply, Window: 4096}, "jetstream-default"},
		{"ceiling-subscriber/ff/p16", "publishers", Load{Publishers: 16, Topics: 16, BodySize: 128, Ack: FireAndForget}, "ceiling-subscriber"},
		{"engine-sync/rr1", "window", Load{Publishers: 4, Topics: 16, BodySize: 128, Ack: RequestReply, Window: 1}, "engine-sync"},
		{"jetstream-syncalways/rr64", "window", Load{Publishers: 4, Topics: 16, BodySize: 128, Ack: RequestReply, Window: 64}, "jetstream-syncalways"},
		{"engine-sync/ba4096", "base", Load{Publishers: 4, Topics: 16, BodySize: 128, Ack: Batched, Window: 4096}, "engine-sync"},
		{"engine-async/ba4096/b1KiB", "body", Load{Publishers: 4, Topics: 16, BodySize: 1024, Ack: Batched, Window: 4096}, "engine-async"},
	} {
		r, ok := byID[tc.id]
		if !ok {
			t.Errorf("no run %s", tc.id)
			continue
		}
		if r.Group != tc.group || r.Scenario != tc.scenario || r.Load.Key() != tc.load.Key() {
			t.Errorf("%s: group %s scenario %s load %s, want %s %s %s", tc.id, r.Group, r.Scenario, r.Load.Key(),
				tc.group, tc.scenario, tc.load.Key())
		}
	}
	// Every point has its ceiling and both JetStreams, and the engine in both modes. A batched
	// point has the engine only; its references are at the points of its referenceLoads.
	for key, scs := range points {
		if slices.Contains(scs, "disk-ceiling") {
			continue
		}
		if key[:2] == "ba" {
			var l Load
			for _, r := range runs {
				if r.Load.Key() == key {
					l = r.Load
				}
			}
			want := batchedTargets
			if l.Unpacked {
				want = []string{"engine-sync"}
			}
			if !slices.Equal(slices.Compact(slices.Sorted(slices.Values(scs))), want) { // @50% too
				t.Errorf("batched load %s has %v", key, scs)
			}
			if !slices.Contains(points[referenceLoad(l, true).Key()], "ceiling-subscriber") ||
				!slices.Contains(points[referenceLoad(l, false).Key()], "jetstream-default") {
				t.Errorf("batched load %s lacks its references", key)
			}
			continue
		}
		ceiling := "ceiling-subscriber"
		if key[:2] == "rr" {
			ceiling = "ceiling-responder"
		}
		for _, want := range []string{ceiling, "engine-async", "engine-sync", "jetstream-default", "jetstream-syncalways"} {
			if !slices.Contains(scs, want) {
				t.Errorf("load %s lacks %s (has %v)", key, want, scs)
			}
		}
	}
	// Runs are bounded: fire-and-forget by a count the target takes in seconds, request/reply
	// by a duration; the whole preset in well under 40 minutes.
	for _, r := range runs {
		if r.Load.Ack == FireAndForget && !scenarios[r.Scenario].SelfLoaded {
			if secs := float64(r.Load.Messages) / expectedRate(r.Scenario, r.Load); secs > ffRunSeconds+1 && r.Load.Messages > 2*int64(r.Load.Topics) {
				t.Errorf("%s: %d messages, about %.0fs", r.ID, r.Load.Messages, secs)
			}
		}
		if r.Load.Ack.windowed() && r.Load.Duration != fullRR {
			t.Errorf("%s: duration %s", r.ID, r.Load.Duration)
		}
	}
	est := EstimateRuns(runs)
	if est < 10*time.Minute || est > 35*time.Minute {
		t.Errorf("full is estimated at %s", est)
	}
	t.Logf("full: %d runs, estimated %s", len(runs), est.Round(time.Second))

	scaled, err := Preset("full", PresetOptions{Scale: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	for i := range runs {
		a, b := runs[i].Load, scaled[i].Load
		if b.Duration != a.Duration/2 || (a.Messages > 0 && b.Messages != max(a.Messages/2, int64(a.Publishers))) {
			t.Errorf("%s: scaled %v/%d from %v/%d", runs[i].ID, b.Duration, b.Messages, a.Duration, a.Messages)
		}
	}
}

// TestSizeText checks the body sizes in run ids and tables.
func TestSizeText(t *testing.T) {
	for n, want := range map[int]string{128: "128B", 1024: "1KiB", 16384: "16KiB", 1 << 20: "1MiB", 1500: "1500B"} {
		if got := sizeText(n); got != want {
			t.Errorf("sizeText(%d) = %s, want %s", n, got, want)
		}
	}
}

// TestProgressBar checks the time left: the remaining runs' estimates, scaled by how the
// finished runs compared with theirs.
func TestProgressBar(t *testing.T) {
	runs := make([]Run, 4)
	b := progressBar{estimate: func(Run) time.Duration { return 10 * time.Second }, runs: runs, begun: time.Now()}
	if left := b.left(); left != 40*time.Second {
		t.Errorf("left %s at the start", left)
	}
	b.start(0)
	b.finish(0, 20*time.Second) // twice as slow as estimated
	b.start(1)
	b.started = b.started.Add(-5 * time.Second)
	if left := b.left().Round(time.Second); left != 50*time.Second { // (3 x 10 s - 5 s) x 2
		t.Errorf("left %s, want 50s", left)
	}
	if s := b.render(); s[:23] != "[#####...............] " {
		t.Errorf("bar %q", s)
	}
	if (&progressBar{runs: runs}).left() >= 0 {
		t.Error("a time left without estimates")
	}
}
