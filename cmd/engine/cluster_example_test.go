package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/rocketstore/engine/engine/api"
	"github.com/rocketstore/engine/stages/ingress"
)

// exampleOwned are the example's partition sets (docs/SCALE-OUT.md, scripts/cluster-example.sh).
var exampleOwned = []string{"0-21", "22-42", "43-63"}

// TestClusterExample runs the documented three-server, three-engine deployment: three `engine
// run` processes, each embedding one server of the cluster from docs/examples/cluster (its ports
// and directories moved to free ones here), each owning a third of 64 partitions. Keyed
// requests through one server are acked by their partitions' owners, and a partition-aware
// client's fan-out offsets count every message.
func TestClusterExample(t *testing.T) {
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
	// Each engine subscribed on its own server: wait until server 1 knows every partition's
	// subscription (a request finds a responder), bounded.
	for _, key := range []string{"k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7"} {
		waitResponder(t, nc, "orders."+key)
	}
	const n = 300
	for i := range n {
		key := fmt.Sprintf("k%d", i%30)
		m := nats.NewMsg("orders." + key)
		m.Header.Set(nats.MsgIdHdr, "ex-"+strconv.Itoa(i))
		m.Data = []byte(strconv.Itoa(i))
		reply, err := nc.RequestMsg(m, waitTimeout)
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		a, err := ingress.ParseReply(reply.Data)
		if err != nil || a.Topic != "orders" || int(a.QueueID) != ingress.PartitionOf(key, 64) {
			t.Fatalf("message %d (key %s): %+v, %v", i, key, a, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	offs, err := api.NewClient(nc, api.WithPartitions(64)).OffsetsAll(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, q := range offs.Queues {
		total += q.MaxOffset - q.MinOffset
	}
	if total != n {
		t.Fatalf("fan-out offsets count %d messages, want %d", total, n)
	}
}

// waitResponder sends an empty-bodied request to a dedicated probe subject of subject's
// partition until one engine answers (interest crosses routes asynchronously), bounded. The
// probe is refused (an empty topic key would not be): it stores nothing.
func waitResponder(t *testing.T, nc *nats.Conn, subject string) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	probe := nats.NewMsg(subject)
	probe.Header.Set("Bad\x01", "x") // a header the engine refuses: nothing is stored
	for {
		_, err := nc.RequestMsg(probe, waitTimeout)
		if !errors.Is(err, nats.ErrNoResponders) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no engine answers %s", subject)
		}
		<-tick.C
	}
}
