package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/rocketstore/engine/engine"
	natstest2 "github.com/rocketstore/engine/internal/natstest"
	"github.com/rocketstore/engine/stages/ingress/route"
)

func TestParseOwned(t *testing.T) {
	got, err := parseOwned("0-3, 9,2,12-12", 16)
	if err != nil || !slices.Equal(got, []int{0, 1, 2, 3, 9, 12}) {
		t.Fatalf("%v, %v", got, err)
	}
	for _, bad := range []string{"", ",", "16", "3-1", "-1", "a", "1-x", "0-16"} {
		if got, err := parseOwned(bad, 16); err == nil {
			t.Errorf("%q: %v accepted", bad, got)
		}
	}
}

// TestPartitionSettings: partitioned ingest's keys are checked together, each error naming its
// key; a valid set gives the ingress configuration.
func TestPartitionSettings(t *testing.T) {
	clearEnv(t)
	for _, tc := range []struct {
		args []string
		want string // "" for valid
	}{
		{[]string{"--partitions", "8", "--owned-partitions", "0-3", "--partition-subjects", "orders.*"}, ""},
		{[]string{"--partitions", "8"}, "owned_partitions"},
		{[]string{"--partitions", "8", "--owned-partitions", "8"}, "owned_partitions"},
		{[]string{"--partitions", "2000", "--owned-partitions", "0"}, "partitions"},
		{[]string{"--owned-partitions", "0"}, "needs partitions"},
		{[]string{"--partitions", "8", "--owned-partitions", "0", "--subjects", "a.>"}, "subjects"},
		{[]string{"--partitions", "8", "--owned-partitions", "0", "--queue-group", "g"}, "queue_group"},
		{[]string{"--partitions", "8", "--owned-partitions", "0", "--queues", "4"}, "queues"},
		{[]string{"--partitions", "8", "--owned-partitions", "0", "--partition-subjects", "orders"}, "partition_subjects"},
		{[]string{"--partitions", "8", "--owned-partitions", "0", "--partition-prefix", "$p"}, "partition_prefix"},
		{[]string{"--partitions", "8", "--owned-partitions", "0", "--partition-subjects", "o.*", "-s", "nats://x:4222"}, "partition_subjects"},
		{[]string{"--partitions", "8", "--ownership", "kv", "--engine-id", "e1"}, ""},
		{[]string{"--partitions", "8", "--ownership", "kv"}, "engine_id"},
		{[]string{"--partitions", "8", "--ownership", "kv", "--engine-id", "e1", "--replicated", "--owned-partitions", "0"}, "ownership"},
		{[]string{"--ownership", "kv", "--engine-id", "e1"}, "needs partitions"},
		{[]string{"--partitions", "8", "--owned-partitions", "0-7", "--replicated", "--engine-id", "e1"}, ""},
		{[]string{"--partitions", "8", "--owned-partitions", "0-7", "--replicated", "--engine-id", "e/1"}, "engine_id"},
	} {
		r := mustParse(t, append([]string{"run", "--store", t.TempDir()}, tc.args...)...)
		err := r.validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%v: %v", tc.args, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%v: %v, want an error about %s", tc.args, err, tc.want)
		}
	}
	r := mustParse(t, "run", "--partitions", "8", "--owned-partitions", "6-7,1")
	p := r.partitionsOf()
	if p == nil || p.Count != 8 || !slices.Equal(p.Owned, []int{6, 7, 1}) || p.Prefix != "rmq.p" {
		t.Fatalf("%+v", p)
	}
}

// TestPartitionMapCommand: partition-map prints a mappings block that nats-server's own
// configuration parser reads back.
func TestPartitionMapCommand(t *testing.T) {
	c, err := parseArgs(t, "partition-map", "--partitions", "16", "orders.*", "pay.*.>", "small.*=4")
	if err != nil {
		t.Fatal(err)
	}
	var buf strings.Builder
	c.PartitionMap.out = &buf
	if err := c.PartitionMap.Run(); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{`"orders.*": "rmq.p.{{partition(16,1)}}.orders.{{wildcard(1)}}"`,
		`"pay.*.>": "rmq.p.{{partition(16,1)}}.pay.{{wildcard(1)}}.>"`,
		`"small.*": "rmq.p.{{partition(4,1)}}.small.{{wildcard(1)}}"`} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %s:\n%s", want, out)
		}
	}
	conf := filepath.Join(t.TempDir(), "nats.conf")
	if err := os.WriteFile(conf, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	// A server started from it partitions as PartitionOf says.
	o, err := server.ProcessConfigFile(conf)
	if err != nil {
		t.Fatalf("nats-server does not read it: %v", err)
	}
	o.Host, o.Port, o.NoLog, o.NoSigs = "127.0.0.1", -1, true, true
	ns, err := server.NewServer(o)
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	defer ns.Shutdown()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not ready")
	}
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	sub, err := nc.SubscribeSync("rmq.p.>")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Publish("orders.alice", nil); err != nil {
		t.Fatal(err)
	}
	m, err := sub.NextMsg(10 * time.Second)
	if want := fmt.Sprintf("rmq.p.%d.orders.alice", route.PartitionOf("alice", 16)); err != nil || m.Subject != want {
		t.Fatalf("published orders.alice, got %v (%v), want %s", m, err, want)
	}
	c, err = parseArgs(t, "partition-map", "orders")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.PartitionMap.Run(); err == nil {
		t.Fatal("a subject without a key token accepted")
	}
}

// TestPartitionMoveCommand: partition-move moves a partition between two engines that take
// their ownership from the bucket, and says where its queues continue; a move of a partition
// nobody owns is refused.
func TestPartitionMoveCommand(t *testing.T) {
	dest, err := route.PartitionMapping("rmq.p", 4, "orders.*")
	if err != nil {
		t.Fatal(err)
	}
	c := natstest2.StartJetStreamCluster(t, 3, map[string]string{"orders.*": dest})
	for i, claims := range [][]int{{0, 1}, {2}} {
		srv, err := engine.Serve(engine.Options{Dir: t.TempDir(), CommitLogFileSize: 1 << 20, ConsumeQueueUnits: 1000,
			IndexSlots: 1024, IndexEntries: 4096, FlushMode: engine.FlushAsync},
			engine.NATSOptions{URL: c.URL(i), TopicTokens: 1, NoReadAPI: true,
				Partitions: &route.Partitions{Count: 4, Owned: claims},
				Ownership:  &engine.Ownership{EngineID: fmt.Sprintf("e%d", i), Replicas: 3}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = srv.Shutdown() })
	}
	cmd, err := parseArgs(t, "partition-move", "--nats", c.URL(2), "--partition", "1", "--to", "e1")
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	cmd.PartitionMove.out = &out
	if err := cmd.PartitionMove.Run(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "partition 1 is now e1's") {
		t.Fatalf("output %q", out.String())
	}
	cmd, err = parseArgs(t, "partition-move", "--nats", c.URL(2), "--partition", "3", "--to", "e1")
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.PartitionMove.Run(); err == nil || !strings.Contains(err.Error(), "no owner") {
		t.Fatalf("a partition nobody owns: %v", err)
	}
}
