package e2e

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// TestFilteredGetSaysScanStopped: a one-shot filtered get (the README's `nats req '$RS.API.get'`
// with "subject") whose 800-unit scan window holds no match answers NO_MATCHED_MESSAGE, and says
// that its scan stopped there ("scanStopped":true, "nextOffset":800) although later offsets match;
// the get from there finds the match, and a scan that reached the head does not say so. A pull
// over the same queue ends with Rs-Pull-Scan-Stopped only when its own, larger window stopped it.
// engine/api doc ("Bounds"), README "Read it back".
func TestFilteredGetSaysScanStopped(t *testing.T) {
	t.Parallel()
	e := startEngine(t, t.TempDir(), "--topics", "scan.*", "--queues", "1")
	nc := connect(t, e.url)
	const misses = 850
	for i := range misses {
		if err := nc.Publish("scan.other", []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	last := stored(t, nc, msg("scan.wanted", "the match"))
	if last.QueueOffset != misses {
		t.Fatalf("the match stored at %d, want %d (a publish was dropped?)", last.QueueOffset, misses)
	}
	waitReadable(t, nc, last)

	type reply struct {
		Messages    []json.RawMessage `json:"messages"`
		Status      string            `json:"status"`
		NextOffset  int64             `json:"nextOffset"`
		ScanStopped bool              `json:"scanStopped"`
	}
	get := func(offset int64, subject string) reply {
		t.Helper()
		req, _ := json.Marshal(map[string]any{"topic": "scan", "queueId": 0, "offset": offset, "subject": subject})
		m, err := nc.Request("$RS.API.get", req, waitTimeout)
		if err != nil {
			t.Fatal(err)
		}
		var r reply
		if err := json.Unmarshal(m.Data, &r); err != nil {
			t.Fatalf("get: %s", m.Data)
		}
		return r
	}
	if r := get(0, "scan.wanted"); r.Status != "NO_MATCHED_MESSAGE" || r.NextOffset != 800 || !r.ScanStopped || len(r.Messages) != 0 {
		t.Fatalf("first window: %+v, want NO_MATCHED_MESSAGE, nextOffset 800, scanStopped", r)
	}
	if r := get(800, "scan.wanted"); r.Status != "FOUND" || len(r.Messages) != 1 || r.ScanStopped {
		t.Fatalf("from the next offset: %+v, want the match", r)
	}
	if r := get(100, "scan.none"); r.Status != "NO_MATCHED_MESSAGE" || r.NextOffset != misses+1 || r.ScanStopped {
		t.Fatalf("a scan to the head: %+v, want nextOffset %d without scanStopped", r, misses+1)
	}

	// A pull scans 65,536 units: it reaches the match, and says nothing about stopping.
	inbox := nats.NewInbox()
	got := make(chan *nats.Msg, 4)
	sub, err := nc.ChanSubscribe(inbox, got)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	req, _ := json.Marshal(map[string]any{"topic": "scan", "queueId": 0, "offset": 0, "subject": "scan.wanted"})
	if err := nc.PublishRequest("$RS.API.pull", inbox, req); err != nil {
		t.Fatal(err)
	}
	if m := recv(t, "the pulled match", got); string(m.Data) != "the match" {
		t.Fatalf("pulled %q", m.Data)
	}
	select {
	case end := <-got:
		if end.Header.Get("Rs-Pull-Status") != "FOUND" || end.Header.Get("Rs-Pull-Scan-Stopped") != "" {
			t.Fatalf("end of the pull: %v", end.Header)
		}
	case <-time.After(waitTimeout):
		t.Fatal("no end message")
	}
}
