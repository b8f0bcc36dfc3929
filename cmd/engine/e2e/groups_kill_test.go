package e2e

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// docs/GROUPS.md, "What a group promises": at least once, and after a kill -9 of a member only
// its uncommitted window is delivered again, counted by the engine.

// TestGroupMembersKilled: three `engine consume` processes share a topic of 8 queues while a
// publisher publishes throughout; members are SIGKILLed at random moments (after a random number
// of messages handed out) and started again. Every message published is written out at least
// once, and what is written twice is only what killed members had written past their last
// commit. The engine's redelivered count is compared with what is seen from outside:
//
//   - Exactly, with a tap (grouptap_test.go): a plain subscriber that sees every read the members
//     send and every reply the engine gives, also the replies still in flight to a member that
//     was just killed. From them it counts what the engine counts: per queue, when its owner was
//     lost (it did not release it or leave: it was killed), the messages it was served past the
//     group's committed offset form its window, and each message of a window served again counts
//     once. rocketstore_group_redelivered_messages_total and `groups describe`'s redelivered must
//     equal that count.
//   - From the consumers' outputs alone, which cannot see what a killed member was served but
//     never wrote (messages read ahead in its buffer, in a reply on its way when it died, or in
//     its output buffer not yet flushed): every position written n > 1 times was counted at least
//     n-1 times by the engine (every duplicate is a counted redelivery); the engine's count
//     exceeds the outputs' duplicates by exactly what the killed members were served and never
//     wrote, which is at most, per kill, what one consume holds unwritten: 2 x --batch messages
//     read ahead (the member's buffer, a read in flight included), one handed out, and one output
//     buffer (48 KiB of lines).
//
// ROCKETSTORE_GROUP_CHAOS_KILLS sets the number of kills (6 by default; the long run's numbers
// are in the report of the commit that added it), ROCKETSTORE_GROUP_CHAOS_SEED the random seed
// (logged).
func TestGroupMembersKilled(t *testing.T) {
	t.Parallel()
	kills := envInt(t, "ROCKETSTORE_GROUP_CHAOS_KILLS", 6)
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("ROCKETSTORE_GROUP_CHAOS_SEED"); s != "" {
		seed = uint64(envInt(t, "ROCKETSTORE_GROUP_CHAOS_SEED", 0))
	}
	t.Logf("seed %d (ROCKETSTORE_GROUP_CHAOS_SEED), %d kills", seed, kills)
	rng := rand.New(rand.NewPCG(seed, 28))

	e := startEngine(t, t.TempDir(), "--queues", "8", "--http", "127.0.0.1:0")
	const group, topic, batch = "chaos", "load", 64
	tap := startGroupTap(t, e.url, topic)
	l := newLedger()
	// The topic exists before the members join: a join names a topic the engine has.
	firstAck := stored(t, connect(t, e.url), msg(topic, "first"))
	pub := startPublisher(t, e.url, topic, "chaos", 2, 1<<30, false) // until halted

	const members = 3
	var procs [members]*consumer
	var every []*consumer // every incarnation
	incarnation := [members]int{}
	killed := map[string]bool{}
	start := func(i int) {
		incarnation[i]++
		name := fmt.Sprintf("m%d.%d", i, incarnation[i])
		procs[i] = startConsume(t, l, name, e.url, "--group", group, "--topic", topic, "--batch", itoa(batch))
		every = append(every, procs[i])
	}
	alive := func() error {
		for _, p := range procs {
			if err := p.running(); err != nil {
				return err
			}
		}
		return nil
	}
	for i := range members {
		start(i)
	}
	l.waitFor(t, "every member reads", func() bool {
		for _, p := range procs {
			if l.count(p.name) == 0 {
				return false
			}
		}
		return true
	}, alive)

	for k := range kills {
		// A random moment: after a random number of messages handed out by anyone.
		at := l.count("") + 200 + rng.IntN(3000)
		l.waitFor(t, fmt.Sprintf("kill %d's moment", k), func() bool { return l.count("") >= at }, alive)
		i := rng.IntN(members)
		victim := procs[i]
		victim.kill()
		killed[victim.name] = true
		t.Logf("kill %d: %s after %d messages written in all (%d by it)", k, victim.name, l.count(""), l.count(victim.name))
		again := l.count("") + rng.IntN(1500)
		l.waitFor(t, fmt.Sprintf("%s's restart moment", victim.name), func() bool { return l.count("") >= again }, func() error {
			for j, p := range procs {
				if j != i {
					if err := p.running(); err != nil {
						return err
					}
				}
			}
			return nil
		})
		start(i)
	}

	pub.halt()
	acked := pub.wait(t, 2)
	acked["first"] = qpos{firstAck.QueueID, firstAck.QueueOffset}
	want := positions(acked)
	l.waitFor(t, fmt.Sprintf("all %d messages written", len(want)), func() bool { return l.covers(want) }, alive)

	// The engine's count, before the members leave (the group's own count goes with it then).
	// Each member has joined, so it has its signal handler: SIGTERM makes it commit and leave.
	l.waitFor(t, "the last members joined", func() bool {
		for _, p := range procs {
			if len(tap.membersOf(p.name)) == 0 {
				return false
			}
		}
		return true
	}, alive)
	st := describe(t, e.url, group, topic)
	metric := scrapeMetrics(t, e.http)["rocketstore_group_redelivered_messages_total"]
	for _, p := range procs {
		p.term()
	}
	tap.sync(connect(t, e.url))
	tapRedelivered, served, tapAt, problems := tap.counts()
	if len(problems) > 0 {
		t.Fatalf("the tap cannot follow: %v", problems)
	}

	// No member met an error: a commit racing the member's own release of a queue asked back
	// is not one (the release committed the same offset).
	for _, p := range every {
		if strings.Contains(p.errText(), "commit") {
			t.Errorf("engine consume %s: %s", p.name, p.errText())
		}
	}

	// At least once, each with the body published there.
	bodyAt := map[qpos]string{}
	for body, p := range acked {
		bodyAt[p] = body
	}
	writers := map[qpos][]string{}
	minLine := 0
	for _, h := range l.snapshot() {
		if b, ok := bodyAt[h.pos]; !ok || b != h.body {
			t.Fatalf("%s wrote %q at %v, the publisher stored %q there", h.who, h.body, h.pos, b)
		}
		writers[h.pos] = append(writers[h.pos], h.who)
	}
	l.mu.Lock()
	minLine = l.minLine
	l.mu.Unlock()

	// Duplicates only from killed members' uncommitted windows: every writer of a position but
	// the last (the writes of one position are seconds apart, a session timeout at least, so the
	// ledger has them in order) was killed, without having committed past it.
	lastCommit := map[string]map[int32]int64{}
	for name := range killed {
		lastCommit[name] = map[int32]int64{}
		for _, id := range tap.membersOf(name) {
			for q, off := range tap.committedBy(id) {
				lastCommit[name][q] = off
			}
		}
	}
	dups := 0
	for pos, ws := range writers {
		if len(ws) == 1 {
			continue
		}
		dups += len(ws) - 1
		for _, w := range ws[:len(ws)-1] {
			if !killed[w] {
				t.Errorf("%v written by %v: %s, which was not killed, wrote it before another did", pos, ws, w)
			} else if c, ok := lastCommit[w][pos.queue]; ok && c > pos.offset {
				t.Errorf("%v written by %v: %s had committed %d in queue %d, past it", pos, ws, w, c, pos.queue)
			}
		}
		if tapAt[pos] < len(ws)-1 {
			t.Errorf("%v written %d times, served again only %d times after a kill", pos, len(ws), tapAt[pos])
		}
	}

	// The engine's count against the tap's: exact.
	if int64(metric) != int64(tapRedelivered) || st.Redelivered != int64(tapRedelivered) {
		t.Errorf("redelivered: /metrics %v, groups describe %d; the tap counted %d (of %d records served)",
			metric, st.Redelivered, tapRedelivered, served)
	}
	// Against the outputs: bounded by what a killed consume held unwritten.
	perKill := 2*batch + 1 + (48<<10)/max(minLine, 1) + 1
	if gap := tapRedelivered - dups; gap < 0 || gap > kills*perKill {
		t.Errorf("redelivered %d, duplicates written %d: the gap %d is outside [0, %d kills x %d]", tapRedelivered, dups, gap, kills, perKill)
	}
	if tapRedelivered == 0 {
		t.Errorf("%d kills under load redelivered nothing: the windows were not exercised", kills)
	}
	t.Logf("%d published, %d written (%d duplicates); %d kills; redelivered: engine %v, tap %d, served %d in all",
		len(acked), len(l.snapshot()), dups, kills, metric, tapRedelivered, served)
}

// envInt is an integer from the environment, def when unset.
func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, s, err)
	}
	return n
}
