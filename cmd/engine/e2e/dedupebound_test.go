package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// TestDedupeWindowPastItsBound: the dedupe window holds for its whole time whatever the rate of
// new ids. With --dedupe-max 100, 1,000 messages with distinct Nats-Msg-Ids push the first ones
// out of the window's memory long before their 2 minutes end; a retry of the first is still
// answered "duplicate":true with the first copy's position (looked up in the IndexFile), the
// queue holds it once, and /metrics counts the ids dropped early and the lookups. README,
// "Publish a message"; docs/CONFIG.md, dedupe_max.
func TestDedupeWindowPastItsBound(t *testing.T) {
	t.Parallel()
	const (
		dedupeMax = 100
		n         = 1000
	)
	dir := t.TempDir()
	e := startEngine(t, dir, "--dedupe-max", fmt.Sprint(dedupeMax), "--queues", "1", "--http", "127.0.0.1:0")
	nc := connect(t, e.url)
	msg := func(i int) *nats.Msg {
		m := nats.NewMsg("orders.bound")
		m.Header.Set(nats.MsgIdHdr, fmt.Sprintf("order-%d", i))
		m.Data = fmt.Appendf(nil, "order %d", i)
		return m
	}
	first := stored(t, nc, msg(0))
	// The rest as fast as they go: requests in flight together, their acks counted.
	acks := make(chan *nats.Msg, n)
	inbox := nats.NewInbox()
	sub, err := nc.ChanSubscribe(inbox, acks)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	for i := 1; i < n; i++ {
		m := msg(i)
		m.Reply = inbox
		if err := nc.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.After(waitTimeout)
	for i := range n - 1 {
		select {
		case <-acks:
		case <-deadline:
			t.Fatalf("%d of %d acks of the burst came", i, n-1)
		}
	}
	again, raw := request(t, nc, msg(0))
	if !again.Duplicate || again.MsgID != first.MsgID || again.QueueOffset != first.QueueOffset {
		t.Fatalf("a retry of the first of %d ids, with --dedupe-max %d, within its window: %s; want a duplicate of %+v",
			n, dedupeMax, raw, first)
	}
	// One more new id: its round waits for dispatch to pass what it pushes out, and brings the
	// memory back to its bound.
	stored(t, nc, msg(n))
	m := scrapeMetrics(t, e.http)
	evicted := m["rocketstore_dedupe_evicted_early_total"]
	lookups := m[`rocketstore_dedupe_store_lookups_total{stage="ingress"}`] + m[`rocketstore_dedupe_store_lookups_total{stage="append"}`]
	found := m[`rocketstore_dedupe_store_duplicates_total{stage="ingress"}`] + m[`rocketstore_dedupe_store_duplicates_total{stage="append"}`]
	// Ingress looks the retry up (on its workers, before encoding it), not the writer.
	byIngress := m[`rocketstore_dedupe_store_duplicates_total{stage="ingress"}`]
	if evicted != n+1-dedupeMax || lookups == 0 || found != 1 || byIngress != 1 || m["rocketstore_dedupe_window_ids"] != dedupeMax {
		t.Errorf("metrics: %v ids dropped early, %v lookups, %v found (%v by ingress), %v held; want %d, some, 1 (by ingress), %d",
			evicted, lookups, found, byIngress, m["rocketstore_dedupe_window_ids"], n+1-dedupeMax, dedupeMax)
	}
	t.Logf("%v ids dropped early, %v lookups (ingress %v, writer %v), %v found", evicted, lookups,
		m[`rocketstore_dedupe_store_lookups_total{stage="ingress"}`], m[`rocketstore_dedupe_store_lookups_total{stage="append"}`], found)
	e.stop()
	if got := storedCount(t, dir, first.Topic); got != n+1 {
		t.Fatalf("the topic holds %d messages, want %d: the retry was stored again", got, n+1)
	}
}
