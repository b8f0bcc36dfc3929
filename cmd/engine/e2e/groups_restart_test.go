package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// docs/GROUPS.md, "What a group promises": committed offsets survive an engine restart and a
// kill -9 of it ("After a restart of the engine, members join again and go on from there"), and
// are in RocketMQ's config/consumerOffset.json after a clean stop.

// TestGroupEngineKilled: two `engine consume` members read a topic through an external NATS
// server while a publisher publishes throughout; the engine is killed with SIGKILL and started
// again, then stopped with SIGTERM and started again. The members ride through both (their
// requests get no responders meanwhile; they join again), every message published is written
// at least once, and what is written twice is only what was served past the last commit before
// a stop: the tap (grouptap_test.go) sees every commit acknowledged and every read served, and
// checks that no assignment after a restart starts a queue below a commit acknowledged before it
// (nothing committed is lost), and each duplicate is a message of a window it counted. After
// the clean stop, consumerOffset.json holds, in RocketMQ's shape, each queue's last commit
// acknowledged.
func TestGroupEngineKilled(t *testing.T) {
	t.Parallel()
	ns := startNATS(t, 0)
	url := clientURL(ns)
	dir := t.TempDir()
	e := startEngine(t, dir, "--server", url)
	const group, topic, batch = "survivors", "orders", 64
	tap := startGroupTap(t, url, topic)
	nc := connect(t, url)
	l := newLedger()
	firstAck := stored(t, nc, msg(topic, "first"))
	pub := startPublisher(t, url, topic, "restart", 2, 1<<30, false)

	var procs []*consumer
	for i := range 2 {
		procs = append(procs, startConsume(t, l, fmt.Sprintf("c%d", i), url, "--group", group, "--topic", topic, "--batch", itoa(batch)))
	}
	alive := func() error {
		for _, p := range procs {
			if err := p.running(); err != nil {
				return err
			}
		}
		return nil
	}
	progress := func(what string, n int) {
		t.Helper()
		at := l.count("") + n
		l.waitFor(t, what, func() bool { return l.count("") >= at }, alive)
	}
	progress("the members read", 2000)
	// rejoined waits until every member has joined the engine started at since again.
	rejoined := func(what string, since time.Time) {
		t.Helper()
		before := map[string]int{}
		for _, p := range procs {
			before[p.name] = tap.joined(p.name)
		}
		l.waitFor(t, what, func() bool {
			for _, p := range procs {
				if tap.joined(p.name) == before[p.name] {
					return false
				}
			}
			return true
		}, alive)
		t.Logf("%s %v after the engine was running again", what, time.Since(since).Round(time.Millisecond))
	}

	// kill -9: what was committed stays; the members join the new engine.
	e.kill()
	t.Logf("engine killed after %d messages written", l.count(""))
	e = e.restart(t)
	rejoined("the members joined after the kill", time.Now())
	progress("the members read after the kill", 2000)

	// A clean stop: consumerOffset.json holds each queue's last commit.
	e.stop()
	tap.sync(nc)
	committed := tap.committedNow()
	raw, err := os.ReadFile(filepath.Join(dir, "config", "consumerOffset.json"))
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		OffsetTable map[string]map[string]int64 `json:"offsetTable"`
	}
	if err := json.Unmarshal(raw, &file); err != nil {
		t.Fatalf("consumerOffset.json: %v: %s", err, raw)
	}
	got := file.OffsetTable[topic+"@"+group]
	for q, off := range committed {
		if got[itoa(q)] != off {
			t.Errorf("consumerOffset.json %s: queue %d at %d, the last commit acknowledged was %d: %s", topic+"@"+group, q, got[itoa(q)], off, raw)
		}
	}
	if len(got) != 4 || len(committed) != 4 {
		t.Errorf("consumerOffset.json holds %v, the tap saw commits %v; want all 4 queues", got, committed)
	}
	t.Logf("clean stop after %d messages written: consumerOffset.json %s", l.count(""), raw)
	e = e.restart(t)
	rejoined("the members joined after the clean stop", time.Now())
	progress("the members read after the clean stop", 2000)

	pub.halt()
	acked := pub.wait(t, 2)
	acked["first"] = qpos{firstAck.QueueID, firstAck.QueueOffset}
	want := positions(acked)
	l.waitFor(t, fmt.Sprintf("all %d messages written", len(want)), func() bool { return l.covers(want) }, alive)
	for _, p := range procs {
		p.term()
	}
	tap.sync(nc)
	redelivered, served, tapAt, problems := tap.counts()
	for _, p := range problems {
		t.Error(p)
	}

	bodyAt := map[qpos]string{}
	for body, p := range acked {
		bodyAt[p] = body
	}
	writes := map[qpos]int{}
	for _, h := range l.snapshot() {
		if b, ok := bodyAt[h.pos]; ok && b != h.body || !ok && !pub.wasSent(h.body) {
			t.Fatalf("%s wrote %q at %v, the publisher stored %q there", h.who, h.body, h.pos, b)
		}
		writes[h.pos]++
	}
	dups := 0
	for pos, n := range writes {
		dups += n - 1
		if n-1 > tapAt[pos] {
			t.Errorf("%v written %d times, but served again after a stop only %d times: it was not in an uncommitted window", pos, n, tapAt[pos])
		}
	}
	t.Logf("%d published, %d written (%d duplicates); served again from uncommitted windows %d (of %d served)",
		len(acked), len(l.snapshot()), dups, redelivered, served)
}
