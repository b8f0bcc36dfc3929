package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
)

// README.md "Publish a message": the ack, the error replies, and how a NATS message becomes a
// RocketMQ record (topic, queue, properties), seen from a plain NATS client.

// javaHash is Java's String.hashCode over the string's UTF-16 code units.
func javaHash(s string) int32 {
	var h int32
	for _, r := range s {
		if r >= 0x10000 {
			r -= 0x10000
			h = 31*h + int32(0xD800+(r>>10))
			h = 31*h + int32(0xDC00+(r&0x3FF))
			continue
		}
		h = 31*h + int32(r)
	}
	return h
}

// queueByHash is RocketMQ's SelectMessageQueueByHash: abs(hashCode % n).
func queueByHash(key string, n int32) int32 {
	v := javaHash(key) % n
	if v < 0 {
		v = -v
	}
	return v
}

// TestErrorReplies: every documented refusal comes back as {"error":{"code":N,"description"}}
// with its code, and nothing is stored: the first message acked after them is at CommitLog
// offset 0 and the store has no topic of theirs.
func TestErrorReplies(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := startEngine(t, dir, "--max-body", "1024")
	nc := connect(t, e.url)
	long := strings.Repeat("t", 128)
	for _, c := range []struct {
		name string
		m    *nats.Msg
		code int
	}{
		{"body over --max-body", msg("err.big", strings.Repeat("x", 1025)), 413},
		{"topic over 127 bytes", msg(long, "x"), 400},
		{"topic over 127 bytes once escaped", msg(strings.Repeat("é", 22), "x"), 400},
		{"header value with 0x01", msg("err.h1", "x", "X-Bad", "a\x01b"), 400},
		{"header value with 0x02", msg("err.h2", "x", "X-Bad", "a\x02b"), 400},
		{"header value not UTF-8", msg("err.h3", "x", "X-Bad", "a\xffb"), 400},
		{"reserved header name", msg("err.h4", "x", "DELAY", "3"), 400},
		{"reserved header name UNIQ_KEY", msg("err.h5", "x", "UNIQ_KEY", "u"), 400},
	} {
		a, raw := request(t, nc, c.m)
		if a.Error == nil || a.Error.Code != c.code || a.Error.Description == "" || a.Topic != "" {
			t.Errorf("%s: %s, want {\"error\":{\"code\":%d,\"description\":...}}", c.name, raw, c.code)
		}
		if keys := jsonKeys(t, raw); len(keys) != 1 || keys[0] != "error" {
			t.Errorf("%s: reply fields %v, want only error", c.name, keys)
		}
	}
	// 127 bytes is a valid topic, and a body of exactly --max-body is accepted.
	first := stored(t, nc, msg(long[:127], strings.Repeat("x", 1024)))
	if first.CommitLogOffset != 0 {
		t.Fatalf("the first message acked after the refusals is at CommitLog offset %d: something refused was stored", first.CommitLogOffset)
	}
	e.stop()
	topics := mustCLI(t, append([]string{"topics", "--json"}, offline(dir)...)...)
	if got := ndjson(t, topics); len(got) != 1 {
		t.Fatalf("topics after the refusals: %s, want only the accepted one", topics)
	}
}

// TestTopicMapping: a subject's topic is the subject with '.' as '_' and every byte outside
// [A-Za-z0-9-] as %XX, injective; with --topic-tokens N the first N tokens are the topic and the
// rest the TAGS.
func TestTopicMapping(t *testing.T) {
	t.Parallel()
	e := startEngine(t, t.TempDir())
	nc := connect(t, e.url)
	topics := map[string]string{}
	for subj, want := range map[string]string{
		"orders.eu": "orders_eu",
		"a_b.c":     "a%5Fb_c",
		"a.b_c":     "a_b%5Fc",
		"price.€":   "price_%E2%82%AC",
		"x-Y.9":     "x-Y_9",
	} {
		a := stored(t, nc, msg(subj, "x"))
		if a.Topic != want {
			t.Errorf("subject %q stored as topic %q, want %q", subj, a.Topic, want)
		}
		if other, dup := topics[a.Topic]; dup {
			t.Errorf("subjects %q and %q share topic %q", subj, other, a.Topic)
		}
		topics[a.Topic] = subj
	}

	tok := startEngine(t, t.TempDir(), "--topic-tokens", "1")
	nc = connect(t, tok.url)
	a := stored(t, nc, msg("orders.eu.paid", "x"))
	if a.Topic != "orders" {
		t.Fatalf("--topic-tokens 1: orders.eu.paid stored as topic %q, want orders", a.Topic)
	}
	waitReadable(t, nc, a)
	got := apiGet(t, nc, a.Topic, a.QueueID, a.QueueOffset, 0)
	if props, _ := got[0]["properties"].(map[string]any); props["TAGS"] != "eu.paid" || props["NATS_SUBJECT"] != "orders.eu.paid" {
		t.Fatalf("--topic-tokens 1: properties %v, want TAGS eu.paid", props)
	}
}

// TestQueueSelection: a message with Rmq-Keys goes to the queue the Java hashCode of its first
// key picks (SelectMessageQueueByHash over 4 queues); without a key, round-robin per message;
// within a queue, one publisher's messages keep their publish order.
func TestQueueSelection(t *testing.T) {
	t.Parallel()
	e := startEngine(t, t.TempDir())
	nc := connect(t, e.url)
	for i := range 12 {
		key := fmt.Sprintf("customer-%d", i*7919)
		a := stored(t, nc, msg("sel.keyed", "x", "Rmq-Keys", key+" other"))
		if want := queueByHash(key, 4); a.QueueID != want {
			t.Errorf("key %q went to queue %d, want %d", key, a.QueueID, want)
		}
	}
	perQueue := map[int32]int{}
	for range 8 {
		perQueue[stored(t, nc, msg("sel.rr", "x")).QueueID]++
	}
	if len(perQueue) != 4 || perQueue[0] != 2 || perQueue[1] != 2 || perQueue[2] != 2 || perQueue[3] != 2 {
		t.Errorf("8 keyless messages went to queues %v, want 2 in each of 4", perQueue)
	}

	// Pipelined: 50 requests sent before any ack is read, on one key: the queue offsets follow
	// the publish order.
	inbox := nats.NewInbox()
	replies := make(chan *nats.Msg, 64)
	sub, err := nc.ChanSubscribe(inbox+".*", replies)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	const n = 50
	for i := range n {
		m := msg("sel.order", fmt.Sprint(i), "Rmq-Keys", "one-key")
		m.Reply = fmt.Sprintf("%s.%d", inbox, i)
		if err := nc.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
	}
	offsetOf := map[int]int64{}
	for range n {
		r := recv(t, "an ack of a pipelined request", replies)
		a := ackOf(t, r.Data)
		var i int
		fmt.Sscan(r.Subject[len(inbox)+1:], &i)
		offsetOf[i] = a.QueueOffset
	}
	for i := range n {
		if offsetOf[i] != int64(i) {
			t.Fatalf("message %d of one publisher on one key is at queue offset %d: out of publish order", i, offsetOf[i])
		}
	}
}

// ackOf decodes an ack that must not be an error.
func ackOf(t *testing.T, raw []byte) ack {
	t.Helper()
	var a ack
	if err := json.Unmarshal(raw, &a); err != nil || a.Error != nil || a.Topic == "" {
		t.Fatalf("reply %s: want an ack", raw)
	}
	return a
}

// TestProperties: the subject in NATS_SUBJECT, Nats-Msg-Id as UNIQ_KEY (generated when absent),
// Rmq-Keys as KEYS and Rmq-Tags as TAGS, every other header under its own name; a message
// published without a reply subject is stored the same way, without an ack.
func TestProperties(t *testing.T) {
	t.Parallel()
	e := startEngine(t, t.TempDir())
	nc := connect(t, e.url)
	with := stored(t, nc, msg("props.a", "with", "Nats-Msg-Id", "id-1", "Rmq-Keys", "k1 k2", "Rmq-Tags", "paid", "X-Trace", "abc", "X-Trace", "def"))
	without := stored(t, nc, msg("props.a", "without"))
	// A plain publish, then a request on the same key from the same connection: both reach the
	// engine in order and go to one queue, so once the request is acked the publish is stored
	// at the offset before it.
	if err := nc.PublishMsg(msg("props.plain", "fire and forget", "Rmq-Keys", "pk")); err != nil {
		t.Fatal(err)
	}
	after := stored(t, nc, msg("props.plain", "after", "Rmq-Keys", "pk"))
	if after.QueueOffset != 1 {
		t.Fatalf("the request after a plain publish is at offset %d, want 1", after.QueueOffset)
	}
	waitReadable(t, nc, with, without, after)

	p := propsOf(t, nc, with)
	for k, v := range map[string]string{"NATS_SUBJECT": "props.a", "UNIQ_KEY": "id-1", "KEYS": "k1 k2", "TAGS": "paid", "X-Trace": "abc"} {
		if p[k] != v {
			t.Errorf("property %s = %v, want %q (all: %v)", k, p[k], v, p)
		}
	}
	for _, k := range []string{"Nats-Msg-Id", "Rmq-Keys", "Rmq-Tags"} {
		if _, ok := p[k]; ok {
			t.Errorf("header %s stored under its own name too: %v", k, p)
		}
	}
	if p := propsOf(t, nc, without); p["UNIQ_KEY"] == nil || p["UNIQ_KEY"] == "" {
		t.Errorf("no UNIQ_KEY generated for a message without Nats-Msg-Id: %v", p)
	}
	plain := apiGet(t, nc, after.Topic, after.QueueID, 0, 0)
	if len(plain) != 2 || plain[0]["body"] != b64("fire and forget") {
		t.Fatalf("the plain publish is not stored before the request: %v", plain)
	}
}

// propsOf reads an acked message's properties through the read API.
func propsOf(t *testing.T, nc *nats.Conn, a ack) map[string]any {
	t.Helper()
	got := apiGet(t, nc, a.Topic, a.QueueID, a.QueueOffset, 0)
	if len(got) == 0 {
		t.Fatalf("%+v not readable", a)
	}
	p, _ := got[0]["properties"].(map[string]any)
	return p
}

// TestSubjectsFlag: --subjects stores those subjects only: a request on another one finds no
// engine (no responders), and nothing of it is stored.
func TestSubjectsFlag(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := startEngine(t, dir, "--subjects", "orders.>,billing.*")
	nc := connect(t, e.url)
	stored(t, nc, msg("orders.eu.x", "x"))
	stored(t, nc, msg("billing.b", "x"))
	for _, subj := range []string{"other.x", "billing.b.c"} {
		if _, err := nc.Request(subj, []byte("x"), waitTimeout); !errors.Is(err, nats.ErrNoResponders) {
			t.Errorf("a request on %s, outside --subjects: %v, want no responders", subj, err)
		}
	}
	e.stop()
	if got := ndjson(t, mustCLI(t, append([]string{"topics", "--json"}, offline(dir)...)...)); len(got) != 2 {
		t.Fatalf("topics: %v, want orders_eu_x and billing_b", got)
	}
}

// TestGeneratedKeysNotIndexed: README, "Properties": the IndexFile holds every Nats-Msg-Id and
// key, not a UNIQ_KEY the engine generated. A query by a message's Nats-Msg-Id finds it; a
// query by the UNIQ_KEY generated for a message without one finds nothing, also after kill -9
// and a restart (whose recovery dispatches the records again from the log), while the message
// is there to read and to find by its offset message id.
func TestGeneratedKeysNotIndexed(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := startEngine(t, dir)
	nc := connect(t, e.url)
	own := stored(t, nc, msg("idx.a", "own id", "Nats-Msg-Id", "order-9"))
	gen := stored(t, nc, msg("idx.a", "generated"))
	waitReadable(t, nc, own, gen)
	key, _ := propsOf(t, nc, gen)["UNIQ_KEY"].(string)
	if key == "" {
		t.Fatal("no UNIQ_KEY generated")
	}
	query := func(k string) []map[string]any {
		return ndjson(t, mustCLI(t, "query", "-s", e.url, "--topic", own.Topic, "--key", k, "--begin=-1h", "--json"))
	}
	if got := query("order-9"); len(got) != 1 || got[0]["body"] != b64("own id") {
		t.Fatalf("query by the publisher's id: %v", got)
	}
	if got := query(key); len(got) != 0 {
		t.Fatalf("query by the generated UNIQ_KEY %s found %v", key, got)
	}
	e.kill()
	e = e.restart(t)
	if rec, _ := e.recovered["records"].(float64); rec < 2 {
		t.Fatalf("recovery dispatched %v records again, want both: %v", rec, e.recovered)
	}
	if got := query("order-9"); len(got) != 1 {
		t.Fatalf("after the restart, query by the publisher's id: %v", got)
	}
	if got := query(key); len(got) != 0 {
		t.Fatalf("after a restart, query by the generated UNIQ_KEY %s found %v", key, got)
	}
	if got := ndjson(t, mustCLI(t, "msg", "-s", e.url, gen.MsgID, "--json")); len(got) != 1 || got[0]["body"] != b64("generated") {
		t.Fatalf("msg %s: %v", gen.MsgID, got)
	}
	e.stop()
}
