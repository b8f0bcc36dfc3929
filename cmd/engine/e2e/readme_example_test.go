package e2e

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// The README's worked example, "Publish a message" and "Read it back": three messages on
// orders.eu, then every command the README shows, checked against what it prints there. The
// `nats` CLI is not needed: `nats req SUBJECT BODY -H K:V` is a request with those headers, sent
// here with nats.go.

// readmeMsgs are the README's three messages: order-1 as `nats req` sends it, then the two
// "stored next to the one above".
func readmeMsgs() []*nats.Msg {
	return []*nats.Msg{
		msg("orders.eu", "hello world", "Nats-Msg-Id", "order-1", "Rmq-Keys", "order-1"),
		msg("orders.eu", `{"id":2,"total":12.5}`, "Nats-Msg-Id", "order-2", "Rmq-Keys", "order-2 customer-7", "Rmq-Tags", "paid"),
		msg("orders.eu", `{"id":3,"total":99}`, "Nats-Msg-Id", "order-3", "Rmq-Keys", "order-3 customer-7", "Rmq-Tags", "paid"),
	}
}

// jsonKeys lists the top-level keys of a JSON object in their order.
func jsonKeys(t *testing.T, raw []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not a JSON object: %s", raw)
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		keys = append(keys, tok.(string))
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
	}
	return keys
}

// TestREADMEExample publishes the README's messages and runs the README's commands on them.
func TestREADMEExample(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := startEngine(t, dir)
	nc := connect(t, e.url)
	before := time.Now().UnixMilli()

	// $ nats req orders.eu 'hello world' -H Nats-Msg-Id:order-1 -H Rmq-Keys:order-1
	// {"topic":"orders_eu","queueId":2,"queueOffset":0,"msgId":"7F00000100002A9F0000000000000000",
	//  "commitLogOffset":0,"storeTimestamp":1795991690272,"duplicate":false}
	msgs := readmeMsgs()
	first, raw := request(t, nc, msgs[0])
	want := ack{Topic: "orders_eu", QueueID: 2, QueueOffset: 0, MsgID: "7F00000100002A9F0000000000000000", CommitLogOffset: 0, StoreTimestamp: first.StoreTimestamp}
	if first != want {
		t.Fatalf("the README's request got %s, want %+v", raw, want)
	}
	if keys := jsonKeys(t, raw); !slices.Equal(keys, []string{"topic", "queueId", "queueOffset", "msgId", "commitLogOffset", "storeTimestamp", "duplicate"}) {
		t.Fatalf("the ack's fields are %v, not the README's", keys)
	}
	if now := time.Now().UnixMilli(); first.StoreTimestamp < before || first.StoreTimestamp > now {
		t.Fatalf("storeTimestamp %d is not the store time in ms (%d..%d)", first.StoreTimestamp, before, now)
	}
	// The two others: their positions are the README's message ids ...B8 and ...18F.
	second, third := stored(t, nc, msgs[1]), stored(t, nc, msgs[2])
	if second.QueueID != 1 || second.MsgID != "7F00000100002A9F00000000000000B8" ||
		third.QueueID != 0 || third.MsgID != "7F00000100002A9F000000000000018F" {
		t.Fatalf("the README's other two messages got %+v and %+v, want queue 1 at ...B8 and queue 0 at ...18F", second, third)
	}
	waitReadable(t, nc, first, second, third)

	// Sending the same Nats-Msg-Id again within the dedupe window stores nothing and answers
	// "duplicate":true with the first copy's position.
	dup, raw := request(t, nc, readmeMsgs()[0])
	if wantDup := (ack{Topic: "orders_eu", QueueID: 2, QueueOffset: 0, MsgID: first.MsgID, CommitLogOffset: 0, StoreTimestamp: first.StoreTimestamp, Duplicate: true}); dup != wantDup {
		t.Fatalf("the same Nats-Msg-Id again got %s, want %+v", raw, wantDup)
	}

	t.Run("get table offline", func(t *testing.T) {
		t.Parallel()
		// $ engine get --store ./store --topic orders_eu --queue 2
		out := mustCLI(t, append([]string{"get", "--topic", "orders_eu", "--queue", "2"}, offline(dir)...)...)
		lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
		if len(lines) != 3 {
			t.Fatalf("get printed %d lines, want a header, one row and the status:\n%s", len(lines), out)
		}
		if f := strings.Fields(lines[0]); !slices.Equal(f, []string{"TOPIC", "QUEUE", "OFFSET", "MSGID", "STORED", "PROPERTIES", "BODY"}) {
			t.Fatalf("header %q", lines[0])
		}
		stamp := time.UnixMilli(first.StoreTimestamp).UTC().Format("2006-01-02T15:04:05.000Z")
		row := strings.Fields(lines[1])
		if want := []string{"orders_eu", "2", "0", first.MsgID, stamp, "KEYS=order-1", "NATS_SUBJECT=orders.eu", "UNIQ_KEY=order-1", "hello", "world"}; !slices.Equal(row, want) {
			t.Fatalf("row %q, want the fields %q", lines[1], want)
		}
		if want := "status FOUND, next offset 1 (queue orders_eu/2 holds offsets 0 to 0)"; lines[2] != want {
			t.Fatalf("status line %q, want %q", lines[2], want)
		}
	})

	t.Run("get json online", func(t *testing.T) {
		t.Parallel()
		// $ engine get --nats nats://127.0.0.1:4222 --topic orders_eu --queue 2 --json
		out := mustCLI(t, append([]string{"get", "--topic", "orders_eu", "--queue", "2", "--json"}, online(e.url)...)...)
		got := ndjson(t, out)
		if len(got) != 1 {
			t.Fatalf("get --json printed %d objects:\n%s", len(got), out)
		}
		checkREADMEMessage(t, got[0], first)
		if keys := jsonKeys(t, []byte(strings.TrimSpace(out))); !slices.Equal(keys, readmeMessageKeys) {
			t.Fatalf("get --json fields %v, want the README's %v", keys, readmeMessageKeys)
		}
	})

	t.Run("query table offline", func(t *testing.T) {
		t.Parallel()
		// $ engine query --store ./store --topic orders_eu --key customer-7 --begin=-1h
		out := mustCLI(t, append([]string{"query", "--topic", "orders_eu", "--key", "customer-7", "--begin=-1h"}, offline(dir)...)...)
		lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
		if len(lines) != 3 {
			t.Fatalf("query printed %d lines, want a header and two rows:\n%s", len(lines), out)
		}
		// Newest first: order-3 (queue 0), then order-2 (queue 1).
		for i, a := range []ack{third, second} {
			f := strings.Fields(lines[i+1])
			if len(f) < 6 || f[0] != "orders_eu" || f[1] != itoa(a.QueueID) || f[2] != "0" || f[3] != a.MsgID ||
				!strings.HasPrefix(lines[i+1][strings.Index(lines[i+1], "KEYS="):], fmt.Sprintf("KEYS=order-%d customer-7 NATS_SUBJECT=orders.eu TAGS=paid", 3-i)) {
				t.Fatalf("row %d: %q, want %+v", i, lines[i+1], a)
			}
		}
		if !strings.HasSuffix(lines[1], `{"id":3,"total":99}`) || !strings.HasSuffix(lines[2], `{"id":2,"total":12.5}`) {
			t.Fatalf("bodies:\n%s", out)
		}
	})

	t.Run("query json online", func(t *testing.T) {
		t.Parallel()
		// $ engine query -s nats://127.0.0.1:4222 --topic orders_eu --key order-1 --json
		got := ndjson(t, mustCLI(t, "query", "-s", e.url, "--topic", "orders_eu", "--key", "order-1", "--json"))
		if len(got) != 1 {
			t.Fatalf("query --key order-1: %v", got)
		}
		checkREADMEMessage(t, got[0], first)
	})

	t.Run("read API get", func(t *testing.T) {
		t.Parallel()
		// $ nats req '$RS.API.get' '{"topic":"orders_eu","queueId":2,"offset":0,"max":10}'
		reply, err := nc.Request("$RS.API.get", []byte(`{"topic":"orders_eu","queueId":2,"offset":0,"max":10}`), waitTimeout)
		if err != nil {
			t.Fatal(err)
		}
		var r struct {
			Messages   []map[string]any `json:"messages"`
			Status     string           `json:"status"`
			NextOffset int64            `json:"nextOffset"`
			MinOffset  int64            `json:"minOffset"`
			MaxOffset  int64            `json:"maxOffset"`
		}
		if err := json.Unmarshal(reply.Data, &r); err != nil {
			t.Fatalf("%s: %v", reply.Data, err)
		}
		if len(r.Messages) != 1 || r.Status != "FOUND" || r.NextOffset != 1 || r.MinOffset != 0 || r.MaxOffset != 1 {
			t.Fatalf("$RS.API.get: %s", reply.Data)
		}
		checkREADMEMessage(t, r.Messages[0], first)

		// $ nats req '$RS.API.get' '{"topic":"nope","queueId":0}'
		// {"error":{"code":404,"description":"reader: unknown topic or queue: nope/0"}}
		reply, err = nc.Request("$RS.API.get", []byte(`{"topic":"nope","queueId":0}`), waitTimeout)
		if err != nil {
			t.Fatal(err)
		}
		if want := `{"error":{"code":404,"description":"reader: unknown topic or queue: nope/0"}}`; string(reply.Data) != want {
			t.Fatalf("$RS.API.get of an unknown topic: %s, want %s", reply.Data, want)
		}
	})

	t.Run("nats micro ls", func(t *testing.T) {
		t.Parallel()
		// `nats micro ls` asks $SRV.INFO (the micro protocol, ADR-32) and lists the answers.
		reply, err := nc.Request("$SRV.INFO.rocketstore", nil, waitTimeout)
		if err != nil {
			t.Fatal(err)
		}
		var info struct {
			Name        string `json:"name"`
			Version     string `json:"version"`
			Description string `json:"description"`
			Endpoints   []struct {
				Name    string `json:"name"`
				Subject string `json:"subject"`
			} `json:"endpoints"`
		}
		if err := json.Unmarshal(reply.Data, &info); err != nil {
			t.Fatalf("%s: %v", reply.Data, err)
		}
		if info.Name != "rocketstore" || !strings.HasPrefix(info.Description, "RocketStore engine: NATS messages in a RocketMQ") || info.Version == "" {
			t.Fatalf("the service: %s", reply.Data)
		}
		// One endpoint per operation under $RS.API.
		subjects := map[string]bool{}
		for _, ep := range info.Endpoints {
			subjects[ep.Subject] = true
		}
		for _, op := range []string{"get", "msg", "query", "offset_for_time", "offsets", "topics", "commit", "fetch", "replay", "pull"} {
			if !subjects["$RS.API."+op] {
				t.Errorf("no endpoint $RS.API.%s among %v", op, subjects)
			}
		}
	})

	t.Run("msg offsets topics", func(t *testing.T) {
		t.Parallel()
		for _, src := range [][]string{offline(dir), online(e.url)} {
			// engine msg MSGID: every property and the whole body.
			m := ndjson(t, mustCLI(t, append([]string{"msg", second.MsgID, "--json"}, src...)...))
			if len(m) != 1 || m[0]["queueId"] != float64(1) || m[0]["body"] != base64.StdEncoding.EncodeToString(msgs[1].Data) {
				t.Fatalf("msg %s: %v", second.MsgID, m)
			}
			props, _ := m[0]["properties"].(map[string]any)
			if props["KEYS"] != "order-2 customer-7" || props["TAGS"] != "paid" || props["UNIQ_KEY"] != "order-2" || props["NATS_SUBJECT"] != "orders.eu" {
				t.Fatalf("msg %s: properties %v", second.MsgID, props)
			}
			text := mustCLI(t, append([]string{"msg", second.MsgID}, src...)...)
			for _, s := range []string{"KEYS", "order-2 customer-7", "TAGS", "paid", "UNIQ_KEY", `{"id":2,"total":12.5}`} {
				if !strings.Contains(text, s) {
					t.Fatalf("msg %s does not print %q:\n%s", second.MsgID, s, text)
				}
			}
			// engine offsets --topic T: each queue's min/max offsets.
			offs := ndjson(t, mustCLI(t, append([]string{"offsets", "--topic", "orders_eu", "--json"}, src...)...))
			got := map[float64][2]float64{}
			for _, q := range offs {
				min, _ := q["minOffset"].(float64)
				max, _ := q["maxOffset"].(float64)
				got[q["queueId"].(float64)] = [2]float64{min, max}
			}
			if len(offs) != 3 {
				t.Fatalf("offsets: %v, want queues 0, 1 and 2", offs)
			}
			for _, q := range []float64{0, 1, 2} {
				if got[q] != [2]float64{0, 1} {
					t.Fatalf("offsets: queue %v holds %v, want [0, 1): %v", q, got[q], offs)
				}
			}
			// engine topics: the topics and their queues.
			topics := mustCLI(t, append([]string{"topics"}, src...)...)
			if !strings.Contains(topics, "orders_eu") {
				t.Fatalf("topics:\n%s", topics)
			}
		}
	})
}

// readmeMessageKeys are the fields of a message object in the README's `get --json` line, in
// its order.
var readmeMessageKeys = []string{"topic", "queueId", "queueOffset", "commitLogOffset", "size", "msgId", "storeTimestamp",
	"bornTimestamp", "bornHost", "storeHost", "keys", "uniqKey", "properties", "body", "bodySize"}

// checkREADMEMessage checks a message object against the README's line for order-1:
//
//	{"topic":"orders_eu","queueId":2,"queueOffset":0,"commitLogOffset":0,"size":184,
//	 "msgId":"7F00000100002A9F0000000000000000","storeTimestamp":1795991690272,
//	 "bornTimestamp":1795991690271,"bornHost":"0.0.0.0:0","storeHost":"127.0.0.1:10911",
//	 "keys":"order-1","uniqKey":"order-1","properties":{"KEYS":"order-1","NATS_SUBJECT":"orders.eu",
//	 "UNIQ_KEY":"order-1","__CRC32#":"8328828950"},"body":"aGVsbG8gd29ybGQ=","bodySize":11}
func checkREADMEMessage(t *testing.T, m map[string]any, a ack) {
	t.Helper()
	for k, want := range map[string]any{
		"topic": "orders_eu", "queueId": float64(2), "queueOffset": float64(0), "commitLogOffset": float64(0),
		"size": float64(184), "msgId": a.MsgID, "storeTimestamp": float64(a.StoreTimestamp), "bornHost": "0.0.0.0:0",
		"storeHost": "127.0.0.1:10911", "keys": "order-1", "uniqKey": "order-1", "body": "aGVsbG8gd29ybGQ=", "bodySize": float64(11),
	} {
		if m[k] != want {
			t.Errorf("%s = %v, want %v (the README's)", k, m[k], want)
		}
	}
	if born, _ := m["bornTimestamp"].(float64); born <= 0 || born > float64(a.StoreTimestamp) {
		t.Errorf("bornTimestamp %v, want at or before the store time %d", m["bornTimestamp"], a.StoreTimestamp)
	}
	props, _ := m["properties"].(map[string]any)
	if len(props) != 4 || props["KEYS"] != "order-1" || props["NATS_SUBJECT"] != "orders.eu" || props["UNIQ_KEY"] != "order-1" || props["__CRC32#"] == nil {
		t.Errorf("properties %v, want KEYS, NATS_SUBJECT, UNIQ_KEY and __CRC32# as in the README", props)
	}
	if t.Failed() {
		t.Fatalf("message: %v", m)
	}
}
