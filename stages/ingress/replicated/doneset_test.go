package replicated

import (
	"math/rand/v2"
	"testing"
)

// TestPartitionSkipsAGapAsOneRange: while sequence 1 is in flight (taken, not yet durable), the
// stream skips a run of sequences (a purge, a deletion): marking it done must cost the same
// whatever its length, up to a gap of 2^40, and the floor must then pass over it at once when
// sequence 1 is done. Before ranges were kept, one entry per skipped sequence was made: a gap
// of 2^20 took 2^20 map entries, a purge of 10^8 messages gigabytes.
func TestPartitionSkipsAGapAsOneRange(t *testing.T) {
	for _, gap := range []uint64{1 << 20, 1 << 40} {
		// Two partitions, each with 1 in flight: AllocsPerRun runs the skip once to warm up,
		// then once measured, each time on a partition that never saw the gap.
		parts := []*Partition{newPartition(nil, 0), newPartition(nil, 0)}
		next := 0
		allocs := testing.AllocsPerRun(1, func() {
			parts[next].skipRange(2, gap+1)
			next++
		})
		if allocs > 2 {
			t.Fatalf("a gap of %d sequences behind one in flight took %v allocations", gap, allocs)
		}
		rp := parts[1]
		if rp.Floor() != 0 {
			t.Fatalf("floor %d with sequence 1 in flight", rp.Floor())
		}
		rp.DoneOne(gap+3, nil) // gap+2 in flight, gap+3 done
		rp.DoneOne(1, nil)
		if rp.Floor() != gap+1 {
			t.Fatalf("floor %d once 1 was done, want %d: past the gap, below the one in flight", rp.Floor(), gap+1)
		}
		rp.DoneOne(gap+2, nil)
		if rp.Floor() != gap+3 {
			t.Fatalf("floor %d, want %d", rp.Floor(), gap+3)
		}
		if n := rp.done.pending(); n != 0 {
			t.Fatalf("%d entries left above the floor", n)
		}
	}
}

// TestDoneSetMatchesModel runs random interleavings of sequences done out of order and skipped
// runs (as the partition's loop makes them: in sequence order, each sequence once) against a
// model that marks every sequence, and checks the floor after every step and that nothing is
// left above it.
func TestDoneSetMatchesModel(t *testing.T) {
	for seed := range uint64(200) {
		rnd := rand.New(rand.NewPCG(seed, 7))
		var s doneSet
		start := rnd.Uint64N(1 << 50)
		s.reset(start)
		done := map[uint64]bool{}
		var taken []uint64 // in flight: taken, not done yet
		next := start + 1
		for range 300 {
			switch op := rnd.IntN(3); {
			case op == 0 || len(taken) == 0: // take sequences, perhaps after a skipped run
				if rnd.IntN(3) == 0 {
					n := 1 + rnd.Uint64N(5)
					s.skip(next, next+n-1)
					for x := next; x < next+n; x++ {
						done[x] = true
					}
					next += n
				}
				taken = append(taken, next)
				next++
			default: // one in flight is done
				i := rnd.IntN(len(taken))
				seq := taken[i]
				taken = append(taken[:i], taken[i+1:]...)
				s.add(seq, nil)
				done[seq] = true
			}
			s.advance()
			want := start
			for done[want+1] {
				want++
			}
			if s.floor != want {
				t.Fatalf("seed %d: floor %d, want %d", seed, s.floor-start, want-start)
			}
		}
		for _, seq := range taken {
			s.add(seq, nil)
		}
		s.advance()
		if s.floor != next-1 || s.pending() != 0 {
			t.Fatalf("seed %d: all done: floor %d, want %d, %d entries left", seed, s.floor-start, next-1-start, s.pending())
		}
	}
}
