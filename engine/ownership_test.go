package engine

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rocketstore/engine/engine/natsserver"
	"github.com/rocketstore/engine/internal/natstest"
	"github.com/rocketstore/engine/internal/wire"
	"github.com/rocketstore/engine/stages/ingress/route"
)

// TestOwnershipBucket: partition ownership from a replicated key-value bucket on a three-server
// JetStream cluster. Three engines claim a third of the partitions each; MovePartition moves
// partition 2 from e2 to e0 through the bucket (e2 releases, e0 takes it at e2's ends); the
// queue's offsets continue across the move; e2, restarted with the same claims, does not take
// the partition back: the bucket decides.
func TestOwnershipBucket(t *testing.T) {
	const moved = 2
	dest, err := route.PartitionMapping(route.DefaultPartitionPrefix, partCount, partSource)
	if err != nil {
		t.Fatal(err)
	}
	c := natstest.StartJetStreamCluster(t, 3, map[string]string{partSource: dest})
	dirs := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	serveOwned := func(i int) *served {
		opts := testOptions(t, dirs[i])
		opts.FlushMode = FlushAsync
		return serve(t, opts, NATSOptions{URL: c.URL(i), TopicTokens: 1, NoReadAPI: true,
			Partitions: &route.Partitions{Count: partCount, Owned: owned(i)},
			Ownership:  &Ownership{EngineID: fmt.Sprintf("e%d", i), Replicas: 3}})
	}
	engines := make([]*served, 3)
	for i := range engines {
		engines[i] = serveOwned(i)
	}
	for p := range partCount {
		c.WaitInterest(route.PartitionSubject(route.DefaultPartitionPrefix, p) + ".orders.x")
	}
	nc, err := nats.Connect(c.URL(1))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	count2 := 0
	publish := func(from, to int) {
		msgs := make([]*nats.Msg, 0, to-from)
		for n := from; n < to; n++ {
			key := fmt.Sprintf("k%d", n%40)
			if route.PartitionOf(key, partCount) == moved {
				count2++
			}
			msgs = append(msgs, partMsg(0, n, key))
		}
		for i, r := range publishPipelined(t, nc, msgs) {
			if _, err := wire.ParseReply(r.Data); err != nil {
				t.Fatalf("message %d: %v", from+i, err)
			}
		}
	}
	publish(0, 200)
	n1 := count2

	ctx, cancel := context.WithTimeout(context.Background(), serveTimeout)
	defer cancel()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := natsserver.OpenOwnershipBucket(ctx, js, "", 3)
	if err != nil {
		t.Fatal(err)
	}
	ends, err := natsserver.MovePartition(ctx, kv, moved, "e0")
	if err != nil {
		t.Fatal(err)
	}
	if ends["orders"] != int64(n1) {
		t.Fatalf("ends %v, want orders at %d", ends, n1)
	}
	if !slices.Contains(engines[0].Partitions().OwnedNow(), moved) || slices.Contains(engines[2].Partitions().OwnedNow(), moved) {
		t.Fatalf("after the move: e0 owns %v, e2 %v", engines[0].Partitions().OwnedNow(), engines[2].Partitions().OwnedNow())
	}
	c.WaitInterest(route.PartitionSubject(route.DefaultPartitionPrefix, moved) + ".orders.x")

	// e2 restarts with the same claims: the bucket says partition 2 is e0's.
	if err := engines[2].shutdown(); err != nil {
		t.Fatal(err)
	}
	engines[2] = serveOwned(2)
	if got := engines[2].Partitions().OwnedNow(); slices.Contains(got, moved) || len(got) != len(owned(2))-1 {
		t.Fatalf("restarted e2 owns %v", got)
	}
	for p := range partCount { // the restarted engine's subscriptions reach the publisher's server
		c.WaitInterest(route.PartitionSubject(route.DefaultPartitionPrefix, p) + ".orders.x")
	}
	publish(200, 400)

	queue := func(s *served) QueueOffsets { return ordersQueue(t, s.Engine, moved) }
	if q0, q2 := queue(engines[0]), queue(engines[2]); q2.Min != 0 || q2.Max != int64(n1) || q0.Min != int64(n1) || q0.Max != int64(count2) {
		t.Fatalf("queue %d: e2 [%d, %d), e0 [%d, %d); want [0, %d) and [%d, %d)", moved, q2.Min, q2.Max, q0.Min, q0.Max, n1, n1, count2)
	}
	checkStoredOnce(t, 400, engines...)
	if _, err := natsserver.MovePartition(ctx, kv, moved, "e0"); err != nil {
		t.Fatalf("a move to the owner: %v", err)
	}
}
