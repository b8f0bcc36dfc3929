package benchmarks

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketstore/engine/engine"
)

func TestBatchedLoad(t *testing.T) {
	l := Load{Publishers: 4, BodySize: 128, Topics: 16, Duration: time.Second, Ack: Batched, Window: 4096}
	if err := l.Validate(); err != nil {
		t.Fatal(err)
	}
	if k := l.Key(); k != "ba/p4/b128/t16/w4096" {
		t.Errorf("key %s", k)
	}
	if s := loadText(l); s != "ba w4096 128B p4 t16" {
		t.Errorf("load text %s", s)
	}
	l.Window = 0
	if err := l.Validate(); err == nil || !strings.Contains(err.Error(), "batched acks needs at least 1") {
		t.Errorf("window 0: %v", err)
	}
	// Only the engine answers batched acks.
	for sc, ok := range map[string]bool{"engine-sync": true, "engine-async": true, "ceiling-subscriber": false,
		"ceiling-responder": false, "jetstream-default": false, "kafka-style": false} {
		r := Run{ID: "x", Scenario: sc, Load: withAck(Load{Publishers: 1, BodySize: 64, Topics: 1, Messages: 10}, Batched)}
		if err := r.Validate(); (err == nil) != ok {
			t.Errorf("%s: %v", sc, err)
		}
	}
}

// TestBatchedPairing: a batched run's ceiling is the fire-and-forget ceiling of its publishers,
// bodies and topics, its JetStreams the request/reply runs of its window.
func TestBatchedPairing(t *testing.T) {
	ff := Load{Publishers: 4, BodySize: 128, Topics: 16, Messages: 100, Ack: FireAndForget}
	rr := withAck(ff, RequestReply)
	ba := withAck(ff, Batched)
	rr64, ba1k := rr, ba
	rr64.Window, ba1k.BodySize = 64, 1024
	rs := []Result{
		{Run: Run{ID: "sub", Scenario: "ceiling-subscriber", Load: ff}, Valid: true, MsgsPerSec: 1000},
		{Run: Run{ID: "resp", Scenario: "ceiling-responder", Load: rr}, Valid: true, MsgsPerSec: 400},
		{Run: Run{ID: "js", Scenario: "jetstream-default", Load: rr}, Valid: true, MsgsPerSec: 100},
		{Run: Run{ID: "js64", Scenario: "jetstream-default", Load: rr64}, Valid: true, MsgsPerSec: 50},
		{Run: Run{ID: "jss", Scenario: "jetstream-syncalways", Load: rr}, Valid: true, MsgsPerSec: 10},
		{Run: Run{ID: "ba", Scenario: "engine-sync", Load: ba}, Valid: true, MsgsPerSec: 500},
		{Run: Run{ID: "ba1k", Scenario: "engine-sync", Load: ba1k}, Valid: true, MsgsPerSec: 500},
	}
	computeRatios(rs)
	r := rs[5]
	if r.Ceiling != "sub" || r.Ratio != 0.5 || r.JetStream != "js" || r.RatioJS != 5 || r.JetStreamSync != "jss" || r.RatioJSSync != 50 {
		t.Errorf("batched ratios: %+v", r)
	}
	if r := rs[6]; r.Ceiling != "" || r.JetStream != "" {
		t.Errorf("batched 1 KiB paired with 128 B runs: %+v", r)
	}
	if r := rs[2]; r.Ceiling != "resp" || r.JetStream != "js" {
		t.Errorf("request/reply pairing changed: %+v", r)
	}
}

// TestBatchedGoals checks issue 8's goals on made-up results: the ratios of the batched run,
// and its p99 at half load against request/reply's.
func TestBatchedGoals(t *testing.T) {
	base := Load{Publishers: 4, BodySize: 128, Topics: 16}
	half := func(id string, a AckMode, rate float64, p99 time.Duration) Result {
		l := withAck(base, a)
		l.Rate = rate
		return Result{Run: Run{ID: id, Scenario: "engine-sync", Load: l, RateOf: "peak", RateFraction: 0.5}, Valid: true,
			MsgsPerSec: rate, Latency: Latency{Count: 100, P99: p99}}
	}
	rs := []Result{
		{Run: Run{ID: "sub", Scenario: "ceiling-subscriber", Load: withAck(base, FireAndForget)}, Valid: true, MsgsPerSec: 1000},
		{Run: Run{ID: "js", Scenario: "jetstream-default", Load: withAck(base, RequestReply)}, Valid: true, MsgsPerSec: 100},
		{Run: Run{ID: "ba", Scenario: "engine-sync", Load: withAck(base, Batched)}, Valid: true, MsgsPerSec: 500},
		half("rr@50%", RequestReply, 100, 10*time.Millisecond),
		half("ba@50%", Batched, 250, 11500*time.Microsecond),
	}
	computeRatios(rs)
	got := map[string]GoalResult{}
	for _, g := range CheckGoals(rs, base) {
		got[g.Goal] = g
	}
	gs := batchedGoals()
	for i, want := range []struct {
		measured float64
		status   string
	}{{5, "met"}, {0.5, "MISSED"}, {1.5, "met"}} {
		g := got[gs[i].text]
		if g.Measured != want.measured || g.Status != want.status {
			t.Errorf("%s: %+v, want %g %s", gs[i].text, g, want.measured, want.status)
		}
	}
	rs[4].Latency.P99 = 12500 * time.Microsecond
	for _, g := range CheckGoals(rs, base) {
		if g.Goal == gs[2].text && (g.Status != "MISSED" || g.Measured != 2.5) {
			t.Errorf("latency goal: %+v", g)
		}
	}
	var b strings.Builder
	writeGoals(&b, CheckGoals(rs[:3], base))
	if !strings.Contains(b.String(), "| <= 2.00 | not run |") {
		t.Errorf("goals table:\n%s", b.String())
	}
}

// batchedRun is a run of a few thousand messages with batched acks on a small store: with the
// small windows the publishers wait for acks, and reuse their buffers, all along.
func batchedRun(scenario string, window int) Run {
	r := tinyRun(scenario, Batched)
	r.ID += "/w" + itoa(int64(window))
	r.Load.Messages, r.Load.Window = 3001, window
	return r
}

// TestBatchedRuns runs batched acks through the engine in both flush modes, in the real
// two-process setup: every message acked and stored once (the store read back tallies the
// bodies sent: the publisher's headers change nothing of them), latencies for every ack, the
// rate compared with the fire-and-forget ceiling of the same publishers, bodies and topics; and
// once at half the rate of the sync run, as the presets measure the latency at half load. A
// message the publisher claims but never sends makes the run invalid.
func TestBatchedRuns(t *testing.T) {
	ceiling := tinyRun("ceiling-subscriber", FireAndForget)
	peak := batchedRun("engine-sync", 64)
	half := peak
	half.ID, half.RateOf, half.RateFraction = peak.ID+"@50%", peak.ID, 0.5
	lost := batchedRun("engine-sync", 64)
	lost.ID += "/publisher-skip"
	lost.Fault.PublisherSkip = 17
	lost.Stall = 300 * time.Millisecond // the target's wait for the lost message ends soon
	runs := []Run{ceiling, peak, batchedRun("engine-async", 256), half, lost}
	results, err := testRunner(t).Run(context.Background(), runs)
	if err != nil {
		t.Fatal(err)
	}
	if r := results[3]; !r.Valid || r.Run.Load.Rate != results[1].MsgsPerSec/2 || r.Latency.Count != 3001 || r.Ratio != 0 {
		t.Errorf("%s: valid %v %v, rate %g, latencies %d, ratio %g", r.Run.ID, r.Valid, r.Problems, r.Run.Load.Rate,
			r.Latency.Count, r.Ratio)
	}
	for _, r := range results[1:3] {
		if !r.Valid {
			t.Errorf("%s: invalid: %v", r.Run.ID, r.Problems)
			continue
		}
		if r.Sent != 3001 || r.Found != 3001 || r.Acked != 3001 || r.MsgsPerSec <= 0 {
			t.Errorf("%s: sent %d, found %d, acked %d, %g msgs/s", r.Run.ID, r.Sent, r.Found, r.Acked, r.MsgsPerSec)
		}
		if r.Latency.Count != 3001 || r.Latency.P50 <= 0 {
			t.Errorf("%s: latencies %+v", r.Run.ID, r.Latency)
		}
		if r.Ceiling != ceiling.ID || r.Ratio <= 0 {
			t.Errorf("%s: ceiling %q ratio %g", r.Run.ID, r.Ceiling, r.Ratio)
		}
		if e := r.Engine; e == nil || e.Records != 3001 || e.BatchedAcks == 0 || r.AckMessages == 0 || r.AckMessages > 3001 {
			t.Errorf("%s: engine %+v, %d acks received", r.Run.ID, e, r.AckMessages)
		} else {
			t.Logf("%s: %.0f msgs/s, %d acks, %d resent, p50 %s, p99 %s", r.Run.ID, r.MsgsPerSec, r.AckMessages, r.Resent,
				r.Latency.P50, r.Latency.P99)
		}
	}
	if r := results[4]; r.Valid || !strings.Contains(strings.Join(r.Problems, "; "), "1 of 3001 messages missing") {
		t.Errorf("%s: valid %v, problems %v", r.Run.ID, r.Valid, r.Problems)
	}
}

// TestBatchedFailure: an engine with batched acks off refuses the protocol, every future fails,
// and the publishers say so (the runner makes the run invalid for it). In process, against
// engine.Serve on loopback.
func TestBatchedFailure(t *testing.T) {
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.ErrorLevel)
	srv, err := engine.Serve(engine.Options{Dir: t.TempDir(), Logger: log, CommitLogFileSize: 1 << 20,
		ConsumeQueueUnits: 1000, IndexSlots: 1024, IndexEntries: 4096},
		engine.NATSOptions{Listen: "127.0.0.1:-1", Subjects: []string{SubjectPrefix + ".>"}, NoBatchedAcks: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Shutdown(); err != nil {
			t.Error(err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l := Load{Publishers: 2, BodySize: 64, Topics: 3, Messages: 500, Ack: Batched, Window: 64}
	res, err := Publish(ctx, PublishConfig{URL: srv.ClientURL(), Load: l, Stall: 5 * time.Second}, log, nil)
	if err == nil || !strings.Contains(err.Error(), "batched acks (Rs-Seq) are off") {
		t.Errorf("publish: %v", err)
	}
	if res.Acked != 0 || res.AckErrors == 0 {
		t.Errorf("acked %d, failed %d", res.Acked, res.AckErrors)
	}
}
