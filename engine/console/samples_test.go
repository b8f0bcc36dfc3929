package console

import (
	"context"
	"testing"
	"time"

	"github.com/rocketstore/engine/engine"
	"github.com/rocketstore/engine/engine/monitor"
)

// TestRingBound: the ring keeps the last History samples, oldest first, and never more.
func TestRingBound(t *testing.T) {
	r := newRing(5)
	t0 := time.UnixMilli(1_000_000)
	for i := range 12 {
		r.add(sample{at: t0.Add(time.Duration(i) * time.Second), records: int64(i)})
		all := r.all()
		if len(all) != min(i+1, 5) {
			t.Fatalf("after %d samples: %d kept, want %d", i+1, len(all), min(i+1, 5))
		}
		for j, s := range all {
			if want := int64(i - len(all) + 1 + j); s.records != want {
				t.Fatalf("after %d samples: sample %d is %d, want %d", i+1, j, s.records, want)
			}
		}
	}
}

// TestSamplerRates: the sampler turns the engine's counters into rates per second over each
// interval: what was stored between two samples, the syncs' mean time, the read API's requests.
func TestSamplerRates(t *testing.T) {
	e := openEngine(t, nil)
	reads := int64(0)
	syncs := monitor.NewSyncMetrics()
	c := newConsole(t, Options{}, Target{Store: e, Stats: e.Stats, Syncs: syncs, ReadRequests: func() int64 { return reads }})
	t0 := time.UnixMilli(1_770_000_000_000)
	c.sampleNow(t0)
	var msgs []engine.Message
	for range 30 {
		msgs = append(msgs, engine.Message{Topic: "T", Body: make([]byte, 100)})
	}
	put(t, e, msgs...)
	reads = 8
	syncs.Observe(2*time.Millisecond, 10)
	syncs.Observe(4*time.Millisecond, 10)
	c.sampleNow(t0.Add(2 * time.Second))
	c.sampleNow(t0.Add(3 * time.Second))
	var got struct {
		IntervalMs int64 `json:"interval_ms"`
		Points     []Point
	}
	getJSON(t, c, "/console/api/samples", nil, &got)
	if len(got.Points) != 2 || got.IntervalMs != 1000 {
		t.Fatalf("points %+v", got)
	}
	p := got.Points[0]
	if p.T != t0.Add(2*time.Second).UnixMilli() || p.Messages != 15 || p.Reads != 4 || p.Bytes < 15*100 {
		t.Fatalf("first interval %+v: want 15 messages/s, 4 reads/s, over 1,500 bytes/s", p)
	}
	if p.SyncMs < 2.99 || p.SyncMs > 3.01 {
		t.Fatalf("mean sync %v ms, want 3", p.SyncMs)
	}
	if q := got.Points[1]; q.Messages != 0 || q.SyncMs != 0 {
		t.Fatalf("an idle interval %+v", q)
	}
	// since: only what came after.
	getJSON(t, c, "/console/api/samples", vals("since", "1770000002000"), &got)
	if len(got.Points) != 1 || got.Points[0].T != t0.Add(3*time.Second).UnixMilli() {
		t.Fatalf("since: %+v", got.Points)
	}
	// Run samples at every tick and stops with its context.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	ticks := make(chan time.Time) // unbuffered: a send returns once the sampler took the tick
	c2 := newConsole(t, Options{History: 3}, Target{Store: e, Stats: e.Stats})
	c2.ticks = ticks
	go func() { done <- c2.Run(ctx) }()
	for i := range 5 {
		ticks <- t0.Add(time.Duration(i) * time.Second)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := len(c2.samples.all()); n != 3 {
		t.Fatalf("%d samples kept after 5 ticks, want History 3", n)
	}
}
