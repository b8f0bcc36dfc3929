package ingress

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/rocketstore/engine/stages"
	"github.com/rocketstore/engine/stages/ingress/batched"
	"github.com/rocketstore/engine/stages/ingress/route"
)

// roundRobinLimits are the counter positions where a narrower counter would wrap or turn
// negative: 2^31 (int32) and 2^32 (uint32).
var roundRobinLimits = []uint64{1 << 31, 1 << 32}

// TestRoundRobinWrapThroughIngress: through a real NATS server, with the topic's counter just
// below each limit, plain messages and packs without a queue key (onPack's sticky queue) are
// stored in queues [0, 4), each plain message in the next queue and each pack's entries together
// in one queue.
func TestRoundRobinWrapThroughIngress(t *testing.T) {
	b := newBatchedHarness(t, batched.Config{})
	const queues, plain, packs, perPack = 4, 8, 3, 5
	subject := "orders.wrap"
	stored := 0
	for li, limit := range roundRobinLimits {
		b.in.router.SetRoundRobin(subject, limit-plain/2)
		first := int32((limit - plain/2) % queues)
		for i := range plain {
			ack, err := b.request(&nats.Msg{Subject: subject, Data: []byte("m")})
			if err != nil {
				t.Fatalf("limit %d, message %d: %v", limit, i, err)
			}
			if want := (first + int32(i)) % queues; ack.QueueID != want {
				t.Fatalf("limit %d, message %d: queue %d, want %d", limit, i, ack.QueueID, want)
			}
		}
		stored += plain
		b.in.router.SetRoundRobin(subject, limit-1) // the packs take limit-1, limit, limit+1
		var entries []packEntry
		for range perPack {
			entries = append(entries, packEntry{data: "p"})
		}
		for p := range packs {
			stream := fmt.Sprintf("W%d", li)
			m := packMsg(subject, fmt.Sprintf("%s %d 0", stream, 1+p*perPack), fmt.Sprint(perPack), appendPack(nil, entries...))
			m.Reply = b.inbox + "." + stream
			if err := b.pub.PublishMsg(m); err != nil {
				t.Fatal(err)
			}
			for a := b.next(); a.Through < uint64((p+1)*perPack); a = b.next() {
				if len(a.Refused) > 0 {
					t.Fatalf("limit %d, pack %d: refused %+v", limit, p, a.Refused)
				}
			}
		}
		stored += packs * perPack
		b.app.wait(t, int64(stored))
		recs := b.app.snapshot()
		packed := recs[len(recs)-packs*perPack:]
		for p := range packs {
			want := int32((limit - 1 + uint64(p)) % queues)
			for _, r := range packed[p*perPack : (p+1)*perPack] {
				if q := r.rec.QueueID; q != want {
					t.Fatalf("limit %d, pack %d: an entry in queue %d, want %d", limit, p, q, want)
				}
			}
		}
	}
}

// TestQueuesPerTopicBound: queue ids are Java ints on disk (QUEUEID), so a queue count beyond
// MaxInt32 is refused by New instead of wrapping in the router (2^32 queues made it divide by
// zero at the first message, 2^31 made every queue id negative); at MaxInt32 the round-robin and
// the key hash stay in range, at the counter's limits too.
func TestQueuesPerTopicBound(t *testing.T) {
	for _, n := range []int{math.MaxInt32 + 1, 1 << 32, math.MaxInt64} {
		if _, err := New(Config{Conn: &nats.Conn{}, Out: make(chan *stages.Batch), QueuesPerTopic: n}); err == nil ||
			!strings.Contains(err.Error(), "queues per topic") {
			t.Errorf("QueuesPerTopic %d: %v, want refused", n, err)
		}
	}
	r := route.NewRouter(route.Mapping{}, MaxQueuesPerTopic, "Rmq-Keys", 64, nil)
	rt := r.Route("orders")
	for _, start := range []uint64{0, 1<<31 - 4, 1<<32 - 4, math.MaxUint64 - 4} {
		r.SetRoundRobin("orders", start)
		for range 8 {
			if q := r.NextQueue(rt); q < 0 || q >= MaxQueuesPerTopic {
				t.Fatalf("from %d: queue %d", start, q)
			}
		}
	}
	for _, key := range []string{"a", "polygenelubricants", "zz"} {
		if q := route.HashQueue(key, MaxQueuesPerTopic); q < 0 {
			t.Fatalf("route.HashQueue(%q) = %d", key, q)
		}
	}
}
