package lookup_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketstore/engine/engine"
	"github.com/rocketstore/engine/engine/lookup"
	"github.com/rocketstore/engine/stages/ingress/replicated"
)

// The lookups over a real engine (engine.Open, on files in a temporary directory): the store
// they read is the engine's, as Serve wires them.

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }
func finder(e *engine.Engine) lookup.Finder {
	return lookup.Finder{Store: e, Indexed: true, Written: func() int64 { return e.Offsets().Written }, Logger: zerolog.Nop()}
}

func open(t *testing.T, c *clock) *engine.Engine {
	t.Helper()
	e, err := engine.Open(engine.Options{Dir: t.TempDir(), Logger: zerolog.Nop(), CommitLogFileSize: 1 << 20,
		ConsumeQueueUnits: 1000, IndexSlots: 1024, IndexEntries: 4096, DedupeMax: -1, Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e
}

func put(t *testing.T, e *engine.Engine, msgs ...engine.Message) []engine.Result {
	t.Helper()
	res, err := e.Put(context.Background(), msgs...)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	if err := e.WaitDispatched(context.Background(), e.Offsets().Written); err != nil {
		t.Fatal(err)
	}
	return res
}

// TestFirstAndSince: with dedupe off a message id stored twice has two copies; First finds the
// first, Since the first at or after its time; an id not stored, or no IndexFile, finds nothing.
func TestFirstAndSince(t *testing.T) {
	c := &clock{t: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
	e := open(t, c)
	first := put(t, e, engine.Message{Topic: "orders", MsgID: "id-1", Body: []byte("1")})[0]
	c.add(10 * time.Second)
	second := put(t, e, engine.Message{Topic: "orders", MsgID: "id-1", Body: []byte("2")})[0]
	f := finder(e)
	if at, ok := f.First("orders", "id-1"); !ok || at.PhysOffset != first.PhysOffset || at.QueueOffset != first.QueueOffset {
		t.Fatalf("first: %+v %v, want %+v", at, ok, first)
	}
	if at, ok := f.Since("orders", "id-1", second.StoreTimestamp); !ok || at.PhysOffset != second.PhysOffset {
		t.Fatalf("since the second: %+v %v, want %+v", at, ok, second)
	}
	if _, ok := f.Since("orders", "id-1", second.StoreTimestamp+1); ok {
		t.Fatal("found a copy after the last one")
	}
	if _, ok := f.First("orders", "id-2"); ok {
		t.Fatal("found an id never stored")
	}
	f.Indexed = false
	if _, ok := f.First("orders", "id-1"); ok {
		t.Fatal("found without an IndexFile")
	}
}

// TestStoreDedupeBounds: the store dedupe exists only with dedupe and the IndexFile on, and,
// when the appender drops no ids it cannot look up (no forgotten), only while the newest
// indexed record can be within the window; its lookups look back one window.
func TestStoreDedupeBounds(t *testing.T) {
	c := &clock{t: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
	e := open(t, c)
	stored := put(t, e, engine.Message{Topic: "orders", MsgID: "id-1", Body: []byte("1")})[0]
	f, window := finder(e), 2*time.Minute
	last := stored.StoreTimestamp
	forgotten := func() (int64, int64) { return 0, 0 }
	for _, off := range []struct {
		name      string
		last      int64
		window    time.Duration
		dedupeMax int
		indexed   bool
		forgotten func() (int64, int64)
	}{
		{"no record", 0, window, 0, true, nil}, {"dedupe off", last, 0, 0, true, forgotten},
		{"no ids kept", last, window, -1, true, forgotten}, {"no IndexFile", last, window, 0, false, forgotten},
	} {
		f.Indexed = off.indexed
		if d := f.StoreDedupe(off.last, off.window, off.dedupeMax, c.now, off.forgotten); d != nil {
			t.Fatalf("%s: %+v", off.name, d)
		}
	}
	f.Indexed = true
	if d := f.StoreDedupe(0, window, 0, c.now, forgotten); d == nil || !d.RestartUntil.IsZero() {
		t.Fatalf("an empty store whose appender may drop ids: %+v", d)
	}
	c.add(90 * time.Second)
	d := f.StoreDedupe(last, window, 0, c.now, nil)
	if d == nil || !d.RestartUntil.Equal(time.UnixMilli(last).Add(window)) {
		t.Fatalf("within the window: %+v", d)
	}
	if at, ok := d.Lookup("orders", "id-1"); !ok || at.PhysOffset != stored.PhysOffset {
		t.Fatalf("lookup within the window: %+v %v", at, ok)
	}
	if at, ok := f.AppenderLookup("orders", "id-1", c.now().Add(-window).UnixMilli()); !ok || at.PhysOffset != stored.PhysOffset ||
		at.Size != stored.Size || at.QueueOffset != stored.QueueOffset || at.StoreTimestamp != stored.StoreTimestamp {
		t.Fatalf("the appender's lookup within the window: %+v %v", at, ok)
	}
	c.add(31 * time.Second) // 2 min 1 s after it: out of the window the lookups look back
	if _, ok := d.Lookup("orders", "id-1"); ok {
		t.Fatal("found a copy older than the window")
	}
	if d := f.StoreDedupe(last, window, 0, c.now, nil); d != nil {
		t.Fatalf("past the window: %+v", d)
	}
}

// TestLastStreamSeq: the highest stream sequence among the last records of a partition's queue
// in every topic; other queues and records without one do not count.
func TestLastStreamSeq(t *testing.T) {
	c := &clock{t: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
	e := open(t, c)
	seq := func(topic string, q int32, s string) engine.Message {
		m := engine.Message{Topic: topic, QueueID: q, Body: []byte(s)}
		if s != "" {
			m.Properties = map[string]string{replicated.PropStreamSeq: s}
		}
		return m
	}
	put(t, e, seq("a", 1, "5"), seq("a", 1, "9"), seq("b", 1, "7"), seq("b", 2, "40"), seq("c", 1, "12"), seq("c", 1, ""))
	if got, err := finder(e).LastStreamSeq(1); err != nil || got != 9 {
		t.Fatalf("partition 1 ends at %d (%v), want 9", got, err)
	}
	if got, err := finder(e).LastStreamSeq(2); err != nil || got != 40 {
		t.Fatalf("partition 2 ends at %d (%v), want 40", got, err)
	}
}
