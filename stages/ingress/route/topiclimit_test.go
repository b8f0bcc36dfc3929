package route

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
)

// TestTopicSlotTakenWhenStored: a new topic of the rule takes its slot when a message of it is
// stored. Subjects whose messages are all refused leave the slots free, however many they are;
// a topic whose messages are on their way holds a reservation that counts against the limit
// until the last of them is refused, or one is stored (then the slot is its for good).
func TestTopicSlotTakenWhenStored(t *testing.T) {
	r := NewRouter(Mapping{MaxTopics: 2}, 4, "Rmq-Keys", 64, nil)
	for i := range 2 * DefaultMaxTopics {
		rt := r.Admit(r.Route(fmt.Sprintf("bad.%d", i)), 1)
		if rt.Topic == OverflowTopic {
			t.Fatalf("refused subject %d sent to the overflow topic", i)
		}
		r.Settle(rt.Topic, 1, false)
	}
	if s := r.Stats(); s.RuleTopics != 0 || s.ReservedTopics != 0 || s.Overflowed != 0 || r.Reserving() {
		t.Fatalf("after refused messages only: %+v", s)
	}

	// x: three messages on their way; y: one. z finds no room.
	x := r.Admit(r.Route("x"), 3)
	y := r.Admit(r.Route("y"), 1)
	if x.Topic != "x" || y.Topic != "y" {
		t.Fatalf("x, y: topics %s, %s", x.Topic, y.Topic)
	}
	if z := r.Admit(r.Route("z"), 1); z.Topic != OverflowTopic {
		t.Fatalf("z while x and y are reserved: topic %s, want the overflow topic", z.Topic)
	}
	r.Settle("y", 1, false) // y's only message refused: its reservation goes
	r.Settle("x", 1, false) // one of x's: x is still reserved
	if s := r.Stats(); s.RuleTopics != 0 || s.ReservedTopics != 1 {
		t.Fatalf("x reserved, y gone: %+v", s)
	}
	// z's route stays in the overflow topic; a new subject takes y's room.
	if z := r.Admit(r.Route("z"), 1); z.Topic != OverflowTopic {
		t.Fatalf("z went back to its own topic: %s", z.Topic)
	}
	if w := r.Admit(r.Route("w"), 1); w.Topic != "w" {
		t.Fatalf("w with room: topic %s", w.Topic)
	}
	r.Settle("x", 1, true)  // stored: x has its slot
	r.Settle("x", 1, false) // the last of x's three, refused: x keeps it
	if s := r.Stats(); s.RuleTopics != 1 || s.ReservedTopics != 1 {
		t.Fatalf("x stored, w reserved: %+v", s)
	}
	if rt := r.Admit(r.Route("x"), 1); rt.Topic != "x" || !rt.state.slotted.Load() {
		t.Fatalf("x after it was stored: %s, slotted %v", rt.Topic, rt.state.slotted.Load())
	}
	r.Settle("w", 1, true)
	if v := r.Admit(r.Route("v"), 1); v.Topic != OverflowTopic {
		t.Fatalf("v past the limit of 2 stored topics: %s", v.Topic)
	}
	if s := r.Stats(); s.RuleTopics != 2 || s.ReservedTopics != 0 || s.Overflowed != 2 {
		t.Fatalf("at the end: %+v, want x and w, z and v overflowed", s)
	}
	if got := r.StoredTopic(r.Route("x")); got != "x" {
		t.Fatalf("StoredTopic(x) = %s", got)
	}
	if got := r.StoredTopic(r.Route("bad.1")); got != OverflowTopic {
		t.Fatalf("StoredTopic of a subject never stored = %s, want the overflow topic", got)
	}
}

// TestTopicLimitConcurrent: many goroutines admit messages of many new subjects and settle each
// stored or refused at random, as the workers and the ack stage do: the stored topics never pass
// the limit, every message stored in a topic of its own is in a topic that has its slot, and once
// everything is settled nothing is reserved.
func TestTopicLimitConcurrent(t *testing.T) {
	const (
		max        = 8
		goroutines = 8
		messages   = 2000
	)
	r := NewRouter(Mapping{MaxTopics: max}, 4, "Rmq-Keys", 16, nil) // a small cache: routes are remade
	var mu sync.Mutex
	storedIn := map[string]bool{}
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			rnd := rand.New(rand.NewPCG(uint64(g), 1))
			for range messages {
				rt := r.Admit(r.Route(fmt.Sprintf("s.%d", rnd.IntN(64))), 1)
				stored := rnd.IntN(4) == 0
				if stored && rt.Topic != OverflowTopic {
					mu.Lock()
					storedIn[rt.Topic] = true
					mu.Unlock()
				}
				r.Settle(rt.Topic, 1, stored)
				if s := r.Stats(); s.RuleTopics+s.ReservedTopics > max {
					t.Errorf("%d topics with a slot and %d reserved, past the limit of %d", s.RuleTopics, s.ReservedTopics, max)
					return
				}
			}
		})
	}
	wg.Wait()
	s := r.Stats()
	if s.ReservedTopics != 0 || r.Reserving() || s.RuleTopics != len(storedIn) || s.RuleTopics > max {
		t.Fatalf("stats %+v, %d topics stored in, limit %d", s, len(storedIn), max)
	}
	for topic := range storedIn {
		if !r.limit.has(topic) {
			t.Fatalf("a message was stored in %s, which has no slot", topic)
		}
	}
}
