package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// docs/GROUPS.md, "Errors" and "Settings": a member that never heartbeats is taken out after the
// session timeout, its queues moved; joins past the bounds are refused (429) and change nothing
// else.

// TestGroupSilentMember: a member that joins and never heartbeats, reads or releases holds every
// queue; an `engine consume --until-end` that joins after it gets them once the silent member's
// session runs out (3 s), drains the topic and exits 0. The silent member is out: its requests
// get 404 (join again); nothing was redelivered, since it was handed nothing.
func TestGroupSilentMember(t *testing.T) {
	t.Parallel()
	e := startEngine(t, t.TempDir(), "--http", "127.0.0.1:0")
	nc := connect(t, e.url)
	want := map[string]bool{}
	for i := range 40 {
		body := fmt.Sprint("q", i)
		stored(t, nc, msg("quiet", body))
		want[body] = true
	}
	var silent docAssignment
	if err := rawCall(t, nc, "$RS.API.group.join", map[string]any{"group": "s", "topic": "quiet", "clientId": "silent"}, &silent); err != nil {
		t.Fatal(err)
	}
	if len(silent.Queues) != 4 {
		t.Fatalf("the first member holds %v, want every queue", silent.Queues)
	}
	start := time.Now()
	r := runCLI(t, "consume", "--nats", e.url, "--group", "s", "--topic", "quiet", "--until-end", "--format", "raw")
	took := time.Since(start)
	if r.code != 0 {
		t.Fatalf("consume: exit %d: %s", r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	got := map[string]bool{}
	for _, l := range lines {
		if got[l] || !want[l] {
			t.Fatalf("consume wrote %q twice or unpublished: %q", l, r.stdout)
		}
		got[l] = true
	}
	if len(got) != len(want) {
		t.Fatalf("consume wrote %d messages, want %d", len(got), len(want))
	}
	t.Logf("engine consume drained the topic %v after it started (the silent member's session: 3s)", took.Round(time.Millisecond))
	if took < 2*time.Second {
		t.Fatalf("the queues moved %v after the other member joined, before the silent member's session ran out", took)
	}
	wantCode(t, "the silent member's heartbeat", rawCall(t, nc, silent.API+".group.heartbeat",
		map[string]any{"group": "s", "topic": "quiet", "memberId": silent.MemberID}, nil), 404, "join again")
	q := silent.Queues[0]
	wantCode(t, "the silent member's commit", rawCall(t, nc, silent.API+".commit", map[string]any{"group": "s", "topic": "quiet",
		"queueId": q.QueueID, "offset": 0, "memberId": silent.MemberID, "epoch": q.Epoch}, nil), 404)
	m := scrapeMetrics(t, e.http)
	if m[`rocketstore_group_events_total{event="expire"}`] != 1 || m["rocketstore_group_redelivered_messages_total"] != 0 {
		t.Fatalf("expired %v, redelivered %v; want 1 and 0", m[`rocketstore_group_events_total{event="expire"}`], m["rocketstore_group_redelivered_messages_total"])
	}
	st := describe(t, e.url, "s", "quiet")
	for _, q := range st.Queues {
		if q.Committed != q.MaxOffset {
			t.Fatalf("queue %d committed at %d of %d after consume drained it", q.QueueID, q.Committed, q.MaxOffset)
		}
	}
}

// TestGroupJoinFlood: 100,000 join requests, 50,000 to one group and then 50,000 to as many
// groups, against an engine bounding members at 3,000 in all and 1,000 per group while a member
// of another group reads: exactly the bounds' worth are taken, every other join is refused with
// 429 naming its bound, no group is made for a refused join, the engine stays up and keeps
// serving the member that was there, and its live heap grows by a few KiB a member taken and by
// nothing for the joins refused.
func TestGroupJoinFlood(t *testing.T) {
	t.Parallel()
	const maxMembers, maxGroupMembers, perKind = 3000, 1000, 50_000
	e := startEngine(t, t.TempDir(), "--http", "127.0.0.1:0", "--pprof", "--group-max-members", itoa(maxMembers),
		"--group-max-group-members", itoa(maxGroupMembers), "--group-session-timeout", "5m")
	nc := connect(t, e.url)
	l := newLedger()
	firstAck := stored(t, nc, msg("flood", "first"))
	live := startConsume(t, l, "live", e.url, "--group", "live", "--topic", "flood")
	l.waitFor(t, "the live member reads", func() bool { return l.count("live") > 0 }, live.running)
	heapBefore := liveHeap(t, e.http)

	type outcome struct {
		joined int
		codes  map[int]int
		descs  map[string]bool
	}
	flood := func(group func(i int) string) outcome {
		t.Helper()
		out := outcome{codes: map[int]int{}, descs: map[string]bool{}}
		var mu sync.Mutex
		inbox := nats.NewInbox()
		done := make(chan struct{})
		replies := 0
		sem := make(chan struct{}, 512) // requests in flight
		sub, err := nc.Subscribe(inbox+".*", func(m *nats.Msg) {
			var r struct {
				MemberID string     `json:"memberId"`
				Error    *wireError `json:"error"`
			}
			_ = json.Unmarshal(m.Data, &r)
			mu.Lock()
			switch {
			case r.Error != nil:
				out.codes[r.Error.Code]++
				if len(out.descs) < 8 {
					out.descs[r.Error.Description] = true
				}
			case r.MemberID != "":
				out.joined++
			default:
				out.codes[0]++
			}
			replies++
			if replies == perKind {
				close(done)
			}
			mu.Unlock()
			<-sem
		})
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Unsubscribe()
		if err := sub.SetPendingLimits(-1, -1); err != nil {
			t.Fatal(err)
		}
		for i := range perKind {
			select {
			case sem <- struct{}{}:
			case <-time.After(waitTimeout):
				t.Fatalf("join %d: no room in flight for %v: the engine stopped answering", i, waitTimeout)
			}
			data, _ := json.Marshal(map[string]any{"group": group(i), "topic": "flood", "clientId": "flood"})
			if err := nc.PublishRequest("$RS.API.group.join", fmt.Sprintf("%s.%d", inbox, i), data); err != nil {
				t.Fatal(err)
			}
		}
		recv(t, "every join answered", done)
		return out
	}
	start := time.Now()
	crowd := flood(func(int) string { return "crowd" })
	many := flood(func(i int) string { return fmt.Sprint("g", i) })
	t.Logf("%d joins answered in %v: one group %d taken, %v; many groups %d taken, %v; e.g. %v %v",
		2*perKind, time.Since(start).Round(time.Millisecond), crowd.joined, crowd.codes, many.joined, many.codes, crowd.descs, many.descs)
	if crowd.joined != maxGroupMembers || crowd.codes[429] != perKind-maxGroupMembers {
		t.Errorf("one group: %d taken, refusals %v; want %d taken and the rest 429", crowd.joined, crowd.codes, maxGroupMembers)
	}
	if want := maxMembers - maxGroupMembers - 1; many.joined != want || many.codes[429] != perKind-want {
		t.Errorf("many groups: %d taken, refusals %v; want %d taken (the bound less the crowd and the live member) and the rest 429",
			many.joined, many.codes, want)
	}
	for d := range crowd.descs {
		if !strings.Contains(d, "group_max_group_members") {
			t.Errorf("a refusal in one group says %q, not its bound", d)
		}
	}
	for d := range many.descs {
		if !strings.Contains(d, "group_max_members") {
			t.Errorf("a refusal past the engine's bound says %q, not its bound", d)
		}
	}

	// Still up, still serving the member that was there, nothing made for the refused.
	if code, _ := httpGet(t, e.http+"/healthz"); code != 200 {
		t.Fatalf("/healthz %d after the flood", code)
	}
	ack := stored(t, nc, msg("flood", "after the flood"))
	l.waitFor(t, "the live member reads what comes after the flood", func() bool {
		return l.covers([]qpos{{firstAck.QueueID, firstAck.QueueOffset}, {ack.QueueID, ack.QueueOffset}})
	}, live.running)
	_, status := httpGet(t, e.http+"/status")
	var st struct {
		Groups struct {
			Groups  int `json:"groups"`
			Members int `json:"members"`
		} `json:"groups"`
	}
	if err := json.Unmarshal([]byte(status), &st); err != nil {
		t.Fatal(err)
	}
	if st.Groups.Members != maxMembers || st.Groups.Groups != maxMembers-maxGroupMembers+1 {
		t.Errorf("/status groups %+v, want %d members in %d groups", st.Groups, maxMembers, maxMembers-maxGroupMembers+1)
	}
	heap := liveHeap(t, e.http)
	t.Logf("live heap %.1f MiB before the flood, %.1f MiB after, with %d members (%.1f KiB each)", heapBefore/(1<<20), heap/(1<<20),
		st.Groups.Members, (heap-heapBefore)/1024/float64(st.Groups.Members))
	// Bounded by the members taken, not the joins sent: a few KiB each (2.3-2.7 measured),
	// nothing of a refused join. 16 KiB a member leaves room for the collector's timing.
	if grown := heap - heapBefore; grown > float64(maxMembers*16<<10) {
		t.Errorf("the live heap grew %.1f MiB with %d members: over 16 KiB a member, the refused joins kept something", grown/(1<<20), maxMembers)
	}
	live.term()
}

// liveHeap is the engine's heap in use right after a collection, which /debug/pprof/heap?gc=1
// (--pprof) runs.
func liveHeap(t *testing.T, base string) float64 {
	t.Helper()
	if code, _ := httpGet(t, base+"/debug/pprof/heap?gc=1"); code != 200 {
		t.Fatalf("/debug/pprof/heap?gc=1: %d", code)
	}
	return scrapeMetrics(t, base)["go_memstats_heap_inuse_bytes"]
}

// TestGroupJoinAfterAck: a join sent right after the ack of a topic's first message finds the
// topic, as every read does (README.md, "Flush modes": a read sees what was acked before it
// arrived), in both flush modes, 150 new topics each.
func TestGroupJoinAfterAck(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"sync", "async"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			e := startEngine(t, t.TempDir(), "--flush", mode, "--group-session-timeout", "5m")
			nc := connect(t, e.url)
			missed := 0
			for i := range 150 {
				topic := fmt.Sprint("fresh", i)
				stored(t, nc, msg(topic, "first"))
				var a docAssignment
				if err := rawCall(t, nc, "$RS.API.group.join", map[string]any{"group": "g", "topic": topic}, &a); err != nil {
					missed++
					t.Errorf("join right after the first ack of %s: %+v", topic, *err)
				}
			}
			if missed > 0 {
				t.Errorf("%d of 150 joins right after their topic's first ack found no topic", missed)
			}
		})
	}
}
