package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
)

// docs/SCALE-OUT.md where one machine can show it: the partition mapping, an engine that owns
// some partitions (its embedded server carries the mapping: --partition-subjects), a second
// engine on the first one's server owning the rest, no responders for a partition without an
// owner, routed and fan-out reads.

// partitionOf is SCALE-OUT.md's rule: FNV-1a (32 bits) of the key token, mod P.
func partitionOf(key string, p uint32) int32 {
	h := fnv.New32a()
	h.Write([]byte(key))
	return int32(h.Sum32() % p)
}

// keyIn finds a key whose partition (of 64) is in [lo, hi], different from those in avoid.
func keyIn(t *testing.T, lo, hi int32, avoid ...string) string {
	t.Helper()
	for i := range 10000 {
		k := fmt.Sprintf("cust%d", i)
		if p := partitionOf(k, 64); p >= lo && p <= hi && !contains(avoid, k) {
			return k
		}
	}
	t.Fatalf("no key in partitions %d-%d", lo, hi)
	return ""
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// TestPartitionMap: `engine partition-map` prints the mapping blocks SCALE-OUT.md shows.
func TestPartitionMap(t *testing.T) {
	t.Parallel()
	out := mustCLI(t, "partition-map", "--partitions", "64", "orders.*", "orders.*.>")
	for _, line := range []string{
		"mappings {",
		`"orders.*": "rmq.p.{{partition(64,1)}}.orders.{{wildcard(1)}}"`,
		`"orders.*.>": "rmq.p.{{partition(64,1)}}.orders.{{wildcard(1)}}.>"`,
	} {
		if !strings.Contains(out, line) {
			t.Errorf("partition-map does not print %q:\n%s", line, out)
		}
	}
}

// TestPartitionAlice: SCALE-OUT.md's example: the mapping "rewrites the subject to
// rmq.p.<p>.orders.alice, where <p> is FNV-1a (32 bits) of the key token alice, mod 64": the
// partition the doc names is the one FNV-1a gives.
func TestPartitionAlice(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "SCALE-OUT.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`rmq\.p\.(\d+)\.orders\.alice`).FindSubmatch(doc)
	if m == nil {
		t.Fatal("SCALE-OUT.md no longer shows where orders.alice goes")
	}
	if p := partitionOf("alice", 64); itoa(p) != string(m[1]) {
		t.Fatalf("alice is in partition %d, SCALE-OUT.md says %s", p, m[1])
	}
}

// TestPartitionedIngest: an engine owning partitions 0-31 of 64 stores a message in the queue
// of its key's partition, under the publisher's subject; a partition without an owner gets no
// responders at once; once a second engine owns 32-63, the retry with the same Nats-Msg-Id is
// stored and a second retry is a duplicate; reads go to the owner (per-partition subjects) or
// fan out to every engine, and with an engine gone a fan-out read names what is missing.
func TestPartitionedIngest(t *testing.T) {
	t.Parallel()
	common := []string{"--partitions", "64", "--topic-tokens", "1"}
	a := startEngine(t, t.TempDir(), append(common, "--owned-partitions", "0-31", "--partition-subjects", "orders.*", "--store-host", "127.0.0.1:20001")...)
	nc := connect(t, a.url)

	k1 := keyIn(t, 0, 31)
	ack1 := stored(t, nc, msg("orders."+k1, "one", "Rmq-Keys", k1, "Nats-Msg-Id", "p-1"))
	if ack1.Topic != "orders" || ack1.QueueID != partitionOf(k1, 64) {
		t.Fatalf("orders.%s: %+v, want topic orders in queue %d", k1, ack1, partitionOf(k1, 64))
	}
	waitReadable(t, nc, ack1)
	p := propsOf(t, nc, ack1)
	if p["NATS_SUBJECT"] != "orders."+k1 || p["TAGS"] != k1 {
		t.Fatalf("properties %v, want the publisher's subject and the key as TAGS", p)
	}

	k2 := keyIn(t, 32, 63)
	retry := msg("orders."+k2, "two", "Rmq-Keys", k2, "Nats-Msg-Id", "p-2")
	if _, err := nc.RequestMsg(retry, waitTimeout); !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("a partition without an owner: %v, want no responders", err)
	}

	// Reads routed to the owner: $RS.API.p.<p>.get.
	req, _ := json.Marshal(map[string]any{"topic": "orders", "queueId": ack1.QueueID, "offset": 0, "max": 1})
	reply, err := nc.Request(fmt.Sprintf("$RS.API.p.%d.get", ack1.QueueID), req, waitTimeout)
	if err != nil || !strings.Contains(string(reply.Data), ack1.MsgID) {
		t.Fatalf("routed get: %v %s", err, reply.Data)
	}

	b := startEngine(t, t.TempDir(), append(common, "--owned-partitions", "32-63", "--server", a.url, "--store-host", "127.0.0.1:20002")...)
	t.Run("fan-out before the second engine has the topic", func(t *testing.T) {
		// docs/SCALE-OUT.md: an empty partition is an empty queue: all 64 answer, one holds a message.
		got := ndjson(t, mustCLI(t, "offsets", "--nats", a.url, "--partitions", "64", "--topic", "orders", "--json"))
		held := 0
		for _, q := range got {
			if q["maxOffset"].(float64) > q["minOffset"].(float64) {
				held++
			}
		}
		if len(got) != 64 || held != 1 {
			t.Fatalf("fan-out offsets: %v, want 64 queues, one of them (engine A's) holding a message", got)
		}
		// A topic that no engine has is not 64 empty queues: exit 1, saying so.
		r := runCLI(t, "offsets", "--nats", a.url, "--partitions", "64", "--topic", "typo")
		if r.code != 1 || !strings.Contains(r.stderr, `no engine has topic "typo"`) {
			t.Fatalf("fan-out offsets of a topic no engine has: exit %d, stderr %q, want 1 saying so", r.code, r.stderr)
		}
	})
	ack2 := stored(t, nc, retry)
	if ack2.QueueID != partitionOf(k2, 64) || ack2.Duplicate {
		t.Fatalf("the retry once an owner is up: %+v", ack2)
	}
	if again := stored(t, nc, retry); !again.Duplicate || again.MsgID != ack2.MsgID {
		t.Fatalf("the second retry: %+v, want a duplicate of %+v", again, ack2)
	}
	waitReadable(t, nc, ack2)

	// Fan-out: both engines answer; every partition is covered.
	got := ndjson(t, mustCLI(t, "offsets", "--nats", a.url, "--partitions", "64", "--topic", "orders", "--json"))
	queues := map[float64]float64{}
	for _, q := range got {
		if q["maxOffset"].(float64) > 0 {
			queues[q["queueId"].(float64)] = q["maxOffset"].(float64)
		}
	}
	if len(got) != 64 || len(queues) != 2 || queues[float64(ack1.QueueID)] != 1 || queues[float64(ack2.QueueID)] != 1 {
		t.Fatalf("fan-out offsets: %v, want queues %d and %d with one message each", got, ack1.QueueID, ack2.QueueID)
	}
	// A routed get through the CLI reaches B's partition from A's server.
	if got := ndjson(t, mustCLI(t, "get", "--nats", a.url, "--partitions", "64", "--topic", "orders", "--queue", itoa(ack2.QueueID), "--json")); len(got) != 1 || got[0]["msgId"] != ack2.MsgID {
		t.Fatalf("routed get of queue %d: %v", ack2.QueueID, got)
	}

	// Never silently short: with B gone, the fan-out says which partitions did not answer.
	b.stop()
	r := runCLI(t, "offsets", "--nats", a.url, "--partitions", "64", "--topic", "orders", "--timeout", "2s")
	if r.code != 1 || !strings.Contains(r.stderr, "32") || !strings.Contains(r.stderr, "63") {
		t.Fatalf("fan-out with an engine gone: exit %d, stderr %q, want 1 naming partitions 32-63", r.code, r.stderr)
	}
	a.stop()
}
