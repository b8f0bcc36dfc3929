package e2e

import (
	"testing"
)

// TestMemberFromTheDocs: two members written from docs/GROUPS.md alone (docmember_test.go) and
// an `engine consume` share a topic while a publisher writes to it; members join and leave
// cleanly in between (each join makes the holders give queues back: revoke and release). Every
// message published is handed out exactly once, by one of them: "Nothing twice on a clean join
// or leave", and the doc is enough to write a member (its records decode by the tables, with
// the subject and the id the publisher gave).
func TestMemberFromTheDocs(t *testing.T) {
	t.Parallel()
	e := startEngine(t, t.TempDir())
	nc := connect(t, e.url)
	l := newLedger()
	const group, topic, subject = "billing", "orders_eu", "orders.eu"

	// Some messages before anyone joins, the rest while members come and go.
	first := startPublisher(t, e.url, subject, "early", 2, 200, false)
	acked := first.wait(t, 2)

	a := runDocMember(t, nc, group, topic, "doc-a", l.docHandle)
	l.waitFor(t, "doc-a reads what was there", func() bool { return l.count("doc-a") >= 100 }, a.failed)

	const total = 3000
	pub := startPublisher(t, e.url, subject, "live", 2, total, false)
	b := runDocMember(t, nc, group, topic, "doc-b", l.docHandle)
	l.waitFor(t, "doc-b gets queues and reads", func() bool { return l.count("doc-b") > 0 }, a.failed, b.failed)

	c := startConsume(t, l, "cli-c", e.url, "--group", group, "--topic", topic)
	l.waitFor(t, "engine consume gets queues and reads", func() bool { return l.count("cli-c") > 0 }, a.failed, b.failed, c.running)

	// doc-a leaves cleanly while the publisher goes on; the others take its queues.
	before := l.count("doc-b") + l.count("cli-c")
	if err := a.stop(); err != nil {
		t.Fatal(err)
	}
	l.waitFor(t, "the others read on after doc-a left", func() bool { return l.count("doc-b")+l.count("cli-c") > before+100 }, b.failed, c.running)

	for k, v := range pub.wait(t, 2) {
		acked[k] = v
	}
	want := positions(acked)
	l.waitFor(t, "every message handed out", func() bool { return l.covers(want) }, b.failed, c.running)
	c.term() // a signal: commit what was written, leave
	if err := b.stop(); err != nil {
		t.Fatal(err)
	}

	// Exactly once: each position once, with the body published there.
	bodyAt := map[qpos]string{}
	for body, p := range acked {
		bodyAt[p] = body
	}
	seen := map[qpos]string{}
	for _, h := range l.snapshot() {
		if prev, dup := seen[h.pos]; dup {
			t.Errorf("%v handed out twice: by %s and %s", h.pos, prev, h.who)
		}
		seen[h.pos] = h.who
		if want, ok := bodyAt[h.pos]; !ok || h.body != want {
			t.Errorf("%s handed out %q at %v, the publisher stored %q there", h.who, h.body, h.pos, want)
		}
	}
	if len(seen) != len(acked) {
		t.Errorf("%d messages handed out, %d published", len(seen), len(acked))
	}
	_, aReleased, _ := a.counts()
	if aReleased == 0 {
		t.Errorf("doc-a released no queue when doc-b and engine consume joined: the revoke path was not exercised")
	}
	t.Logf("handed out: doc-a %d (released %d queues), doc-b %d, engine consume %d; %d published",
		l.count("doc-a"), aReleased, l.count("doc-b"), l.count("cli-c"), len(acked))

	// The group's committed offsets are the queues' ends: what was handed out was committed.
	st := describe(t, e.url, group, topic)
	if len(st.Members) != 0 {
		t.Errorf("members after every one left: %+v", st.Members)
	}
	for _, q := range st.Queues {
		if q.Committed != q.MaxOffset {
			t.Errorf("queue %d: committed %d, the queue ends at %d", q.QueueID, q.Committed, q.MaxOffset)
		}
	}
}
