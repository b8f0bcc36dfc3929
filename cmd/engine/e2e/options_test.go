package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
)

// Settings of docs/CONFIG.md that change what a client sees on the wire, and the read API's
// pull (README.md "The read API over NATS").

// TestIngressOptions: --queues, --keys-header, --tags-header, --queue-key-header, --store-host
// (in the message ids), --no-prop-crc (no __CRC32# property), --dedupe-max 0 (dedupe off).
func TestIngressOptions(t *testing.T) {
	t.Parallel()
	e := startEngine(t, t.TempDir(), "--queues", "8", "--keys-header", "X-Keys", "--tags-header", "X-Tags",
		"--queue-key-header", "X-Shard", "--store-host", "10.1.2.3:9876", "--no-prop-crc", "--dedupe-max", "0")
	nc := connect(t, e.url)
	perQueue := map[int32]int{}
	for range 16 {
		perQueue[stored(t, nc, msg("opt.rr", "x")).QueueID]++
	}
	if len(perQueue) != 8 {
		t.Errorf("--queues 8: 16 keyless messages went to queues %v", perQueue)
	}
	a := stored(t, nc, msg("opt.k", "x", "X-Keys", "k1 k2", "X-Tags", "t", "X-Shard", "shard-7", "Nats-Msg-Id", "same"))
	if want := queueByHash("shard-7", 8); a.QueueID != want {
		t.Errorf("--queue-key-header X-Shard: queue %d, want %d (the hash of the header's value)", a.QueueID, want)
	}
	if want := fmt.Sprintf("0A01020300002694%016X", a.CommitLogOffset); a.MsgID != want {
		t.Errorf("--store-host 10.1.2.3:9876: message id %s, want %s", a.MsgID, want)
	}
	again := stored(t, nc, msg("opt.k", "x", "X-Shard", "shard-7", "Nats-Msg-Id", "same"))
	if again.Duplicate || again.QueueOffset != a.QueueOffset+1 {
		t.Errorf("--dedupe-max 0: the same id again %+v, want stored again", again)
	}
	waitReadable(t, nc, a)
	p := propsOf(t, nc, a)
	if p["KEYS"] != "k1 k2" || p["TAGS"] != "t" || p["X-Shard"] != "shard-7" {
		t.Errorf("--keys-header/--tags-header: properties %v", p)
	}
	if _, ok := p["__CRC32#"]; ok {
		t.Errorf("--no-prop-crc: a __CRC32# property: %v", p)
	}
	e.stop()
}

// TestAPIOptions: --api-prefix moves the read API (the old subject has no responders, the
// commands take --api-prefix); --no-read-api serves none; --no-index makes a key query fail
// with 501.
func TestAPIOptions(t *testing.T) {
	t.Parallel()
	e := startEngine(t, t.TempDir(), "--api-prefix", "my.api", "--subjects", "orders.>")
	nc := connect(t, e.url)
	a := stored(t, nc, msg("orders.api", "x", "Nats-Msg-Id", "api-1"))
	// The ack says stored; the topic is listed once dispatch has made its queue.
	waitReadableAt(t, nc, "my.api", a)
	if _, err := nc.Request("$RS.API.topics", nil, waitTimeout); !errors.Is(err, nats.ErrNoResponders) {
		t.Errorf("$RS.API.topics with --api-prefix my.api: %v, want no responders", err)
	}
	reply, err := nc.Request("my.api.topics", nil, waitTimeout)
	if err != nil || !strings.Contains(string(reply.Data), a.Topic) {
		t.Fatalf("my.api.topics: %v %s", err, reply.Data)
	}
	if got := ndjson(t, mustCLI(t, "topics", "--json", "--api-prefix", "my.api", "--nats", e.url)); len(got) != 1 {
		t.Errorf("topics --api-prefix my.api: %v", got)
	}
	e.stop()

	// Under a prefix that the subjects stored include, the API's traffic is still not stored.
	dir := t.TempDir()
	wide := startEngine(t, dir, "--api-prefix", "my.api")
	if reply, err := connect(t, wide.url).Request("my.api.topics", nil, waitTimeout); err != nil || !strings.HasPrefix(string(reply.Data), `{"topics":`) {
		t.Errorf("my.api.topics with every subject stored: %v %s, want the API's answer", err, reply.Data)
	}
	wide.stop()
	if got := ndjsonOrNone(t, mustCLI(t, append([]string{"topics", "--json"}, offline(dir)...)...)); len(got) != 0 {
		t.Errorf("the API's requests were stored: %v", got)
	}

	// (With --subjects '>' the ingress subscription matches $RS.API.* too: it stores nothing of
	// it and answers nothing, but a request then waits for its timeout instead of no responders.)
	off := startEngine(t, t.TempDir(), "--no-read-api", "--subjects", "orders.>")
	if _, err := connect(t, off.url).Request("$RS.API.topics", nil, waitTimeout); !errors.Is(err, nats.ErrNoResponders) {
		t.Errorf("--no-read-api: %v, want no responders", err)
	}
	off.stop()

	dir = t.TempDir()
	noidx := startEngine(t, dir, "--no-index")
	nc = connect(t, noidx.url)
	b := stored(t, nc, msg("noidx.a", "x", "Nats-Msg-Id", "i-1"))
	waitReadable(t, nc, b)
	reply, err = nc.Request("$RS.API.query", []byte(`{"topic":"noidx_a","key":"i-1"}`), waitTimeout)
	var r struct {
		Error *wireError `json:"error"`
	}
	if err != nil || json.Unmarshal(reply.Data, &r) != nil || r.Error == nil || r.Error.Code != 501 {
		t.Errorf("a key query with --no-index: %v %s, want a 501 error", err, reply.Data)
	}
	noidx.stop()
}

// TestPull: $RS.API.pull answers with the messages themselves, as NATS messages with their
// original body and headers on the reply subject, then an end message with the next offset.
func TestPull(t *testing.T) {
	t.Parallel()
	e := startEngine(t, t.TempDir())
	nc := connect(t, e.url)
	var acks []ack
	for i := range 3 {
		acks = append(acks, stored(t, nc, msg("pull.a", fmt.Sprint("body ", i), "Rmq-Keys", "k", "X-Note", fmt.Sprint(i))))
	}
	waitReadable(t, nc, acks[2])
	msgs, end := pull(t, nc, map[string]any{"topic": "pull_a", "queueId": acks[0].QueueID, "offset": 0, "max": 10})
	if len(msgs) != 3 || end.Header.Get("Rs-Pull-Status") != "FOUND" || end.Header.Get("Rs-Pull-Next-Offset") != "3" || end.Header.Get("Rs-Pull-Count") != "3" {
		t.Fatalf("pull end after %d messages: %v", len(msgs), end.Header)
	}
	for i, m := range msgs {
		if string(m.Data) != fmt.Sprint("body ", i) || m.Header.Get("X-Note") != fmt.Sprint(i) || m.Header.Get("Rmq-Keys") != "k" {
			t.Fatalf("pulled message %d: %q %v", i, m.Data, m.Header)
		}
		if !strings.HasPrefix(m.Reply, fmt.Sprintf("$RS.PULL.%d.", i)) || !strings.HasSuffix(m.Reply, acks[i].MsgID) {
			t.Fatalf("pulled message %d: position %q, want $RS.PULL.%d.<time>.%s", i, m.Reply, i, acks[i].MsgID)
		}
	}
	e.stop()
}

// TestNoReply: --no-reply turns every reply off: a request is stored without an ack, a refused
// one gets no error. Over an external server, so that once the engine has stopped (a graceful
// stop sends every reply it would send) a flush of the client shows whatever came back.
func TestNoReply(t *testing.T) {
	t.Parallel()
	ns := startNATS(t, 0)
	dir := t.TempDir()
	e := startEngine(t, dir, "--server", clientURL(ns), "--no-reply", "--queues", "1")
	nc := connect(t, clientURL(ns))
	replies, err := nc.SubscribeSync("replies.>")
	if err != nil {
		t.Fatal(err)
	}
	kept, refused := msg("noreply.a", "kept"), msg("noreply.a", "refused", "DELAY", "1")
	kept.Reply, refused.Reply = "replies.kept", "replies.refused"
	for _, m := range []*nats.Msg{kept, refused} {
		if err := nc.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	e.stop()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if n, _, _ := replies.Pending(); n != 0 {
		m, _ := replies.NextMsg(0)
		t.Fatalf("--no-reply: %d replies, the first on %s: %q", n, m.Subject, m.Data)
	}
	if got := readQueue(t, offline(dir), "noreply_a", 0); len(got) != 1 || got[0]["body"] != b64("kept") {
		t.Fatalf("stored %v, want the one valid message", got)
	}
}
