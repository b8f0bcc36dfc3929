package commitlog

import (
	"slices"

	"github.com/rocketstore/engine/internal/store/javahash"
)

// Property is one name/value pair before encoding.
type Property struct {
	Name, Value string
}

// Java HashMap geometry of the map the broker re-serializes properties from (SendMessageProcessor:
// new HashMap<>(128)): the table doubles whenever the entry count passes 0.75 of its capacity.
const (
	javaMapInitialCapacity = 128
	javaMapLoadFactorNum   = 3
	javaMapLoadFactorDen   = 4
)

// JavaHashMapOrder returns props in the order a Java HashMap(128) iterates them after they were
// put in the given order, so that a record's properties string comes out byte-identical to the one
// a RocketMQ broker stores. The broker parses the client's string into that map, adds CLUSTER (and
// UNIQ_KEY when absent) and iterates it; callers reproduce that by appending those entries after the
// client's before calling this.
//
// The emulation: a repeated name keeps the position of its first put and the value of its last;
// entries sort by bucket (h ^ h>>>16) & (capacity-1) with h = String.hashCode(name), ascending, and
// keep put order within a bucket, which is also what the map's resize split preserves. Not
// emulated: a bucket holding more than 8 entries, where Java turns the chain into a tree and
// reorders it. Any order decodes the same; only byte identity with Java is at stake.
//
// The result is a new slice; props is not modified.
func JavaHashMapOrder(props []Property) []Property {
	out := make([]Property, 0, len(props))
	pos := make(map[string]int, len(props))
	for _, p := range props {
		if i, ok := pos[p.Name]; ok {
			out[i].Value = p.Value
			continue
		}
		pos[p.Name] = len(out)
		out = append(out, p)
	}
	capacity := javaMapInitialCapacity
	for len(out)*javaMapLoadFactorDen > capacity*javaMapLoadFactorNum {
		capacity *= 2
	}
	mask := uint32(capacity - 1)
	type slot struct {
		bucket uint32
		p      Property
	}
	slots := make([]slot, len(out))
	for i, p := range out {
		h := uint32(javahash.String(p.Name))
		slots[i] = slot{(h ^ h>>16) & mask, p}
	}
	slices.SortStableFunc(slots, func(a, b slot) int { return int(a.bucket) - int(b.bucket) })
	for i := range slots {
		out[i] = slots[i].p
	}
	return out
}

// AppendProperties appends the entries of props in the given order (see JavaHashMapOrder).
func AppendProperties(dst []byte, props []Property) []byte {
	for _, p := range props {
		dst = AppendProperty(dst, p.Name, p.Value)
	}
	return dst
}
