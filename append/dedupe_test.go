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
		if d := newDedupe(c.window, c.max, true); d != nil {
			t.Errorf("newDedupe(%v, %d) = %v, want nil (off)", c.window, c.max, d)
		}
	}
	var d *dedupe
	if d.Len() != 0 {
		t.Fatal("nil dedupe has a length")
	}
}

// TestDedupeRing wraps the ring several times, without a store to look ids up in, and checks
// after every round (a put and a trim) that exactly the newest max ids are remembered, in the
// map and in the ring, and that those dropped within their window are counted.
func TestDedupeRing(t *testing.T) {
	const bound = 5
	d := newDedupe(time.Hour, bound, false)
	now := time.Unix(1000, 0)
	key := func(i int) dedupeKey { return dedupeKey{"T", fmt.Sprint(i)} }
	for i := range 23 {
		d.put(key(i), dedupeEntry{phys: int64(i) * 100, queueOffset: int64(i)}, now, int64(i+1)*100)
		d.trim(now, 0)
		if want := min(i+1, bound); d.Len() != want || len(d.m) != want {
			t.Fatalf("after %d puts: Len %d, map %d, want %d", i+1, d.Len(), len(d.m), want)
		}
		if want := int64(max(i+1-bound, 0)); d.early != want || (want > 0 && d.forgot != want) {
			t.Fatalf("after %d puts: %d dropped early (newest %d), want %d", i+1, d.early, d.forgot, want)
		}
		for j := 0; j <= i; j++ {
			e, ok := d.get(key(j))
			if want := j > i-bound; ok != want {
				t.Fatalf("after put %d: id %d remembered=%v, want %v", i, j, ok, want)
			}
			if ok && (e.phys != int64(j)*100 || e.queueOffset != int64(j)) {
				t.Fatalf("id %d: entry %+v", j, e)
			}
		}
	}
	if d.mustLookUp(0, now) {
		t.Fatal("no store to look in, yet a lookup is asked for")
	}
	// Every slot outside [head, head+n) is cleared, so the ring pins no keys.
	for i := range d.ring {
		if (i-d.head+len(d.ring))%len(d.ring) >= d.n && d.ring[i] != (dedupeSlot{}) {
			t.Fatalf("free slot %d holds %+v", i, d.ring[i])
		}
	}
}

// TestDedupeEvictsOnlyDispatched: with a store to look ids up in, an id leaves memory past the
// bound only once dispatch has passed its record (else the IndexFile could not have it), need
// says how far dispatch must be before a round, the ids past the soft bound are checked (looked
// up by ingress) once dispatched, and a record not in memory must be looked up by the writer
// only when an id after its producer's stamp was dropped within its window.
func TestDedupeEvictsOnlyDispatched(t *testing.T) {
	const bound = 4 // soft bound 3
	d := newDedupe(time.Minute, bound, true)
	now := time.Unix(1000, 0)
	key := func(i int) dedupeKey { return dedupeKey{"T", fmt.Sprint(i)} }
	if got := d.need(3); got != 0 {
		t.Fatalf("need before anything: %d", got)
	}
	for i := range 8 { // ids 1..8 (sequences), records ending at 100, 200, ... 800
		d.put(key(i+1), dedupeEntry{}, now, int64(i+1)*100)
	}
	if got := d.need(0); got != 400 {
		t.Fatalf("need with 8 held: %d, want 400 (the 4th oldest's end)", got)
	}
	if got := d.need(100); got != 800 {
		t.Fatalf("need for a round of 100 ids: %d, want 800 (all held)", got)
	}
	d.trim(now, 250)
	if d.Len() != 6 || d.early != 2 || d.forgot != 2 || d.checked != 2 {
		t.Fatalf("dispatched to 250: Len %d, early %d, forgot %d, checked %d; want 6, 2, 2, 2", d.Len(), d.early, d.forgot, d.checked)
	}
	if _, ok := d.get(key(3)); !ok {
		t.Fatal("id 3 left memory before dispatch passed it")
	}
	d.trim(now, 1000)
	if d.Len() != bound || d.forgot != 4 || d.checked != 5 || d.checkedUntil != now.Add(time.Minute).UnixNano() {
		t.Fatalf("all dispatched: Len %d, forgot %d, checked %d (until %d); want 4, 4, 5 (the soft bound)",
			d.Len(), d.forgot, d.checked, d.checkedUntil)
	}
	for stamp, want := range map[int64]bool{0: true, 3: true, 4: false, 5: false} {
		if got := d.mustLookUp(stamp, now); got != want {
			t.Errorf("stamp %d: lookup %v, want %v", stamp, got, want)
		}
	}
	if d.mustLookUp(0, now.Add(time.Minute+1)) {
		t.Error("a lookup past the window of every id dropped")
	}
}

func TestDedupeExpire(t *testing.T) {
	d := newDedupe(10*time.Second, 100, false)
	base := time.Unix(1000, 0)
	for i := range 10 { // one id a second
		d.put(dedupeKey{"T", fmt.Sprint(i)}, dedupeEntry{}, base.Add(time.Duration(i)*time.Second), 0)
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
	d.put(dedupeKey{"T", "x"}, dedupeEntry{size: 7}, base.Add(time.Hour), 0)
	if e, ok := d.get(dedupeKey{"T", "x"}); !ok || e.size != 7 {
		t.Fatalf("after refill: %+v %v", e, ok)
	}
}

func TestDedupeKeyScopesByTopic(t *testing.T) {
	d := newDedupe(time.Hour, 10, false)
	now := time.Unix(0, 0)
	d.put(dedupeKey{"A", "id"}, dedupeEntry{phys: 1}, now, 0)
	if _, ok := d.get(dedupeKey{"B", "id"}); ok {
		t.Fatal("id of topic A found in topic B")
	}
	// "A"+"Bid" and "AB"+"id" must not collide either.
	d.put(dedupeKey{"A", "Bid"}, dedupeEntry{phys: 2}, now, 0)
	if _, ok := d.get(dedupeKey{"AB", "id"}); ok {
		t.Fatal("keys collide across the topic/id boundary")
	}
}
