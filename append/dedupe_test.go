package appender

import (
	"fmt"
	"testing"
	"time"
)

func TestDedupeOff(t *testing.T) {
	for _, c := range []struct {
		window time.Duration
		max    int
	}{{0, 10}, {time.Minute, 0}, {-time.Second, 10}, {time.Minute, -1}} {
		if d := newDedupe(c.window, c.max); d != nil {
			t.Errorf("newDedupe(%v, %d) = %v, want nil (off)", c.window, c.max, d)
		}
	}
	var d *dedupe
	if d.Len() != 0 {
		t.Fatal("nil dedupe has a length")
	}
}

// TestDedupeRing wraps the ring several times and checks after every put that exactly the
// newest max ids are remembered, in the map and in the ring.
func TestDedupeRing(t *testing.T) {
	const max = 5
	d := newDedupe(time.Hour, max)
	now := time.Unix(1000, 0)
	key := func(i int) dedupeKey { return dedupeKey{"T", fmt.Sprint(i)} }
	for i := range 23 {
		d.put(key(i), dedupeEntry{phys: int64(i) * 100, queueOffset: int64(i)}, now)
		if want := min(i+1, max); d.Len() != want || len(d.m) != want {
			t.Fatalf("after %d puts: Len %d, map %d, want %d", i+1, d.Len(), len(d.m), want)
		}
		for j := 0; j <= i; j++ {
			e, ok := d.get(key(j))
			if want := j > i-max; ok != want {
				t.Fatalf("after put %d: id %d remembered=%v, want %v", i, j, ok, want)
			}
			if ok && (e.phys != int64(j)*100 || e.queueOffset != int64(j)) {
				t.Fatalf("id %d: entry %+v", j, e)
			}
		}
	}
	// Every slot outside [head, head+n) is cleared, so the ring pins no keys.
	for i := range d.ring {
		if (i-d.head+max)%max >= d.n && d.ring[i] != (dedupeSlot{}) {
			t.Fatalf("free slot %d holds %+v", i, d.ring[i])
		}
	}
}

func TestDedupeExpire(t *testing.T) {
	d := newDedupe(10*time.Second, 100)
	base := time.Unix(1000, 0)
	for i := range 10 { // one id a second
		d.put(dedupeKey{"T", fmt.Sprint(i)}, dedupeEntry{}, base.Add(time.Duration(i)*time.Second))
	}
	d.expire(base.Add(10 * time.Second)) // id 0 is exactly the window old: kept
	if d.Len() != 10 {
		t.Fatalf("Len %d after expiring at the window's edge", d.Len())
	}
	d.expire(base.Add(13*time.Second + time.Millisecond)) // ids 0..3 are older than the window
	if d.Len() != 6 || len(d.m) != 6 {
		t.Fatalf("Len %d, map %d, want 6", d.Len(), len(d.m))
	}
	for i := range 10 {
		if _, ok := d.get(dedupeKey{"T", fmt.Sprint(i)}); ok != (i >= 4) {
			t.Fatalf("id %d remembered=%v", i, ok)
		}
	}
	d.expire(base.Add(time.Hour))
	if d.Len() != 0 || len(d.m) != 0 {
		t.Fatalf("Len %d, map %d after everything expired", d.Len(), len(d.m))
	}
	// Still usable after emptying.
	d.put(dedupeKey{"T", "x"}, dedupeEntry{size: 7}, base.Add(time.Hour))
	if e, ok := d.get(dedupeKey{"T", "x"}); !ok || e.size != 7 {
		t.Fatalf("after refill: %+v %v", e, ok)
	}
}

func TestDedupeKeyScopesByTopic(t *testing.T) {
	d := newDedupe(time.Hour, 10)
	now := time.Unix(0, 0)
	d.put(dedupeKey{"A", "id"}, dedupeEntry{phys: 1}, now)
	if _, ok := d.get(dedupeKey{"B", "id"}); ok {
		t.Fatal("id of topic A found in topic B")
	}
	// "A"+"Bid" and "AB"+"id" must not collide either.
	d.put(dedupeKey{"A", "Bid"}, dedupeEntry{phys: 2}, now)
	if _, ok := d.get(dedupeKey{"AB", "id"}); ok {
		t.Fatal("keys collide across the topic/id boundary")
	}
}
