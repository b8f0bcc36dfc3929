package stages

import (
	"slices"
	"testing"
)

// TestDispatchFeedBounds: rounds come out in order; a round that would take the feed past its
// record bound, or that finds the channel full, is dropped rather than waited for; polling
// frees room again.
func TestDispatchFeedBounds(t *testing.T) {
	f := NewDispatchFeed(5)
	round := func(phys ...int64) []Dispatched {
		r := f.Buffer()
		for _, p := range phys {
			r = append(r, Dispatched{Phys: p, Size: 1, Topic: "t"})
		}
		return r
	}
	f.Offer(round(0, 1, 2))
	f.Offer(round(3, 4, 5)) // 6 records > 5: dropped
	f.Offer(round(3, 4))
	f.Offer(round()) // empty: nothing to hand over
	if _, ok := f.Poll(); !ok {
		t.Fatal("first round missing")
	}
	f.Offer(round(5, 6, 7)) // room again: 2 + 3
	var got []int64
	for {
		r, ok := f.Poll()
		if !ok {
			break
		}
		for _, d := range r {
			got = append(got, d.Phys)
		}
		f.Recycle(r)
	}
	if want := []int64{3, 4, 5, 6, 7}; !slices.Equal(got, want) {
		t.Fatalf("records %v, want %v", got, want)
	}
	if f.held.Load() != 0 {
		t.Fatalf("held %d after draining", f.held.Load())
	}
}
