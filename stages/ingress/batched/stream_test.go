package batched

import (
	"slices"
	"testing"

	"github.com/rocketstore/engine/internal/wire"
)

func TestSeqSet(t *testing.T) {
	s := seqSet{base: 0, max: 256}
	for _, q := range []uint64{1, 2, 3, 5, 64, 65, 130} {
		if !s.add(q) {
			t.Fatalf("add %d", q)
		}
	}
	if s.add(257) {
		t.Fatal("added beyond max")
	}
	for _, c := range []struct{ from, unset, set uint64 }{
		{1, 4, 1}, {4, 4, 5}, {5, 6, 5}, {6, 6, 64}, {64, 66, 64}, {66, 66, 130}, {131, 131, 257},
	} {
		if u := s.firstUnset(c.from); u != c.unset {
			t.Errorf("firstUnset(%d) = %d, want %d", c.from, u, c.unset)
		}
		if v := s.firstSet(c.from); v != c.set {
			t.Errorf("firstSet(%d) = %d, want %d", c.from, v, c.set)
		}
	}
	s.forget(100) // base 64: 1..64 present, 65 kept
	if s.base != 64 || !s.has(65) || s.has(66) || !s.has(130) || !s.has(3) {
		t.Fatalf("after forget: base %d, words %b", s.base, s.words)
	}
	if !s.add(64+256) || s.add(64+257) {
		t.Fatal("the reach moved with the base")
	}
	s.forget(1000)
	if s.base != 960 || len(s.words) != 0 || s.firstUnset(961) != 961 {
		t.Fatalf("after forgetting everything: base %d, words %v", s.base, s.words)
	}
}

// TestStreamState walks a stream through out-of-order outcomes, a refusal, gaps decided as
// missing, and the publisher's floor.
func TestStreamState(t *testing.T) {
	s := newStream("s", "ack", 0, 1<<10)
	store := func(seqs ...uint64) {
		for _, q := range seqs {
			s.stored(q, "t", int32(q%2), int64(q/2), false)
		}
		s.advance()
	}
	store(2, 4, 3)
	if s.through != 0 || !s.undecided() || s.maxSeen != 4 {
		t.Fatalf("through %d, max %d, undecided %v", s.through, s.maxSeen, s.undecided())
	}
	store(1)
	if s.through != 4 || s.undecided() {
		t.Fatalf("through %d after 1..4", s.through)
	}
	// Runs: queue 0 got 2 and 4 at offsets 1, 2 (step 2); queue 1 got 3, 1 at 1, 0 (not a run).
	want := []wire.StoredRun{
		{Topic: "t", QueueID: 0, QueueOffset: 1, Seq: 2, Step: 2, Count: 2},
		{Topic: "t", QueueID: 1, QueueOffset: 1, Seq: 3, Step: 1, Count: 1},
		{Topic: "t", QueueID: 1, QueueOffset: 0, Seq: 1, Step: 1, Count: 1},
	}
	if !slices.Equal(s.runs, want) {
		t.Fatalf("runs %+v\nwant %+v", s.runs, want)
	}
	s.sent()

	// 5 refused, 6 stored, 8 stored: through stops at 4 (5 refused, 7 unseen).
	s.refuse(5, wire.CodeTooLarge, "big")
	store(6, 8)
	if s.through != 4 || !s.undecided() {
		t.Fatalf("through %d, undecided %v", s.through, s.undecided())
	}
	// Markers came back for everything up to 8: 7 is missing, reported once.
	s.decided, s.decidedNew = 8, true
	if got := s.missing(nil, 10); !slices.Equal(got, [][2]uint64{{7, 7}}) {
		t.Fatalf("missing %v", got)
	}
	if got := s.missing(nil, 10); len(got) != 0 {
		t.Fatalf("reported again: %v", got)
	}
	// 7 comes (a resend): through still stops below 5, the refused one.
	store(7)
	if s.through != 4 {
		t.Fatalf("through %d", s.through)
	}
	// The publisher got the refusal: its floor passes 5.
	s.applyFloor(5)
	s.advance()
	if s.through != 8 || len(s.refused) != 0 {
		t.Fatalf("through %d, refused %v", s.through, s.refused)
	}
	// A resend of 5 that is stored after all: answered, through unchanged.
	s.sent()
	store(5)
	if s.through != 8 || len(s.runs) != 1 || s.runs[0].Seq != 5 {
		t.Fatalf("through %d, runs %+v", s.through, s.runs)
	}
	// Far ahead of MaxAhead: answered by position, not tracked.
	s.sent()
	store(8 + 5000)
	if s.through != 8 || s.maxSeen != 8 || len(s.runs) != 1 {
		t.Fatalf("through %d, max %d, runs %+v", s.through, s.maxSeen, s.runs)
	}
}
