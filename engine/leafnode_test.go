package engine

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/rocketstore/engine/internal/natstest"
	"github.com/rocketstore/engine/internal/wire"
	"github.com/rocketstore/engine/stages/ingress/route"
)

// TestPartitionsOverLeafnode: the engine embeds a server that joins an existing NATS system as a
// leafnode. The hub carries the partition mapping; the engine's embedded server carries none (a
// message is mapped where it enters NATS, once). A request published on the hub reaches the
// engine over the leafnode and is stored in its partition's queue.
func TestPartitionsOverLeafnode(t *testing.T) {
	dest, err := route.PartitionMapping(route.DefaultPartitionPrefix, partCount, partSource)
	if err != nil {
		t.Fatal(err)
	}
	acc := server.NewAccount(server.DEFAULT_GLOBAL_ACCOUNT)
	if err := acc.AddMapping(partSource, dest); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0") // a free port for the hub's leafnode listener
	if err != nil {
		t.Fatal(err)
	}
	leafPort := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	hub, err := server.NewServer(&server.Options{ServerName: "hub", Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true,
		LeafNode: server.LeafNodeOpts{Host: "127.0.0.1", Port: leafPort}, Accounts: []*server.Account{acc}})
	if err != nil {
		t.Fatal(err)
	}
	go hub.Start()
	t.Cleanup(hub.Shutdown)
	if !hub.ReadyForConnections(serveTimeout) {
		t.Fatal("hub not ready")
	}
	conf := filepath.Join(t.TempDir(), "leaf.conf")
	text := fmt.Sprintf("server_name: leaf\nleafnodes {\n  remotes = [ { url: \"nats-leaf://127.0.0.1:%d\" } ]\n}\n", leafPort)
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	all := make([]int, partCount)
	for p := range all {
		all[p] = p
	}
	opts := testOptions(t, t.TempDir())
	opts.FlushMode = FlushAsync
	s := serve(t, opts, NATSOptions{ServerConfig: conf, Listen: "127.0.0.1:-1", TopicTokens: 1, NoReadAPI: true,
		Partitions: &route.Partitions{Count: partCount, Owned: all}})
	nc, err := nats.Connect(hub.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	// The leafnode connects, then the engine's interest crosses it: wait for both on the hub.
	for p := range partCount {
		subj := route.PartitionSubject(route.DefaultPartitionPrefix, p) + ".orders.x"
		natstest.WaitFor(t, "the hub sees the engine's interest in "+subj, func() bool {
			return hub.GlobalAccount().SubscriptionInterest(subj)
		})
	}
	for i := range 50 {
		key := fmt.Sprintf("k%d", i)
		r, err := nc.RequestMsg(partMsg(0, i, key), serveTimeout)
		if err != nil {
			t.Fatal(err)
		}
		a, err := wire.ParseReply(r.Data)
		if err != nil || int(a.QueueID) != route.PartitionOf(key, partCount) || a.Topic != "orders" {
			t.Fatalf("key %s: %+v, %v", key, a, err)
		}
	}
	if n := len(readPartitions(t, s.Engine)); n != 50 {
		t.Fatalf("%d stored, want 50", n)
	}
}
