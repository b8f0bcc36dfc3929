package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// TestClusterExampleSingleCopy runs scripts/cluster-example.sh in its default mode: three
// engines, each owning a third of 64 partitions. Keyed requests through server 1 are acked by
// their partitions' owners (the ack's queue is the key's partition), routed gets read every
// message back from its owner, no engine warns of the default store host, and SIGTERM to the
// script stops every engine cleanly.
func TestClusterExampleSingleCopy(t *testing.T) {
	began := time.Now()
	x := startExample(t, "")
	for i := 1; i <= 3; i++ {
		x.waitLog(i, "engine running")
	}
	x.waitAllReady()
	nc, err := nats.Connect(x.clientURL(1))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	keys := partitionKeys(examplePartitions)
	for _, key := range keys {
		waitResponder(t, nc, "orders."+key) // interest crosses the routes asynchronously
	}
	const perKey = 3
	for n := range perKey {
		for p, key := range keys {
			m := nats.NewMsg("orders." + key)
			m.Header.Set(nats.MsgIdHdr, fmt.Sprintf("m-%d-%d", p, n))
			m.Data = fmt.Appendf(nil, "%s %d", key, n)
			reply, err := requestOwned(nc, m)
			if err != nil {
				t.Fatalf("orders.%s: %v", key, err)
			}
			var ack struct {
				Topic       string `json:"topic"`
				QueueID     int    `json:"queueId"`
				QueueOffset int64  `json:"queueOffset"`
				Duplicate   bool   `json:"duplicate"`
			}
			if err := json.Unmarshal(reply.Data, &ack); err != nil || ack.Topic != "orders" || ack.QueueID != p ||
				ack.QueueOffset != int64(n) || ack.Duplicate {
				t.Fatalf("orders.%s (partition %d), message %d: ack %s (%v)", key, p, n, reply.Data, err)
			}
		}
	}
	for p, key := range keys {
		reply, err := nc.Request(fmt.Sprintf("$RS.API.p.%d.get", p), getRequest(p), waitTimeout)
		if err != nil {
			t.Fatalf("get partition %d: %v", p, err)
		}
		var g wireGet
		if err := json.Unmarshal(reply.Data, &g); err != nil || g.Status != "FOUND" || len(g.Messages) != perKey {
			t.Fatalf("get partition %d: %s (%v)", p, reply.Data, err)
		}
		for n, m := range g.Messages {
			if m.QueueID != p || m.QueueOffset != int64(n) || string(m.Body) != fmt.Sprintf("%s %d", key, n) ||
				m.UniqKey != fmt.Sprintf("m-%d-%d", p, n) {
				t.Fatalf("partition %d offset %d: %+v", p, n, m)
			}
		}
	}
	for i := 1; i <= 3; i++ {
		if l := x.find(i, "partitioned ingest with the default store host"); l != nil {
			t.Errorf("engine %d: %v", i, l)
		}
	}
	if code := x.stop(); code != 0 {
		t.Fatalf("the example exited %d after SIGTERM", code)
	}
	for i := 1; i <= 3; i++ {
		x.waitLog(i, "stopped cleanly")
	}
	t.Logf("single-copy example: %v", time.Since(began).Round(time.Millisecond))
}

// waitResponder sends an empty-bodied request to a dedicated probe subject of subject's
// partition until one engine answers (interest crosses routes asynchronously), bounded. The
// probe is refused (an empty topic key would not be): it stores nothing.
// requestOwned sends m as a publisher that retries would: while the engines settle who owns
// which partition after they start, a partition can be between owners for a moment, and a
// request then finds no responder. The Nats-Msg-Id makes a retry safe.
func requestOwned(nc *nats.Conn, m *nats.Msg) (*nats.Msg, error) {
	deadline := time.Now().Add(waitTimeout)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		reply, err := nc.RequestMsg(m, waitTimeout)
		if !errors.Is(err, nats.ErrNoResponders) || time.Now().After(deadline) {
			return reply, err
		}
		<-tick.C
	}
}

func waitResponder(t *testing.T, nc *nats.Conn, subject string) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	probe := nats.NewMsg(subject)
	probe.Header.Set("Bad\x01", "x") // a header the engine refuses: nothing is stored
	for {
		_, err := nc.RequestMsg(probe, waitTimeout)
		if !errors.Is(err, nats.ErrNoResponders) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no engine answers %s", subject)
		}
		<-tick.C
	}
}
