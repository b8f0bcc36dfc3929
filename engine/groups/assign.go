package groups

import (
	"cmp"
	"slices"
)

// assign spreads queues (ascending ids) over members (ascending ids) evenly and stickily: every
// member gets len(queues)/len(members) queues or one more, and a queue stays with its current
// holder (cur: queue -> member, "" or absent for none) unless that holder must give queues up
// to make the spread even. Only the queues that must move, move.
//
// Which members get the one more: those that hold the most now (they keep it), then in member
// order rotated by rotate, so that engines assigning their own queues to the same members
// independently (a partitioned deployment: each passes its first queue id) hand the extra
// queues to different members, and the totals stay even.
func assign(queues []int32, members []string, cur map[int32]string, rotate int) map[int32]string {
	out := make(map[int32]string, len(queues))
	if len(members) == 0 {
		return out
	}
	held := make(map[string]int, len(members))
	isMember := make(map[string]bool, len(members))
	for _, m := range members {
		isMember[m] = true
	}
	for _, q := range queues {
		if m := cur[q]; isMember[m] {
			held[m]++
		}
	}
	base, extra := len(queues)/len(members), len(queues)%len(members)
	order := make([]int, len(members)) // indexes into members, in the order the extras go
	for i := range order {
		order[i] = i
	}
	r := rotate % len(members)
	if r < 0 {
		r += len(members)
	}
	slices.SortStableFunc(order, func(a, b int) int {
		return cmp.Or(cmp.Compare(held[members[b]], held[members[a]]),
			cmp.Compare((a-r+len(members))%len(members), (b-r+len(members))%len(members)))
	})
	quota := make(map[string]int, len(members))
	for i, idx := range order {
		quota[members[idx]] = base
		if i < extra {
			quota[members[idx]]++
		}
	}
	kept := make(map[string]int, len(members))
	var free []int32
	for _, q := range queues {
		if m := cur[q]; isMember[m] && kept[m] < quota[m] {
			out[q] = m
			kept[m]++
			continue
		}
		free = append(free, q)
	}
	// Fill: each free queue to the next member (in the extras' order) still under its quota.
	i := 0
	for _, q := range free {
		for kept[members[order[i]]] >= quota[members[order[i]]] {
			i = (i + 1) % len(order)
		}
		m := members[order[i]]
		out[q] = m
		kept[m]++
	}
	return out
}
