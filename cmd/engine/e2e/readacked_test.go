package e2e

import (
	"encoding/json"
	"fmt"
	"testing"
)

// TestReadAfterAck: a read sent right after an ack finds the acked message, every time: a get at
// the acked position (half of them in a topic the message created), a query by its Nats-Msg-Id,
// and a msg by its msgId, in both flush modes, 250 messages each, with no wait in the requests.
// README.md "Flush modes" (what a read sees).
func TestReadAfterAck(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"sync", "async"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			e := startEngine(t, t.TempDir(), "--flush", mode)
			nc := connect(t, e.url)
			const n = 250
			missed := map[string]int{}
			ask := func(endpoint string, req map[string]any) (msgs []map[string]any, raw []byte) {
				t.Helper()
				data, _ := json.Marshal(req)
				reply, err := nc.Request("$RS.API."+endpoint, data, waitTimeout)
				if err != nil {
					t.Fatalf("%s %s: %v", endpoint, data, err)
				}
				var r struct {
					Messages []map[string]any `json:"messages"`
					MsgID    string           `json:"msgId"`
				}
				if err := json.Unmarshal(reply.Data, &r); err != nil {
					t.Fatalf("%s: %s", endpoint, reply.Data)
				}
				if endpoint == "msg" && r.MsgID != "" {
					return []map[string]any{{"msgId": r.MsgID}}, reply.Data
				}
				return r.Messages, reply.Data
			}
			var first string
			for i := range n {
				subject := "acked.same"
				if i%2 == 1 {
					subject = fmt.Sprintf("acked.new%d", i) // a topic of its own, new to the store
				}
				id := fmt.Sprintf("acked-%s-%d", mode, i)
				a := stored(t, nc, msg(subject, "body", "Nats-Msg-Id", id))
				for _, c := range []struct {
					endpoint string
					req      map[string]any
				}{
					{"get", map[string]any{"topic": a.Topic, "queueId": a.QueueID, "offset": a.QueueOffset, "max": 1}},
					{"query", map[string]any{"topic": a.Topic, "key": id}},
					{"msg", map[string]any{"msgId": a.MsgID}},
				} {
					msgs, raw := ask(c.endpoint, c.req)
					if len(msgs) != 1 || msgs[0]["msgId"] != a.MsgID {
						missed[c.endpoint]++
						if first == "" {
							first = fmt.Sprintf("%s %v right after the ack %+v: %s", c.endpoint, c.req, a, raw)
						}
					}
				}
			}
			if len(missed) > 0 {
				t.Fatalf("of %d acked messages read right after their ack, missed %v; the first: %s", n, missed, first)
			}
		})
	}
}
