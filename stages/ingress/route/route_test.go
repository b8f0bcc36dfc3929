package route

import (
	"fmt"
	"math"
	"testing"

	"github.com/nats-io/nats.go"
)

// roundRobinLimits are the counter positions where a narrower counter would wrap or turn
// negative: 2^31 (int32) and 2^32 (uint32).
var roundRobinLimits = []uint64{1 << 31, 1 << 32}

// TestRoundRobinAtCounterLimits: a topic's round-robin counter started just below 2^31 and 2^32
// keeps every queue id in [0, queues), moves to the next queue at every message and spreads the
// messages evenly across the limit, for queue counts that divide 2^32 and that do not. At 2^64,
// the counter's own wrap, the ids stay in range.
func TestRoundRobinAtCounterLimits(t *testing.T) {
	const rounds = 16 // each queue's messages on either side of the limit
	for _, queues := range []int{1, 3, 4, 7, 64} {
		for _, limit := range roundRobinLimits {
			r := NewRouter(Mapping{}, queues, "Rmq-Keys", 64, nil)
			rt := r.Route("orders")
			start := limit - rounds*uint64(queues)
			r.SetRoundRobin("orders", start)
			seen := make([]int, queues)
			want := int32(start % uint64(queues))
			for i := range 2 * rounds * queues {
				q := r.NextQueue(rt)
				if q != want {
					t.Fatalf("%d queues, %d messages before %d: queue %d, want %d", queues, rounds*queues-i, limit, q, want)
				}
				seen[q]++
				want = (want + 1) % int32(queues)
			}
			for q, n := range seen {
				if n != 2*rounds {
					t.Fatalf("%d queues across %d: queue %d got %d of %d messages", queues, limit, q, n, 2*rounds*queues)
				}
			}
		}
		r := NewRouter(Mapping{}, queues, "Rmq-Keys", 64, nil)
		rt := r.Route("orders")
		r.SetRoundRobin("orders", math.MaxUint64-uint64(rounds*queues))
		for range 2 * rounds * queues {
			if q := r.NextQueue(rt); q < 0 || q >= int32(queues) {
				t.Fatalf("%d queues across 2^64: queue %d", queues, q)
			}
		}
	}
}

func TestQueueChoice(t *testing.T) {
	r := NewRouter(Mapping{}, 4, "Rmq-Keys", 64, nil)
	rt := r.Route("orders")
	seen := map[int32]int{}
	for range 400 {
		seen[r.Queue(&nats.Msg{Subject: "orders"}, rt)]++
	}
	for q := range int32(4) {
		if seen[q] != 100 {
			t.Fatalf("round-robin uneven: %v", seen)
		}
	}
	// Keyed: Java hashCode % 4, negated when negative; first key of the header only.
	m := &nats.Msg{Subject: "orders", Header: nats.Header{"Rmq-Keys": {"  OrderID188 other"}}}
	if q := r.Queue(m, rt); q != HashQueue("OrderID188", 4) {
		t.Fatalf("keyed queue %d", q)
	}
	// "polygenelubricants".hashCode() is Integer.MIN_VALUE: % 4 is 0.
	for key, want := range map[string]int32{"a": 97 % 4, "TagA": 2598919 % 4, "polygenelubricants": 0} {
		if got := HashQueue(key, 4); got != want {
			t.Errorf("HashQueue(%q) = %d, want %d", key, got, want)
		}
	}
	for i := range 1000 {
		if q := HashQueue(fmt.Sprint("k", i, "\u00e9\U0001F600"), 7); q < 0 || q >= 7 {
			t.Fatalf("queue %d out of range", q)
		}
	}
}
