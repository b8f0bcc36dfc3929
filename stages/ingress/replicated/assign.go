package replicated

import (
	"cmp"
	"hash/fnv"
	"slices"
	"strconv"
)

// Spreading the pins of replicated mode (docs/SCALE-OUT.md, "Replicated mode"). The pinned-client
// policy pins a partition's consumer to whichever engine's pull gets a message first: left alone,
// the first engine up takes every partition. So the engines that share a consumer agree on who
// should take each partition, each computing the same assignment from the same live set
// (members.go), and an engine pulls only the partitions assigned to it. The pins still
// decide who takes a partition (the sequence rule keeps each copy whole whoever takes it), so
// engines that disagree for a moment cost a pin switch, never a message.
//
// The assignment is rendezvous hashing with bounded loads: each partition, in order, goes to the
// live engine that ranks it highest (a hash of the engine's stable name and the partition) among
// those that own it and are below their share, ceil(partitions / engines). No engine takes more
// than its share (unless the owned sets leave no other choice), an engine's partitions stay with
// it across restarts (the name, not the process, ranks), and an engine that joins or leaves moves
// few partitions besides its own.

// replMember is an engine of the shared consumer as its heartbeats describe it.
type replMember struct {
	// Name is stable across restarts (the engine id, else its store host); Nonce tells one life
	// of it from another (and two engines given the same name apart).
	Name  string `json:"name"`
	Nonce string `json:"nonce"`
	// Parts are the partitions it consumes (owns), ascending.
	Parts []int `json:"parts"`
	// Leaving: it is stopping; drop it at once.
	Leaving bool `json:"leaving,omitempty"`
}

// key identifies the member: one life of one engine.
func (m *replMember) key() string { return m.Name + "/" + m.Nonce }

// owns reports whether m consumes partition p.
func (m *replMember) owns(p int) bool {
	_, ok := slices.BinarySearch(m.Parts, p)
	return ok
}

// rank is m's rendezvous weight for partition p.
func (m *replMember) rank(p int) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(m.Name))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write(strconv.AppendInt(nil, int64(p), 10))
	// FNV-1a's last byte barely reaches the high bits: mix them (the finalizer of SplitMix64).
	x := h.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// assignPartitions gives each of parts (ascending) to one of members: the key of the member
// that takes it. A partition no member owns is left out. The result depends on the members'
// set, not on their order.
func assignPartitions(parts []int, members []replMember) map[int]string {
	ms := slices.Clone(members)
	slices.SortFunc(ms, func(a, b replMember) int { return cmp.Compare(a.key(), b.key()) })
	out := make(map[int]string, len(parts))
	if len(ms) == 0 {
		return out
	}
	assignable := 0
	for _, p := range parts {
		if slices.ContainsFunc(ms, func(m replMember) bool { return m.owns(p) }) {
			assignable++
		}
	}
	share := (assignable + len(ms) - 1) / len(ms)
	load := make([]int, len(ms))
	type cand struct {
		i    int
		rank uint64
	}
	cands := make([]cand, 0, len(ms))
	for _, p := range parts {
		cands = cands[:0]
		for i := range ms {
			if ms[i].owns(p) {
				cands = append(cands, cand{i, ms[i].rank(p)})
			}
		}
		if len(cands) == 0 {
			continue
		}
		// Highest rank first; equal ranks (one name given twice) by key.
		slices.SortStableFunc(cands, func(a, b cand) int { return cmp.Compare(b.rank, a.rank) })
		pick := -1
		for _, c := range cands {
			if load[c.i] < share {
				pick = c.i
				break
			}
		}
		if pick < 0 { // every owner is at its share: the least loaded of them
			pick = cands[0].i
			for _, c := range cands[1:] {
				if load[c.i] < load[pick] {
					pick = c.i
				}
			}
		}
		load[pick]++
		out[p] = ms[pick].key()
	}
	return out
}
