package groups

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

func ids(n int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(i)
	}
	return out
}

func names(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("m%03d", i)
	}
	return out
}

// checkEven: every queue has a member of the list, and counts differ by at most one.
func checkEven(t *testing.T, queues []int32, members []string, got map[int32]string) {
	t.Helper()
	count := make(map[string]int)
	for _, q := range queues {
		m, ok := got[q]
		if !ok || !slices.Contains(members, m) {
			t.Fatalf("queue %d: %q, not a member", q, m)
		}
		count[m]++
	}
	lo, hi := len(queues), 0
	for _, m := range members {
		lo, hi = min(lo, count[m]), max(hi, count[m])
	}
	if hi-lo > 1 {
		t.Fatalf("uneven: %v", count)
	}
}

// TestAssignEvenAndSticky: from any start the spread is even, and a change of membership moves
// exactly the queues it must: a join takes its share from the others and nothing else moves; a
// leave moves only the leaver's queues.
func TestAssignEvenAndSticky(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 300 {
		q, m := ids(1+rng.IntN(64)), names(1+rng.IntN(12))
		cur := make(map[int32]string)
		for _, id := range q { // an arbitrary, uneven start, some free
			if rng.IntN(4) > 0 {
				cur[id] = m[rng.IntN(len(m))]
			}
		}
		a := assign(q, m, cur, rng.IntN(10))
		checkEven(t, q, m, a)

		// A join: the others give up only what the newcomer must take.
		joined := append(slices.Clone(m), "zzz")
		b := assign(q, joined, a, 0)
		checkEven(t, q, joined, b)
		moved := 0
		for _, id := range q {
			if b[id] != a[id] {
				moved++
				if b[id] != "zzz" {
					t.Fatalf("a join moved queue %d from %s to %s, not to the newcomer", id, a[id], b[id])
				}
			}
		}
		if want := len(q) / len(joined); moved < want || moved > want+1 {
			t.Fatalf("a join moved %d queues of %d over %d members", moved, len(q), len(joined))
		}

		// A leave: only the leaver's queues move.
		if len(m) > 1 {
			gone := m[rng.IntN(len(m))]
			left := slices.DeleteFunc(slices.Clone(m), func(s string) bool { return s == gone })
			c := assign(q, left, a, 0)
			checkEven(t, q, left, c)
			for _, id := range q {
				if a[id] != gone && c[id] != a[id] {
					t.Fatalf("a leave of %s moved queue %d from %s to %s", gone, id, a[id], c[id])
				}
			}
		}
	}
}

// TestAssignRotation: engines assigning their own queues independently, each rotated by its
// first queue, keep the members' totals even.
func TestAssignRotation(t *testing.T) {
	members := names(5)
	total := make(map[string]int)
	for e := range 3 { // three engines of 22, 21, 21 partitions of 64
		lo, hi := []int{0, 22, 43}[e], []int{22, 43, 64}[e]
		var q []int32
		for p := lo; p < hi; p++ {
			q = append(q, int32(p))
		}
		for _, m := range assign(q, members, nil, lo) {
			total[m]++
		}
	}
	lo, hi := 64, 0
	for _, m := range members {
		lo, hi = min(lo, total[m]), max(hi, total[m])
	}
	if hi-lo > 1 {
		t.Fatalf("totals over three engines: %v", total)
	}
}

func TestAssignEmpty(t *testing.T) {
	if got := assign(ids(4), nil, nil, 0); len(got) != 0 {
		t.Fatalf("no members: %v", got)
	}
	if got := assign(nil, names(3), nil, 0); len(got) != 0 {
		t.Fatalf("no queues: %v", got)
	}
}
