package engine

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/rocketstore/engine/engine/api"
	"github.com/rocketstore/engine/internal/verify"
	"github.com/rocketstore/engine/stages/ingress"
)

// TestPartitionHandoff: partition 2 moves from engine A to engine B. A releases it (a request for
// it then finds no one), B takes it with A's ends and is restarted before any message of it
// arrives (the start is persisted); afterwards queue orders/2 continues on B at A's end, with no
// hole and no overlap, A keeps the history before it, and a partition-aware client reads both
// sides by offset. Nothing is lost or stored twice.
func TestPartitionHandoff(t *testing.T) {
	const moved = 2
	c := partCluster(t)
	dirA, dirB := t.TempDir(), t.TempDir()
	a := servePartitions(t, c, c.URL(0), dirA, []int{0, 1, 2, 3})
	b := servePartitions(t, c, c.URL(1), dirB, []int{4, 5, 6, 7})
	pub, err := nats.Connect(c.URL(2))
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	publish := func(from, to int) map[int]int { // message -> partition
		msgs := make([]*nats.Msg, 0, to-from)
		parts := map[int]int{}
		for n := from; n < to; n++ {
			key := fmt.Sprintf("k%d", n%40)
			m := partMsg(0, n, key)
			m.Header.Set(ingress.DefaultKeysHeader, key)
			msgs = append(msgs, m)
			parts[n] = ingress.PartitionOf(key, partCount)
		}
		for i, r := range publishPipelined(t, pub, msgs) {
			if _, err := ingress.ParseReply(r.Data); err != nil {
				t.Fatalf("message %d: %v", from+i, err)
			}
		}
		return parts
	}
	first := publish(0, 200)
	n1 := 0
	for _, p := range first {
		if p == moved {
			n1++
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), serveTimeout)
	defer cancel()
	ends, err := a.ReleasePartition(ctx, moved)
	if err != nil {
		t.Fatal(err)
	}
	if ends["orders"] != int64(n1) {
		t.Fatalf("ends %v, want orders at %d", ends, n1)
	}
	c.WaitNoInterest(ingress.PartitionSubject(ingress.DefaultPartitionPrefix, moved) + ".orders.x")
	if _, err := pub.Request(ingress.PartitionSubject(ingress.DefaultPartitionPrefix, moved)+".orders.x", nil, serveTimeout); !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("a request for the released partition: %v, want no responders", err)
	}
	if err := b.AcquirePartition(ctx, moved, ends); err != nil {
		t.Fatal(err)
	}
	// B restarts before the partition's first message: the start must survive.
	if err := b.shutdown(); err != nil {
		t.Fatal(err)
	}
	b = servePartitions(t, c, c.URL(1), dirB, []int{2, 4, 5, 6, 7})
	second := publish(200, 400)
	n2 := 0
	for _, p := range second {
		if p == moved {
			n2++
		}
	}

	queue := func(s *served) QueueOffsets { return ordersQueue(t, s.Engine, moved) }
	if qa, qb := queue(a), queue(b); qa.Min != 0 || qa.Max != int64(n1) || qb.Min != int64(n1) || qb.Max != int64(n1+n2) {
		t.Fatalf("queue %d: A [%d, %d), B [%d, %d); want [0, %d) and [%d, %d)", moved, qa.Min, qa.Max, qb.Min, qb.Max, n1, n1, n1+n2)
	}
	// Every message once, in order per key, over both engines' parts of the queue.
	checkStoredOnce(t, 400, a, b)

	nc, err := nats.Connect(c.URL(2))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	cl := api.NewClient(nc, api.WithPartitions(partCount))
	for _, off := range []int64{0, int64(n1) - 1, int64(n1), int64(n1 + n2 - 1)} {
		r, err := cl.Get(ctx, api.GetRequest{Topic: "orders", QueueID: moved, Offset: off, Max: 1})
		if err != nil {
			t.Fatal(err)
		}
		if r.Status != api.StatusFound || len(r.Messages) != 1 || r.Messages[0].QueueOffset != off {
			t.Fatalf("get queue %d offset %d: %+v", moved, off, r)
		}
	}
	offs, err := cl.OffsetsAll(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range offs.Queues {
		if q.QueueID == moved && (q.MinOffset != 0 || q.MaxOffset != int64(n1+n2)) {
			t.Fatalf("fan-out offsets of queue %d: %+v", moved, q)
		}
	}
}

// TestStartQueue: a queue started above 0 takes that offset first, also after a restart before
// its first message (the start is persisted), and is readable from there on; a queue this engine
// already has can only "start" where it ends.
func TestStartQueue(t *testing.T) {
	dir := t.TempDir()
	e := mustOpen(t, testOptions(t, dir))
	ctx := context.Background()
	put := func(e *Engine, q int32) Result {
		t.Helper()
		rs, err := e.Put(ctx, Message{Topic: "t", QueueID: q, Body: []byte("x")})
		if err != nil || rs[0].Err != nil {
			t.Fatalf("put: %v %+v", err, rs)
		}
		return rs[0]
	}
	for range 3 {
		put(e, 0)
	}
	if err := e.StartQueue(ctx, "t", 0, 5); err == nil {
		t.Fatal("a queue that ends at 3 started at 5")
	}
	if err := e.StartQueue(ctx, "t", 0, 3); err != nil {
		t.Fatalf("start where it ends: %v", err)
	}
	if err := e.StartQueue(ctx, "t", 1, 1000); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e = mustOpen(t, testOptions(t, dir))
	if r := put(e, 1); r.QueueOffset != 1000 {
		t.Fatalf("first offset of the started queue: %d", r.QueueOffset)
	}
	if r := put(e, 0); r.QueueOffset != 3 {
		t.Fatalf("queue 0 went on at %d", r.QueueOffset)
	}
	if err := e.WaitDispatched(ctx, e.Offsets().Written); err != nil {
		t.Fatal(err)
	}
	qs, err := e.QueueOffsets("t")
	if err != nil {
		t.Fatal(err)
	}
	if len(qs) != 2 || qs[1].Min != 1000 || qs[1].Max != 1001 {
		t.Fatalf("offsets %+v", qs)
	}
	got, err := e.Get(ctx, GetRequest{Topic: "t", QueueID: 1, Offset: 0, Max: 10, MaxBytes: 1 << 20})
	if err != nil || got.NextOffset != 1000 {
		t.Fatalf("get below the start: %+v, %v", got, err)
	}
	got, err = e.Get(ctx, GetRequest{Topic: "t", QueueID: 1, Offset: 1000, Max: 10, MaxBytes: 1 << 20})
	if err != nil || len(got.Messages) != 1 || got.Messages[0].QueueOffset != 1000 {
		t.Fatalf("get at the start: %+v, %v", got, err)
	}
	// A queue that starts above 0 is a consistent store (its first file holds blank units
	// before the start, as RocketMQ writes them).
	o := testOptions(t, dir)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := verify.Verify(ctx, verify.Options{Dir: dir, CommitLogFileSize: o.CommitLogFileSize,
		ConsumeQueueUnits: o.ConsumeQueueUnits, IndexSlots: o.IndexSlots, IndexEntries: o.IndexEntries})
	if err != nil || len(r.Problems) != 0 {
		t.Fatalf("verify: %v, %+v", err, r.Problems)
	}
}

// TestStartQueueAtCommitLogStart: a queue started above 0 on a fresh engine, whose first
// message is the CommitLog's first record (offset 0, no tags: its unit is {0, size, 0}, as the
// blank units before it but for the size), reads from its start: its first message is not taken
// for a blank unit, neither while running nor after a restart, nor by the time search.
func TestStartQueueAtCommitLogStart(t *testing.T) {
	dir := t.TempDir()
	e := mustOpen(t, testOptions(t, dir))
	ctx := context.Background()
	if err := e.StartQueue(ctx, "t", 0, 1000); err != nil {
		t.Fatal(err)
	}
	for i, want := range []int64{1000, 1001} {
		rs, err := e.Put(ctx, Message{Topic: "t", QueueID: 0, Body: []byte{'a' + byte(i)}})
		if err != nil || rs[0].Err != nil || rs[0].QueueOffset != want || i == 0 && rs[0].PhysOffset != 0 {
			t.Fatalf("put %d: %v %+v", i, err, rs)
		}
	}
	if err := e.WaitDispatched(ctx, e.Offsets().Written); err != nil {
		t.Fatal(err)
	}
	check := func(e *Engine, when string) {
		t.Helper()
		qs, err := e.QueueOffsets("t")
		if err != nil || len(qs) != 1 || qs[0].Min != 1000 || qs[0].Max != 1002 {
			t.Fatalf("%s: offsets %+v, %v; want [1000, 1002)", when, qs, err)
		}
		got, err := e.Get(ctx, GetRequest{Topic: "t", QueueID: 0, Offset: 1000, Max: 10, MaxBytes: 1 << 20})
		if err != nil || len(got.Messages) != 2 || string(got.Messages[0].Body) != "a" || got.Messages[0].QueueOffset != 1000 {
			t.Fatalf("%s: get at the start: %+v, %v", when, got, err)
		}
		if off, err := e.OffsetForTime("t", 0, 0); err != nil || off != 1000 {
			t.Fatalf("%s: offset for time 0: %d, %v; want 1000", when, off, err)
		}
	}
	check(e, "running")
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e = mustOpen(t, testOptions(t, dir))
	check(e, "after a restart")
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	o := testOptions(t, dir)
	r, err := verify.Verify(ctx, verify.Options{Dir: dir, CommitLogFileSize: o.CommitLogFileSize,
		ConsumeQueueUnits: o.ConsumeQueueUnits, IndexSlots: o.IndexSlots, IndexEntries: o.IndexEntries})
	if err != nil || len(r.Problems) != 0 {
		t.Fatalf("verify: %v, %+v", err, r.Problems)
	}
}

// TestSyncAsync: Sync makes an async engine durable at once, without waiting for its thorough
// flush (set to an hour here).
func TestSyncAsync(t *testing.T) {
	opts := testOptions(t, t.TempDir())
	opts.FlushMode, opts.FlushThoroughInterval = FlushAsync, time.Hour
	e := mustOpen(t, opts)
	defer e.Close()
	ctx, cancel := context.WithTimeout(context.Background(), serveTimeout)
	defer cancel()
	if _, err := e.Put(ctx, Message{Topic: "t", Body: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	if err := e.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if o := e.Offsets(); o.Durable != o.Written || o.Written == 0 {
		t.Fatalf("offsets %+v", o)
	}
}

// TestPartitionHandoffUnderLoad: partition 2 moves from A to B while a publisher keeps
// publishing to it (requests retried with their Nats-Msg-Id while the partition has no
// owner). Every acknowledged message is stored exactly once, over A and B, with no hole and no
// overlap in the queue's offsets.
func TestPartitionHandoffUnderLoad(t *testing.T) {
	const moved, n = 2, 600
	c := partCluster(t)
	a := servePartitions(t, c, c.URL(0), t.TempDir(), []int{0, 1, 2, 3})
	b := servePartitions(t, c, c.URL(1), t.TempDir(), []int{4, 5, 6, 7})
	var keys []string
	for k := 0; len(keys) < 10; k++ {
		if key := fmt.Sprintf("h%d", k); ingress.PartitionOf(key, partCount) == moved {
			keys = append(keys, key)
		}
	}
	nc, err := nats.Connect(c.URL(2))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	half := make(chan struct{})
	done := make(chan map[string]bool, 1)
	go func() {
		acked := map[string]bool{}
		for i := range n {
			if i == n/3 {
				close(half)
			}
			m := partMsg(0, i, keys[i%len(keys)])
			requestRetrying(t, nc, m)
			acked[m.Header.Get(nats.MsgIdHdr)] = true
		}
		done <- acked
	}()
	<-half
	ctx, cancel := context.WithTimeout(context.Background(), serveTimeout)
	defer cancel()
	ends, err := a.ReleasePartition(ctx, moved)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.AcquirePartition(ctx, moved, ends); err != nil {
		t.Fatal(err)
	}
	var acked map[string]bool
	select {
	case acked = <-done:
	case <-ctx.Done():
		t.Fatal("the publisher did not finish")
	}
	seen := countStored(t, a, b)
	var spans [][2]int64
	for _, s := range []*served{a, b} {
		q := ordersQueue(t, s.Engine, moved)
		spans = append(spans, [2]int64{q.Min, q.Max})
	}
	if len(spans) != 2 || spans[0][0] != 0 || spans[0][1] != ends["orders"] || spans[1][0] != ends["orders"] || spans[1][1] != n {
		t.Fatalf("queue %d: A %v, B %v, ends %v; want [0, end) and [end, %d)", moved, spans[0], spans[1], ends, n)
	}
	for id := range acked {
		if seen[id] != 1 {
			t.Fatalf("acknowledged %s stored %d times", id, seen[id])
		}
	}
	if len(seen) != n {
		t.Fatalf("%d messages stored, %d acknowledged", len(seen), len(acked))
	}
}
