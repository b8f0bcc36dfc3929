package replicated

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/rocketstore/engine/stages/ingress/route"
)

func members(n int, parts []int) []replMember {
	ms := make([]replMember, n)
	for i := range ms {
		ms[i] = replMember{Name: fmt.Sprintf("e%d", i+1), Nonce: fmt.Sprintf("n%d", i+1), Parts: parts}
	}
	return ms
}

func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// loads counts the partitions of each member key.
func loads(a map[int]string) map[string]int {
	out := map[string]int{}
	for _, k := range a {
		out[k]++
	}
	return out
}

// TestAssignPartitionsSpread: every partition goes to one member and none takes more than its
// share, ceil(P / members), for P and member counts around the example's (64 over 3).
func TestAssignPartitionsSpread(t *testing.T) {
	for _, p := range []int{1, 7, 8, 64, 100, route.MaxPartitions} {
		for n := 1; n <= 9; n++ {
			ms := members(n, seq(p))
			a := assignPartitions(seq(p), ms)
			if len(a) != p {
				t.Fatalf("P=%d n=%d: %d assigned", p, n, len(a))
			}
			share := (p + n - 1) / n
			for k, l := range loads(a) {
				if l > share {
					t.Fatalf("P=%d n=%d: %s takes %d, share %d", p, n, k, l, share)
				}
			}
		}
	}
}

// TestAssignPartitionsDeterministic: the assignment depends on the members, not on the order
// they are given in (every engine computes it from its own view).
func TestAssignPartitionsDeterministic(t *testing.T) {
	ms := members(5, seq(64))
	want := assignPartitions(seq(64), ms)
	for i := range 20 {
		shuffled := slices.Clone(ms)
		for j := range shuffled {
			k := (j*7 + i*3) % len(shuffled)
			shuffled[j], shuffled[k] = shuffled[k], shuffled[j]
		}
		if got := assignPartitions(seq(64), shuffled); !maps.Equal(got, want) {
			t.Fatalf("order %d: a different assignment", i)
		}
	}
}

// TestAssignPartitionsMoves: an engine that leaves hands only its own partitions and a few more
// to the others, and the same engine (by name) coming back in a new life gets the same
// partitions back: its store already holds them.
func TestAssignPartitionsMoves(t *testing.T) {
	three := members(3, seq(64))
	before := assignPartitions(seq(64), three)
	after := assignPartitions(seq(64), three[:2])
	gone := three[2].key()
	moved := 0
	for p, k := range before {
		if k != gone && after[p] != k {
			moved++
		}
	}
	// Its share grows from 22 to 32: a partition bumped to its second choice by the bound may
	// return to its first; the survivors' own partitions mostly stay.
	if moved > 64/4 {
		t.Fatalf("%d of the survivors' partitions moved when one engine left: %v -> %v", moved, loads(before), loads(after))
	}
	back := slices.Clone(three)
	back[2].Nonce = "restarted"
	again := assignPartitions(seq(64), back)
	for p, k := range before {
		if k == gone && again[p] != back[2].key() {
			t.Fatalf("partition %d of the restarted engine went to %s", p, again[p])
		}
	}
}

// TestAssignPartitionsOwnedSets: an engine takes only partitions it owns; a partition no one
// owns is left out; the same name twice (two engines given one id) still splits the partitions.
func TestAssignPartitionsOwnedSets(t *testing.T) {
	ms := []replMember{
		{Name: "a", Nonce: "1", Parts: []int{0, 1, 2, 3}},
		{Name: "b", Nonce: "1", Parts: []int{2, 3, 4, 5}},
	}
	a := assignPartitions(seq(8), ms)
	for p, k := range a {
		m := ms[slices.IndexFunc(ms, func(m replMember) bool { return m.key() == k })]
		if !m.owns(p) {
			t.Fatalf("partition %d to %s, which does not own it", p, k)
		}
	}
	if len(a) != 6 {
		t.Fatalf("%d assigned, want 6 (6 and 7 have no owner): %v", len(a), a)
	}
	twins := []replMember{{Name: "x", Nonce: "1", Parts: seq(10)}, {Name: "x", Nonce: "2", Parts: seq(10)}}
	if l := loads(assignPartitions(seq(10), twins)); l["x/1"] != 5 || l["x/2"] != 5 {
		t.Fatalf("twins: %v", l)
	}
}

// TestSettler: a live set is acted on once it has held for the settle time, and once; one that
// changes back and forth faster than that is not acted on until it holds still.
func TestSettler(t *testing.T) {
	t0 := time.Unix(1000, 0)
	s := settler{settle: 2 * time.Second, since: t0}
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	if s.observe("a", at(time.Second)) || s.observe("a", at(2*time.Second)) {
		t.Fatal("acted before the set held for 2s")
	}
	if !s.observe("a", at(3*time.Second)) {
		t.Fatal("not acted on after 2s")
	}
	if s.observe("a", at(10*time.Second)) {
		t.Fatal("the same set acted on twice")
	}
	// Flapping: "ab" and "a" alternating every second.
	for i := 11; i < 30; i++ {
		v := "ab"
		if i%2 == 0 {
			v = "a"
		}
		if s.observe(v, at(time.Duration(i)*time.Second)) {
			t.Fatalf("acted on a flapping set at %ds", i)
		}
	}
	if s.observe("ab", at(30*time.Second)) || !s.observe("ab", at(32*time.Second)) {
		t.Fatal("the set that held still was not acted on")
	}
}

// TestReplMembersLive: members not heard for five heartbeats are gone, one that leaves is gone
// at once, and this engine is always in the set.
func TestReplMembersLive(t *testing.T) {
	self := replMember{Name: "me", Nonce: "1", Parts: []int{0}}
	ms := newReplMembers(self, "x", time.Second)
	t0 := time.Unix(1000, 0)
	ms.onBeat(replMember{Name: "b", Nonce: "1", Parts: []int{0}}, t0)
	ms.onBeat(replMember{Name: "c", Nonce: "1", Parts: []int{0}}, t0)
	ms.onBeat(self, t0) // its own heartbeat, were it to come back: ignored
	keys := func(live []replMember) []string {
		var out []string
		for _, m := range live {
			out = append(out, m.key())
		}
		return out
	}
	if got := keys(ms.live(t0.Add(5 * time.Second))); !slices.Equal(got, []string{"b/1", "c/1", "me/1"}) {
		t.Fatalf("live %v", got)
	}
	ms.onBeat(replMember{Name: "c", Nonce: "1", Leaving: true}, t0.Add(5*time.Second))
	ms.onBeat(replMember{Name: "b", Nonce: "1", Parts: []int{0}}, t0.Add(5*time.Second))
	if got := keys(ms.live(t0.Add(6 * time.Second))); !slices.Equal(got, []string{"b/1", "me/1"}) {
		t.Fatalf("after c left: %v", got)
	}
	if got := keys(ms.live(t0.Add(11 * time.Second))); !slices.Equal(got, []string{"me/1"}) {
		t.Fatalf("after b fell silent: %v", got)
	}
}

// TestDecodeBeat: heartbeats round-trip; malformed ones are refused with a reason.
func TestDecodeBeat(t *testing.T) {
	m := replMember{Name: "e1", Nonce: "n", Parts: []int{0, 5, 63}}
	data, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeBeat(data)
	if err != nil || got.key() != m.key() || !slices.Equal(got.Parts, m.Parts) {
		t.Fatalf("%+v %v", got, err)
	}
	for _, bad := range []string{
		``, `[]`, `{"name":"","nonce":"n"}`, `{"name":"a/b","nonce":"n"}`, `{"name":"a","nonce":""}`,
		`{"name":"a","nonce":"n","parts":[2,1]}`, `{"name":"a","nonce":"n","parts":[1,1]}`,
		`{"name":"a","nonce":"n","parts":[-1]}`, `{"name":"a","nonce":"n","parts":[1024]}`,
		`{"name":"a","nonce":"n","extra":1}`, `{"name":"a","nonce":"n"} {}`, `{"name":"\xff","nonce":"n"}`,
	} {
		if _, err := decodeBeat([]byte(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// FuzzDecodeBeat: any bytes decode to a valid heartbeat or an error, never a panic; a valid one
// survives a round trip.
func FuzzDecodeBeat(f *testing.F) {
	f.Add([]byte(`{"name":"e1","nonce":"x","parts":[0,1,2]}`))
	f.Add([]byte(`{"name":"e1","nonce":"x","parts":[],"leaving":true}`))
	f.Add([]byte(`{"name":"e1","nonce":"x","parts":[3,2]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := decodeBeat(data)
		if err != nil {
			return
		}
		again, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		m2, err := decodeBeat(again)
		if err != nil || m2.key() != m.key() || !slices.Equal(m2.Parts, m.Parts) || m2.Leaving != m.Leaving {
			t.Fatalf("round trip: %+v -> %+v, %v", m, m2, err)
		}
	})
}
