package benchmarks

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/rocketstore/engine/engine/api"
	"github.com/rocketstore/engine/internal/store/commitlog"
)

// readReply is a batched read's reply body of one queue holding records with bodies, built with
// the engine's own encoder (api.AppendReadSection, commitlog.AppendRecord).
func readReply(t testing.TB, next int64, bodies ...string) []byte {
	var recs []byte
	for _, b := range bodies {
		var err error
		if recs, err = commitlog.AppendRecord(recs, &commitlog.Message{Topic: "t", Body: []byte(b),
			Properties: commitlog.AppendProperty(nil, "NATS_SUBJECT", "t")}, commitlog.EncodeOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return api.AppendReadSection([]byte(api.ReadMagic), api.ReadSection{QueueID: 2, NextOffset: next, MaxOffset: next,
		Count: len(bodies), Data: recs})
}

// TestParseReadBodyMatchesTheEngine: the docs client's parser (written from docs/GROUPS.md)
// finds every body and the next offset in a reply the engine's encoder made.
func TestParseReadBodyMatchesTheEngine(t *testing.T) {
	want := []string{"a", "", "a longer body of a few dozen bytes, more than the others"}
	var got []string
	next, err := parseReadBody(readReply(t, 42, want...), func(b []byte) { got = append(got, string(b)) })
	if err != nil {
		t.Fatal(err)
	}
	if next != 42 || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("next %d, bodies %q; want 42, %q", next, got, want)
	}
	if _, err := parseReadBody(readReply(t, 1, "x")[:60], func([]byte) {}); err == nil {
		t.Fatal("a cut reply parsed")
	}
}

// FuzzParseReadBody: the docs client's parser of batched read replies never panics, and every
// body it hands out is a piece of the reply.
func FuzzParseReadBody(f *testing.F) {
	f.Add(readReply(f, 3, "one", "two", "three"))
	f.Add(readReply(f, 0))
	f.Add([]byte("RSR1"))
	f.Add([]byte("nonsense"))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = parseReadBody(b, func(body []byte) {
			if len(body) > 0 && !bytes.Contains(b, body) {
				t.Fatalf("a body that is not in the reply: %q", body)
			}
		})
	})
}

// TestChurnSums: the churn part's count from outside. Queue 0 ends at 100. Before the kills
// (the clean snapshot) a handled [0, 50), b [50, 60). Then b, killed, had handled [60, 80) with
// its last commit at 70: its window is [70, 80). c handled [70, 100): 10 duplicates within the
// window. d handled [90, 95) as well: 5 duplicates outside any window. Nothing is missing.
func TestChurnSums(t *testing.T) {
	st := newChurnState()
	member := func(name string, committed int64, rs ...g28Range) *churnMember {
		m := &churnMember{name: name, handled: map[int32][]g28Range{0: rs}, maxDone: map[int32]int64{0: rs[len(rs)-1].To},
			committed: map[int32]int64{0: committed}}
		st.members[name] = m
		return m
	}
	member("a", 50, g28Range{0, 0, 50})
	member("b", 70, g28Range{0, 50, 80})
	member("c", 100, g28Range{0, 70, 100})
	member("d", 95, g28Range{0, 90, 95})
	clean := map[string]map[int32][]g28Range{"a": {0: {{0, 0, 50}}}, "b": {0: {{0, 50, 60}}}}
	rep := &ChurnReport{Kills: []ChurnEvent{{Member: "b", Queues: []int32{0}, Took: 3 * time.Second}}}
	c := &churnRunner{st: st, rep: rep}
	c.sums(map[int32]int64{0: 100}, clean)
	if rep.Handled != 115 || rep.Missing != 0 || rep.DupClean != 0 || rep.DupKill != 10 || rep.DupOutside != 5 {
		t.Fatalf("handled %d, missing %d, duplicates clean %d, in windows %d, outside %d; want 115, 0, 0, 10, 5",
			rep.Handled, rep.Missing, rep.DupClean, rep.DupKill, rep.DupOutside)
	}
	if k := rep.Kills[0]; k.Window != 10 || k.Dups != 10 {
		t.Fatalf("the kill: window %d, duplicates %d; want 10, 10", k.Window, k.Dups)
	}
}

// TestChurnSumsKillDuringCatchUp: b is killed with [10, 20) past its commit; c takes the queue
// at 10, catches up to 30 and is killed before its first commit; d handles [10, 40). Offsets
// 10-19 are handled three times: each extra within a window; each kill's window counts its own
// offsets handled again: b's 10, c's 20.
func TestChurnSumsKillDuringCatchUp(t *testing.T) {
	st := newChurnState()
	add := func(name string, committed int64, rg g28Range) {
		st.members[name] = &churnMember{name: name, handled: map[int32][]g28Range{0: {rg}}, maxDone: map[int32]int64{0: rg.To},
			committed: map[int32]int64{0: committed}}
	}
	add("b", 10, g28Range{0, 0, 20})
	add("c", 0, g28Range{0, 10, 30})
	add("d", 40, g28Range{0, 10, 40})
	rep := &ChurnReport{Kills: []ChurnEvent{{Member: "b", Queues: []int32{0}}, {Member: "c", Queues: []int32{0}}}}
	c := &churnRunner{st: st, rep: rep}
	c.sums(map[int32]int64{0: 40}, map[string]map[int32][]g28Range{})
	if rep.DupKill != 30 || rep.DupOutside != 0 || rep.Missing != 0 {
		t.Fatalf("duplicates in windows %d, outside %d, missing %d; want 30, 0, 0", rep.DupKill, rep.DupOutside, rep.Missing)
	}
	if b, c := rep.Kills[0], rep.Kills[1]; b.Window != 10 || b.Dups != 10 || c.Window != 20 || c.Dups != 20 {
		t.Fatalf("b: window %d, duplicates %d; c: %d, %d; want 10, 10 and 20, 20", b.Window, b.Dups, c.Window, c.Dups)
	}
}

// TestQuantile: nearest rank: the p99 of 20 samples is the largest, the p50 the 10th.
func TestQuantile(t *testing.T) {
	var xs []time.Duration
	for i := 20; i >= 1; i-- {
		xs = append(xs, time.Duration(i)*time.Millisecond)
	}
	if p99, p50 := quantile(xs, 0.99), quantile(xs, 0.5); p99 != 20*time.Millisecond || p50 != 10*time.Millisecond {
		t.Fatalf("p99 %s, p50 %s; want 20ms, 10ms", p99, p50)
	}
}
