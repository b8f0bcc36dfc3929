package benchmarks

import (
	"fmt"
	"math/rand/v2"

	"github.com/rocketstore/engine/stages/ingress/route"
)

// The scale-out projection (docs/SCALE-OUT.md, benchmarks/RESULTS.md §6). One 2-core machine
// cannot show N engines scaling (they would share its cores and its disk), so the N-engine
// figure is computed from what can be measured here:
//
//	aggregate(N) = N × T1 × skew(P, N) × hop(N)
//
// T1 is one engine's measured rate; skew is the share of the busiest engine's load that an even
// spread would give it (the busiest engine bounds the aggregate); hop is the cost of the route
// hop that a fraction (N-1)/N of the messages take when publishers attach to servers at random,
// from the measured ratio of a hop's throughput to a local delivery's.

// PartitionSkew is the efficiency of spreading keys over count partitions and the partitions
// over engines (partition p on engine p mod engines): the mean load of an engine over the load
// of the busiest one, for the keys given (FNV-1a mod count, as the server's mapping).
func PartitionSkew(keys []string, count, engines int) float64 {
	load := make([]int, engines)
	for _, k := range keys {
		load[route.PartitionOf(k, count)%engines]++
	}
	busiest := 0
	for _, l := range load {
		busiest = max(busiest, l)
	}
	if busiest == 0 {
		return 0
	}
	return float64(len(keys)) / float64(engines) / float64(busiest)
}

// UniformSkew is PartitionSkew with infinitely many keys: count/(engines·⌈count/engines⌉).
func UniformSkew(count, engines int) float64 {
	per := (count + engines - 1) / engines
	return float64(count) / float64(engines*per)
}

// HopEfficiency is the throughput factor of route hops: a fraction (N-1)/N of the messages
// cross one route, each at hopRatio of a local delivery's throughput.
func HopEfficiency(engines int, hopRatio float64) float64 {
	f := float64(engines-1) / float64(engines)
	return 1 / ((1 - f) + f/hopRatio)
}

// RandomKeys are n keys of the shape real ones have ("user-<random>"), from a fixed seed.
func RandomKeys(n int) []string {
	r := rand.New(rand.NewPCG(1, 2))
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("user-%d", r.Uint64())
	}
	return keys
}
