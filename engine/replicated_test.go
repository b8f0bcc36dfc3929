package engine

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rocketstore/engine/engine/monitor"
	"github.com/rocketstore/engine/internal/natstest"
	"github.com/rocketstore/engine/stages/ingress/replicated"
	"github.com/rocketstore/engine/stages/ingress/route"
)

// Replicated mode (docs/SCALE-OUT.md): R3 JetStream streams per partition in front of two
// engines that share each partition's pinned consumer.

const replParts = 4

// replStored reads what e holds of topic orders: by (queue, offset), the message's id.
func replStored(t *testing.T, e *Engine) map[[2]int64]string {
	t.Helper()
	out := map[[2]int64]string{}
	for k, m := range replRecords(t, e) {
		out[k] = m.UniqKey
	}
	return out
}

// replProps is, by (queue, offset), what e stored of a message but its body and CommitLog
// position: its id, store time and properties (but the whole-record CRC, which covers the
// CommitLog position).
func replProps(t *testing.T, e *Engine) map[[2]int64]string {
	t.Helper()
	out := map[[2]int64]string{}
	for k, m := range replRecords(t, e) {
		props := maps.Clone(m.Properties)
		delete(props, "__CRC32#")
		out[k] = fmt.Sprintf("%s %d %v", m.UniqKey, m.StoreTimestamp, props)
	}
	return out
}

// replRecords reads what e holds of topic orders, by (queue, offset).
func replRecords(t *testing.T, e *Engine) map[[2]int64]ReadMessage {
	t.Helper()
	out := map[[2]int64]ReadMessage{}
	ctx, cancel := context.WithTimeout(context.Background(), serveTimeout)
	defer cancel()
	qs, err := e.QueueOffsets("orders")
	if err != nil {
		return out
	}
	for _, q := range qs {
		for off := q.Min; off < q.Max; {
			res, err := e.Get(ctx, GetRequest{Topic: "orders", QueueID: q.QueueID, Offset: off, Max: 1024, MaxBytes: 8 << 20})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Messages) == 0 {
				t.Fatalf("queue %d: nothing at %d below its max %d", q.QueueID, off, q.Max)
			}
			for _, m := range res.Messages {
				out[[2]int64{int64(m.QueueID), m.QueueOffset}] = m
			}
			off = res.NextOffset
		}
	}
	return out
}

// storedCount is how many messages e holds in topic orders.
func storedCount(e *Engine) int64 {
	qs, err := e.QueueOffsets("orders")
	if err != nil {
		return 0
	}
	var n int64
	for _, q := range qs {
		n += q.Max - q.Min
	}
	return n
}

// waitReplStarted waits until every engine's partitions are open and spread.
func waitReplStarted(t *testing.T, ss ...*served) {
	t.Helper()
	deadline := time.After(serveTimeout)
	for _, s := range ss {
		select {
		case <-s.ReplicatedStarted():
		case <-deadline:
			t.Fatalf("replicated mode not started: %v", s.Ingress().ReplicatedReady())
		}
	}
}

// TestReplicatedFailover: two engines share every partition's pinned consumer; publishers get
// JetStream's acks. The pinned engine is killed: after the pin's TTL the other one takes its
// partitions, reads what it had not stored from the stream, and goes on; then one of the three
// NATS servers is killed and publishing goes on. In the end the surviving engine holds every
// acknowledged message exactly once, each queue without a hole, each key in publish order; and
// what the killed engine had stored sits at the same queue offsets in both stores.
func TestReplicatedFailover(t *testing.T) {
	const perPhase, keys = 300, 30
	dest, err := route.PartitionMapping(route.DefaultPartitionPrefix, replParts, partSource)
	if err != nil {
		t.Fatal(err)
	}
	c := natstest.StartJetStreamCluster(t, 3, map[string]string{partSource: dest})
	all := make([]int, replParts)
	for p := range all {
		all[p] = p
	}
	serveRepl := func(url, dir, consumer, name string) *served {
		opts := testOptions(t, dir)
		return serve(t, opts, NATSOptions{URL: url, TopicTokens: 1, NoReadAPI: true,
			Partitions: &route.Partitions{Count: replParts, Owned: all},
			Replicated: &replicated.Config{Consumer: consumer, PinnedTTL: time.Second, AckWait: 2 * time.Second,
				Name: name, Heartbeat: 100 * time.Millisecond}})
	}
	dirA, dirB := t.TempDir(), t.TempDir()
	a := serveRepl(c.URL(0), dirA, "", "a")
	b := serveRepl(c.URL(1)+","+c.URL(2), dirB, "", "b")
	// A hot standby: a consumer of its own, so it takes every partition all along.
	hot := serveRepl(c.URL(2)+","+c.URL(1), t.TempDir(), "hot-standby", "hot")
	waitReplStarted(t, a, b, hot)

	nc, err := nats.Connect(c.URL(2)+","+c.URL(1), nats.DontRandomize(), nats.MaxReconnects(-1),
		nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), serveTimeout)
	defer cancel()
	acked := map[string]string{} // id -> key
	publish := func(from, to int) {
		t.Helper()
		for n := from; n < to; n++ {
			key := fmt.Sprintf("k%d", n%keys)
			m := nats.NewMsg("orders." + key)
			id := fmt.Sprintf("m-%d", n)
			m.Header.Set(nats.MsgIdHdr, id)
			m.Data = []byte(strconv.Itoa(n))
			// One at a time: a publish that fails (a server going) is retried with its id, and
			// JetStream's dedupe keeps one copy.
			for attempt := 0; ; attempt++ {
				actx, acancel := context.WithTimeout(ctx, 2*time.Second) // a server may be gone
				_, err := js.PublishMsg(actx, m)
				acancel()
				if err == nil {
					break
				} else if attempt == 50 {
					t.Fatalf("publish %s: %v", id, err)
				}
			}
			acked[id] = key
		}
	}
	waitStored := func(s *served, want int64) {
		t.Helper()
		c.WaitFor(fmt.Sprintf("%d messages stored", want), func() bool { return storedCount(s.Engine) >= want })
	}
	total := func() int64 { return storedCount(a.Engine) + storedCount(b.Engine) }

	publish(0, perPhase)
	c.WaitFor("the first messages stored", func() bool { return total() >= perPhase })
	// Kill whichever holds the most (the pinned one, for most partitions).
	victim, survivor, victimDir := a, b, dirA
	if storedCount(b.Engine) > storedCount(a.Engine) {
		victim, survivor, victimDir = b, a, dirB
	}
	if err := victim.Abort(); err != nil {
		t.Fatal(err)
	}
	publish(perPhase, 2*perPhase)
	waitStored(survivor, 2*perPhase)
	// One NATS server goes (not the survivor's, nor the publisher's first).
	dead := 0
	if survivor == a {
		dead = 1
	}
	c.Kill(dead)
	publish(2*perPhase, 3*perPhase)
	waitStored(survivor, 3*perPhase)

	if p := monitor.NATSStatus(survivor.Server).Partitions; p == nil || p.Mode != "replicated" || len(p.Floors) != replParts {
		t.Fatalf("status partitions %+v", p)
	}
	got := replStored(t, survivor.Engine)
	seen := map[string]bool{}
	lastOf := map[string]int{} // key -> last n, in queue order
	for q := range int64(replParts) {
		for off := int64(0); ; off++ {
			id, ok := got[[2]int64{q, off}]
			if !ok {
				break
			}
			if seen[id] {
				t.Fatalf("%s stored twice", id)
			}
			seen[id] = true
			n, _ := strconv.Atoi(strings.TrimPrefix(id, "m-"))
			key := acked[id]
			if route.PartitionOf(key, replParts) != int(q) {
				t.Fatalf("%s (key %s) in queue %d", id, key, q)
			}
			if prev, ok := lastOf[key]; ok && n <= prev {
				t.Fatalf("key %s: message %d after %d", key, n, prev)
			}
			lastOf[key] = n
		}
	}
	if len(seen) != len(got) {
		t.Fatalf("%d messages, %d at contiguous offsets from 0: a hole", len(got), len(seen))
	}
	for id := range acked {
		if !seen[id] {
			t.Fatalf("acknowledged %s is not stored", id)
		}
	}

	// The hot standby holds the same, at the same queue offsets, with the same properties
	// (not the pin the server gave each consumer's engine).
	waitStored(hot, 3*perPhase)
	if theirs := replStored(t, hot.Engine); !maps.Equal(theirs, got) {
		t.Fatalf("the hot standby holds %d messages, the survivor %d, not at the same offsets", len(theirs), len(got))
	}
	mine, hots := replProps(t, survivor.Engine), replProps(t, hot.Engine)
	for k, v := range mine {
		if hots[k] != v {
			t.Fatalf("queue %d offset %d: %s in the survivor, %s in the hot standby", k[0], k[1], v, hots[k])
		}
	}

	// The killed engine's store, reopened: every message it holds is where the survivor has it.
	if err := survivor.shutdown(); err != nil {
		t.Fatal(err)
	}
	e := mustOpen(t, testOptions(t, victimDir))
	defer e.Close()
	theirs := replStored(t, e)
	if len(theirs) == 0 {
		t.Fatal("the killed engine had stored nothing")
	}
	for k, id := range theirs {
		if got[k] != id {
			t.Fatalf("queue %d offset %d: %s in the killed engine, %s in the survivor", k[0], k[1], id, got[k])
		}
	}
	t.Logf("killed engine held %d, survivor %d; consistent", len(theirs), len(got))
}
