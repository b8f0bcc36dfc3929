package e2e

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// TestJetStreamBridgeDedupesAfterRestart: the JetStream bridge (--js-stream) stores each message
// once even when its ack to JetStream is lost and the engine is killed: the engine stores the
// messages but cannot ack them (its user may not publish to $JS.ACK.>, as if every ack were lost
// on the way), is killed with SIGKILL, and a new engine on the same store gets every message
// again from JetStream. It answers those redeliveries from the store (acks them) instead of
// storing them twice, messages with a Nats-Msg-Id and without one alike: each record's UNIQ_KEY is
// the bridge's dedupe key, the Nats-Msg-Id or "$JS:<stream>:<sequence>", which the IndexFile
// holds. A real nats-server with JetStream; docs/ARCHITECTURE.md (the JetStream bridge).
func TestJetStreamBridgeDedupesAfterRestart(t *testing.T) {
	t.Parallel()
	const pw = "secret"
	ns := startNATS(t, 0, func(o *natsserver.Options) {
		o.JetStream = true
		o.StoreDir = t.TempDir()
		o.Users = []*natsserver.User{
			{Username: "noack", Password: pw, Permissions: &natsserver.Permissions{
				Publish: &natsserver.SubjectPermission{Allow: []string{">"}, Deny: []string{"$JS.ACK.>"}}}},
			{Username: "engine", Password: pw},
			{Username: "client", Password: pw},
		}
	})
	url := clientURL(ns)
	nc, err := nats.Connect(url, nats.UserInfo("client", pw))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := nc.JetStream()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.AddStream(&nats.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}}); err != nil {
		t.Fatal(err)
	}
	// JetStream delivers again what is not acked within a second.
	if _, err := js.AddConsumer("ORDERS", &nats.ConsumerConfig{Durable: "bridge", AckPolicy: nats.AckExplicitPolicy,
		DeliverPolicy: nats.DeliverAllPolicy, AckWait: time.Second}); err != nil {
		t.Fatal(err)
	}
	const n = 20
	want := map[string]string{} // dedupe key -> body
	for i := range n {
		m := nats.NewMsg("orders.bridge")
		m.Data = fmt.Appendf(nil, "order %d", i)
		if i%2 == 0 {
			m.Header.Set("Nats-Msg-Id", fmt.Sprintf("order-%d", i))
		}
		pa, err := js.PublishMsg(m)
		if err != nil {
			t.Fatal(err)
		}
		key := m.Header.Get("Nats-Msg-Id")
		if key == "" {
			key = fmt.Sprintf("$JS:ORDERS:%d", pa.Sequence)
		}
		want[key] = string(m.Data)
	}

	dir := t.TempDir()
	bridge := func(user string) []string {
		return []string{"--server", url, "--user", user, "--password", pw, "--js-stream", "ORDERS", "--js-consumer", "bridge"}
	}
	stored := func() int64 { // how many records topic orders_bridge holds, through the read API
		t.Helper()
		reply, err := nc.Request("$RS.API.offsets", []byte(`{"topic":"orders_bridge"}`), waitTimeout)
		if err != nil {
			t.Fatal(err)
		}
		var r struct {
			Queues []struct {
				MaxOffset int64 `json:"maxOffset"`
			} `json:"queues"`
		}
		if json.Unmarshal(reply.Data, &r) != nil {
			return 0 // the topic is not there yet
		}
		var sum int64
		for _, q := range r.Queues {
			sum += q.MaxOffset
		}
		return sum
	}
	e := startEngine(t, dir, bridge("noack")...)
	untilDeadline(t, "every message stored", func() bool { return stored() >= n })
	if ci, err := js.ConsumerInfo("ORDERS", "bridge"); err != nil || ci.AckFloor.Stream != 0 {
		t.Fatalf("acks reached JetStream although the engine may not send them: %+v, %v", ci, err)
	}
	e.kill() // stored, never acked

	e = startEngine(t, dir, bridge("engine")...)
	untilDeadline(t, "every message acked", func() bool {
		ci, err := js.ConsumerInfo("ORDERS", "bridge")
		return err == nil && ci.AckFloor.Stream == n && ci.NumAckPending == 0
	})
	if got := stored(); got != n {
		t.Fatalf("%d records after the restart, want %d: redeliveries stored again", got, n)
	}
	// Each record once, under its dedupe key.
	for q := range 4 {
		for _, m := range apiGetAs[map[string]any](t, nc, map[string]any{"topic": "orders_bridge", "queueId": q, "offset": 0, "max": n}) {
			key, _ := m["uniqKey"].(string)
			if body, ok := want[key]; !ok || m["body"] != b64(body) {
				t.Fatalf("record %v: UNIQ_KEY %q is not the dedupe key of its message", m["queueOffset"], key)
			}
			delete(want, key)
		}
	}
	if len(want) != 0 {
		t.Fatalf("not stored: %v", want)
	}
	e.stop()
}
