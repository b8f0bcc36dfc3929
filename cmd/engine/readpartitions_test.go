package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/rocketstore/engine/engine/api"
	"github.com/rocketstore/engine/internal/wire"
	"github.com/rocketstore/engine/stages/ingress/route"
)

// exampleOwned are the example's partition sets (docs/SCALE-OUT.md, scripts/cluster-example.sh).
var exampleOwned = []string{"0-21", "22-42", "43-63"}

// startExampleCluster runs the documented three-server, three-engine deployment (the files of
// docs/examples/cluster, ports and directories moved to free ones): three `engine run`
// processes, each embedding one server of the cluster and owning exampleOwned[i] of 64
// partitions. It returns the servers' client URLs once server 1 routes a request of every
// partition to an engine.
func startExampleCluster(t *testing.T) []string {
	t.Helper()
	dir := t.TempDir()
	var replace []string
	for i := range 3 {
		replace = append(replace, fmt.Sprintf("127.0.0.1:%d", 4222+i), fmt.Sprintf("127.0.0.1:%d", freePort(t)),
			fmt.Sprintf("127.0.0.1:%d", 6222+i), fmt.Sprintf("127.0.0.1:%d", freePort(t)),
			fmt.Sprintf("./cluster-example/n%d/", i+1), filepath.Join(dir, fmt.Sprintf("n%d", i+1))+"/")
	}
	r := strings.NewReplacer(replace...)
	var urls []string
	for i := range 3 {
		text, err := os.ReadFile(filepath.Join("..", "..", "docs", "examples", "cluster", fmt.Sprintf("n%d.conf", i+1)))
		if err != nil {
			t.Fatal(err)
		}
		conf := filepath.Join(dir, fmt.Sprintf("n%d.conf", i+1))
		if err := os.WriteFile(conf, []byte(r.Replace(string(text))), 0o600); err != nil {
			t.Fatal(err)
		}
		args := append(storeArgs(filepath.Join(dir, fmt.Sprintf("e%d", i+1))), "--nats-config", conf,
			"--partitions", "64", "--owned-partitions", exampleOwned[i], "--topic-tokens", "1",
			"--store-host", fmt.Sprintf("127.0.0.1:%d", 10911+i))
		c := startChild(t, args...)
		running, _ := c.waitLog(0, "engine running")
		url, _ := running["nats"].(string)
		urls = append(urls, url)
		t.Cleanup(func() {
			c.signal(syscall.SIGTERM)
			if code := c.wait(); code != 0 {
				t.Errorf("engine %d exited %d:\n%s", i+1, code, c.log())
			}
		})
	}
	nc, err := nats.Connect(urls[0])
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	for p := range 64 {
		waitResponder(t, nc, "orders."+keyOfPartition(t, p))
	}
	return urls
}

// keyOfPartition is a key that partition p of 64 holds.
func keyOfPartition(t *testing.T, p int) string {
	t.Helper()
	for i := range 100_000 {
		if k := "k" + strconv.Itoa(i); route.PartitionOf(k, 64) == p {
			return k
		}
	}
	t.Fatalf("no key for partition %d", p)
	return ""
}

// TestReadPartitionsEmptyEngines: on the three-engine cluster, 30 messages on three keys whose
// partitions engine 1 owns leave engines 2 and 3 without any message of the topic, and engine 1
// without most of its queues. The partition-aware read commands still answer for every
// partition: the fan-out offsets list all 64 queues (the empty ones at 0), the offsets for a
// time too, a get of an empty partition finds nothing (exit 0), and a topic that no engine has
// is said to be so (exit 1).
func TestReadPartitionsEmptyEngines(t *testing.T) {
	t.Setenv("NATS_URL", "")
	urls := startExampleCluster(t)
	nc, err := nats.Connect(urls[1]) // through another server than the owner's
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	keys := []string{keyOfPartition(t, 3), keyOfPartition(t, 9), keyOfPartition(t, 20)} // engine 1's
	var acks []wire.Ack
	for i := range 30 {
		m := nats.NewMsg("orders." + keys[i%3])
		m.Data = []byte(strconv.Itoa(i))
		m.Header.Set(nats.MsgIdHdr, "e-"+strconv.Itoa(i))
		reply, err := nc.RequestMsg(m, waitTimeout)
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		a, err := wire.ParseReply(reply.Data)
		if err != nil || a.Topic != "orders" {
			t.Fatalf("message %d: %+v, %v", i, a, err)
		}
		acks = append(acks, a)
	}
	held := map[int32][]wire.Ack{}
	for _, a := range acks {
		held[a.QueueID] = append(held[a.QueueID], a)
	}
	src := []string{"--nats", urls[2], "--partitions", "64"}

	// Every queue's bounds, the empty partitions (on all three engines) at 0.
	t.Run("offsets", func(t *testing.T) {
		bounds := ndjson[queueBounds](t, mustRead(t, with(src, "offsets", "--topic", "orders", "--json")...))
		if len(bounds) != 64 {
			t.Fatalf("offsets: %d queues, want 64: %+v", len(bounds), bounds)
		}
		for i, b := range bounds {
			in := held[b.QueueID]
			if b.QueueID != int32(i) || b.MinOffset != 0 || b.MaxOffset != int64(len(in)) {
				t.Fatalf("offsets of queue %d: %+v, want %d messages", i, b, len(in))
			}
			if len(in) > 0 && (b.MinStoreTime != in[0].StoreTimestamp || b.MaxStoreTime != in[len(in)-1].StoreTimestamp) {
				t.Fatalf("offsets of queue %d: %+v, want store times %d to %d", i, b, in[0].StoreTimestamp, in[len(in)-1].StoreTimestamp)
			}
		}

	})
	// Offsets for the time of message 15: each queue's first message stored at or after it.
	t.Run("offsets --time", func(t *testing.T) {
		ts := acks[15].StoreTimestamp
		forTime := ndjson[queueTimeOffset](t, mustRead(t, with(src, "offsets", "--topic", "orders", "--time", fmt.Sprint(ts), "--json")...))
		if len(forTime) != 64 {
			t.Fatalf("offsets --time: %d queues, want 64", len(forTime))
		}
		for _, q := range forTime {
			in := held[q.QueueID]
			want := int64(len(in))
			for _, a := range in {
				if a.StoreTimestamp >= ts {
					want = a.QueueOffset
					break
				}
			}
			if q.Offset != want || q.Timestamp != ts {
				t.Fatalf("offsets --time of queue %d: %+v, want %d", q.QueueID, q, want)
			}
		}

	})
	// A queue with messages, an empty queue of engine 1 (which has the topic), and empty
	// queues of engines 2 and 3 (which have none of it).
	t.Run("get", func(t *testing.T) {
		msgs := ndjson[api.Message](t, mustRead(t, with(src, "get", "--topic", "orders", "--queue", "9", "--json")...))
		if len(msgs) != len(held[9]) || len(msgs) != 10 {
			t.Fatalf("get queue 9: %d messages, want %d", len(msgs), len(held[9]))
		}
		for i, m := range msgs {
			if m.MsgID != held[9][i].MsgID || m.QueueOffset != int64(i) {
				t.Fatalf("get queue 9: message %d is %s at %d, want %s", i, m.MsgID, m.QueueOffset, held[9][i].MsgID)
			}
		}
		for _, q := range []string{"5", "30", "50"} {
			out := mustRead(t, with(src, "get", "--topic", "orders", "--queue", q)...)
			if !strings.Contains(out, "no messages") || !strings.Contains(out, "status NO_MESSAGE_IN_QUEUE, next offset 0") {
				t.Fatalf("get queue %s:\n%s", q, out)
			}
		}

	})
	// A topic that no engine has.
	t.Run("unknown topic", func(t *testing.T) {
		const unknown = `no engine has topic "typo": every one of the 64 partitions answered`
		failRead(t, 1, unknown, with(src, "offsets", "--topic", "typo")...)
		failRead(t, 1, unknown, with(src, "offsets", "--topic", "typo", "--time", "now")...)
		failRead(t, 1, unknown, with(src, "get", "--topic", "typo", "--queue", "30")...)
		failRead(t, 1, unknown, with(src, "get", "--topic", "typo", "--queue", "3")...)
		failRead(t, 1, unknown, with(src, "query", "--topic", "typo", "--key", "e-1")...)
	})
}
