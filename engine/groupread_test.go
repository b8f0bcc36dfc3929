package engine

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/rocketstore/engine/engine/api"
)

// TestGroupReadSectionsAroundAFencedQueue: a member's read of three queues, the middle one named
// at an epoch it does not hold, answers three sections in the request's order: the first and
// the last with their queues' records (each a record of its own queue, from the offset asked),
// the middle one FENCED without records. (The reply is made in the buffer the records are read
// into, each section's header in a gap before its records; a fenced queue has no records there,
// so its reply is made again around them.) Spoken with plain nats.go, as docs/GROUPS.md says.
func TestGroupReadSectionsAroundAFencedQueue(t *testing.T) {
	s := serve(t, testOptions(t, t.TempDir()), NATSOptions{})
	nc := connect(t, s, "publisher")
	publishAcked(t, nc, "orders", "m-", 40)

	var a api.Assignment
	groupRequest(t, nc, api.DefaultPrefix+".group.join", map[string]any{"group": "g", "topic": "orders"}, &a)
	if len(a.Queues) != 4 {
		t.Fatalf("the only member holds %+v, want the 4 queues", a.Queues)
	}
	queues := []map[string]any{
		{"queueId": a.Queues[0].QueueID, "epoch": a.Queues[0].Epoch, "offset": 2},
		{"queueId": a.Queues[1].QueueID, "epoch": a.Queues[1].Epoch + 1000, "offset": 0}, // not held at that epoch
		{"queueId": a.Queues[2].QueueID, "epoch": a.Queues[2].Epoch, "offset": 0},
	}
	req, _ := json.Marshal(map[string]any{"topic": "orders", "group": "g", "memberId": a.MemberID, "queues": queues, "max": 6})
	m, err := nc.Request(a.API+".read", req, serveTimeout)
	if err != nil {
		t.Fatal(err)
	}
	secs, err := api.ParseReadReply(m)
	if err != nil {
		t.Fatal(err)
	}
	if len(secs) != 3 {
		t.Fatalf("%d sections, want 3", len(secs))
	}
	for i, sec := range secs {
		q := queues[i]
		if sec.QueueID != q["queueId"].(int32) {
			t.Fatalf("section %d is queue %d, want %d", i, sec.QueueID, q["queueId"])
		}
		if i == 1 {
			if sec.Status != api.ReadFenced || sec.Count != 0 || len(sec.Data) != 0 {
				t.Fatalf("the fenced queue's section: %v, %d records, %d bytes", sec.Status, sec.Count, len(sec.Data))
			}
			continue
		}
		if sec.Status != api.ReadFound || sec.Count != 3 {
			t.Fatalf("section %d: %v with %d records, want FOUND with 3 (6 shared by 2 queues)", i, sec.Status, sec.Count)
		}
		k := 0
		for rec, err := range sec.Records() {
			if err != nil {
				t.Fatal(err)
			}
			if want := int64(q["offset"].(int)) + int64(k); rec.QueueID() != sec.QueueID || rec.QueueOffset() != want {
				t.Fatalf("section %d, record %d: queue %d offset %d, want queue %d offset %d", i, k, rec.QueueID(),
					rec.QueueOffset(), sec.QueueID, want)
			}
			k++
		}
	}
}

// groupRequest sends a JSON request and decodes the JSON reply into out, failing on an error reply.
func groupRequest(t *testing.T, nc *nats.Conn, subject string, req, out any) {
	t.Helper()
	b, _ := json.Marshal(req)
	m, err := nc.Request(subject, b, serveTimeout)
	if err != nil {
		t.Fatal(err)
	}
	var e struct {
		Error *api.Error `json:"error"`
	}
	if json.Unmarshal(m.Data, &e) == nil && e.Error != nil {
		t.Fatalf("%s: %v", subject, e.Error)
	}
	if err := json.Unmarshal(m.Data, out); err != nil {
		t.Fatal(fmt.Errorf("%s: %w: %s", subject, err, m.Data))
	}
}
