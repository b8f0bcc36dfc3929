package e2e

import (
	"encoding/json"
	"testing"

	"github.com/nats-io/nats.go"
)

// TestReadsSayWhatTheyApplied: issue 28 item 7: a get, a pull or a batched read that asks for
// more than the engine's caps (get 1,024 messages, pull 4,096, read 65,536, waitMs 60,000,
// maxBytes 64 MiB or what fits in a reply) is lowered, not refused, and its reply says what was
// applied, so that a client is not misled by a short answer. Requests written from
// engine/api/doc.go and docs/GROUPS.md.
func TestReadsSayWhatTheyApplied(t *testing.T) {
	t.Parallel()
	e := startEngine(t, t.TempDir())
	acked := publishAcked(t, e.url, "caps", []string{"caps.a"}, 3)
	topic, queue := acked[0].ack.Topic, acked[0].ack.QueueID
	nc := connect(t, e.url)

	req, _ := json.Marshal(map[string]any{"topic": topic, "queueId": queue, "offset": 0, "max": 5000,
		"maxBytes": 1 << 30, "waitMs": 120000})
	reply, err := nc.Request("$RS.API.get", req, waitTimeout)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Messages []json.RawMessage `json:"messages"`
		Applied  map[string]int64  `json:"applied"`
	}
	if err := json.Unmarshal(reply.Data, &got); err != nil || len(got.Messages) != 3 ||
		got.Applied["max"] != 1024 || got.Applied["waitMs"] != 60000 ||
		got.Applied["maxBytes"] <= 0 || got.Applied["maxBytes"] > 64<<20 { // 64 MiB, or less: what fits in a reply
		t.Fatalf("get past every cap: %s", reply.Data)
	}

	// pull: its end message's Rs-Applied.
	inbox := nats.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	req, _ = json.Marshal(map[string]any{"topic": topic, "queueId": queue, "offset": 0, "max": 100000, "waitMs": 70000})
	if err := nc.PublishRequest("$RS.API.pull", inbox, req); err != nil {
		t.Fatal(err)
	}
	for range 4 { // three messages, then the end message
		m, err := sub.NextMsg(waitTimeout)
		if err != nil {
			t.Fatal(err)
		}
		if m.Header.Get("Rs-Pull-Status") == "" {
			continue
		}
		if a := m.Header.Get("Rs-Applied"); a != "max=4096,waitMs=60000" {
			t.Fatalf("pull past its caps: Rs-Applied %q, headers %v", a, m.Header)
		}
	}

	// The batched read: max past 65,536, maxBytes past what a reply can carry.
	req, _ = json.Marshal(map[string]any{"topic": topic, "queues": []map[string]any{{"queueId": queue, "offset": 0}},
		"max": 1 << 20, "maxBytes": 1 << 30})
	m, err := nc.Request("$RS.API.read", req, waitTimeout)
	if err != nil {
		t.Fatal(err)
	}
	if m.Header.Get("Rs-Read-Status") != "OK" || m.Header.Get("Rs-Applied") == "" {
		t.Fatalf("read past its caps: headers %v", m.Header)
	}
	var want = "max=65536,maxBytes="
	if a := m.Header.Get("Rs-Applied"); len(a) < len(want) || a[:len(want)] != want {
		t.Fatalf("read past its caps: Rs-Applied %q, want %s<what fits in a reply>", a, want)
	}
}
