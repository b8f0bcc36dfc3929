package publisher_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/rocketstore/engine/engine"
	"github.com/rocketstore/engine/engine/publisher"
	"github.com/rocketstore/engine/internal/wire"
)

// TestStreamAtMaxSeq: a stream started just below the last sequence (WithFirstSeq, the seam)
// numbers its messages up to 2^63-1, alone and in packs, and the engine stores each once; the
// Publish after the last is refused with ErrStreamExhausted, nothing sent (a sequence of 2^63, or
// a pack running past it, is malformed to the engine, whose refusal failed every message in
// flight).
func TestStreamAtMaxSeq(t *testing.T) {
	s := serve(t, testOptions(t, t.TempDir(), engine.FlushSync), engine.NATSOptions{})
	for _, maxPack := range []int{1, 0} {
		nc := connect(t, s.ClientURL())
		const n = 6
		opts := publisher.Options{MaxPack: maxPack, Linger: time.Hour}
		p := newPublisher(t, nc, publisher.WithFirstSeq(opts, publisher.MaxSeq-n+1))
		subject := fmt.Sprintf("limits.seq%d", maxPack)
		msgs := publishN(t, p, n, 16, func(int) string { return subject })
		if _, err := p.Publish(context.Background(), subject, []byte("one too many"), nil); !errors.Is(err, publisher.ErrStreamExhausted) {
			t.Fatalf("MaxPack %d: the Publish after 2^63-1: %v", maxPack, err)
		}
		flush(t, p)
		for i, m := range msgs {
			a, err, _ := m.future.Result()
			if err != nil || a.Seq != publisher.MaxSeq-n+1+uint64(i) {
				t.Fatalf("MaxPack %d: message %d: %+v, %v", maxPack, i, a, err)
			}
		}
		if st := p.Stats(); st.Acked != n || st.Failed != 0 {
			t.Fatalf("MaxPack %d: stats %+v", maxPack, st)
		}
		checkExactlyOnce(t, s.Engine, msgs)
	}
}

// TestMaxPackHeldToEngineLimit: a MaxPack above the engine's 65,536 entries (with a window and
// a byte bound that would let a pack grow past it) is held to it, so that a full pack goes at
// MaxPackEntries and every message is stored; a pack of more was refused whole and failed every
// message. The clock is frozen, so only fullness sends a pack.
func TestMaxPackHeldToEngineLimit(t *testing.T) {
	s := serve(t, testOptions(t, t.TempDir(), engine.FlushAsync), engine.NATSOptions{})
	nc := connect(t, s.ClientURL())
	var largest atomic.Int64
	opts := publisher.Options{MaxPack: 1 << 20, MaxPackBytes: 1 << 20, Window: 1 << 17, Linger: time.Hour,
		PublishMsg: func(m *nats.Msg) error {
			largest.Store(max(largest.Load(), int64(entries(m))))
			return nc.PublishMsg(m)
		}}
	p := newPublisher(t, nc, publisher.WithClock(opts, func() time.Duration { return 0 }))
	const n = publisher.MaxPackEntries + 1
	ctx := context.Background()
	for i := range n {
		if _, err := p.Publish(ctx, "limits.pack", nil, nil); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	flush(t, p)
	if st := p.Stats(); st.Acked != n || st.Failed != 0 || largest.Load() != publisher.MaxPackEntries {
		t.Fatalf("stats %+v, the largest pack %d entries", st, largest.Load())
	}
	if publisher.MaxPackEntries != wire.MaxPackEntries {
		t.Fatalf("publisher.MaxPackEntries %d, the engine's %d", publisher.MaxPackEntries, wire.MaxPackEntries)
	}
}

// TestWindowBound: a window the ring cannot hold is refused by New (above 2^62 the ring's size
// doubled past the int's range and New never returned).
func TestWindowBound(t *testing.T) {
	s := serve(t, testOptions(t, t.TempDir(), engine.FlushAsync), engine.NATSOptions{})
	nc := connect(t, s.ClientURL())
	for _, w := range []int{publisher.MaxWindow + 1, math.MaxInt} {
		if p, err := publisher.New(nc, publisher.Options{Window: w}); err == nil {
			_ = p.Close(context.Background())
			t.Fatalf("window %d accepted", w)
		}
	}
	p := newPublisher(t, nc, publisher.Options{Window: publisher.MaxWindow, MaxPack: 1})
	if _, err := p.Publish(context.Background(), "limits.window", []byte("x"), nil); err != nil {
		t.Fatal(err)
	}
	flush(t, p)
}

// TestAckRunsAtTheLimits: acks whose runs reach far below the floor or wrap past 2^64 (count and
// step near 2^64, from a broken or hostile engine) cost no more than the window: on a stream
// started at 2^62 a run from sequence 1 walked 2^62 sequences under the publisher's lock and
// hung it. Only the run's sequences in flight are acked, at their positions.
func TestAckRunsAtTheLimits(t *testing.T) {
	s := serve(t, testOptions(t, t.TempDir(), engine.FlushAsync), engine.NATSOptions{})
	nc := connect(t, s.ClientURL())
	const first = 1 << 62
	opts := publisher.Options{MaxPack: 1, PublishMsg: func(*nats.Msg) error { return nil }} // nothing reaches the engine
	p := newPublisher(t, nc, publisher.WithFirstSeq(publisher.WithClock(opts, func() time.Duration { return 0 }), first))
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	var futs []*publisher.Future
	for i := range 4 {
		f, err := p.Publish(ctx, "limits.acks", []byte("x"), nil)
		if err != nil {
			t.Fatal(err)
		}
		if f.Seq() != first+uint64(i) {
			t.Fatalf("message %d numbered %d", i, f.Seq())
		}
		futs = append(futs, f)
	}
	ack := func(runs string) {
		t.Helper()
		body := fmt.Sprintf(`{"stream":%q,"stored":[%s],"through":0}`, p.StreamID(), runs)
		if err := nc.Publish(p.AckSubject(), []byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	run := func(seq, count, step uint64, off int64) string {
		return fmt.Sprintf(`{"topic":"limits.acks","queueId":0,"queueOffset":%d,"seq":%d,"count":%d,"step":%d}`, off, seq, count, step)
	}
	ack(run(1, first+1, 1, 0))                             // from far below the floor: acks first and first+1
	ack(run(first+2, math.MaxUint64, math.MaxUint64, 100)) // step 2^64-1: seq+k*step wraps to first+1, first...
	ack(run(first+3, math.MaxUint64, 1<<63, 200) + "," + run(0, 0, 0, 0))
	want := []int64{first - 1, first, 100, 200}
	for i, f := range futs {
		a, err := f.Wait(ctx)
		if err != nil || a.QueueOffset != want[i] {
			t.Fatalf("message %d: %+v, %v; want queue offset %d", i, a, err, want[i])
		}
	}
}
