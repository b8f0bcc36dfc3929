package engine

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rocketstore/engine/internal/natstest"
	"github.com/rocketstore/engine/stages/ingress/replicated"
	"github.com/rocketstore/engine/stages/ingress/route"
)

// TestReplicatedRestartStoresNothingTwice: docs/SCALE-OUT.md, replicated mode "restarts from the
// lower of the consumer's ack floor and its own last stored sequence, looking up the messages in
// between in its IndexFile before storing them". The engine stores every partition's messages
// and stops; then its consumers are deleted, so that the ones it makes again start at each
// stream's first sequence, behind what the store holds, as after a crash that lost the acks. The
// restarted engine is redelivered every message and stores none of them again.
func TestReplicatedRestartStoresNothingTwice(t *testing.T) {
	const n = 40
	dest, err := route.PartitionMapping(route.DefaultPartitionPrefix, replParts, partSource)
	if err != nil {
		t.Fatal(err)
	}
	c := natstest.StartJetStreamCluster(t, 3, map[string]string{partSource: dest})
	all := make([]int, replParts)
	for p := range all {
		all[p] = p
	}
	dir := t.TempDir()
	serveRepl := func() *served {
		return serve(t, testOptions(t, dir), NATSOptions{URL: c.URL(0), TopicTokens: 1, NoReadAPI: true,
			Partitions: &route.Partitions{Count: replParts, Owned: all},
			Replicated: &replicated.Config{PinnedTTL: time.Second, AckWait: 2 * time.Second, Name: "solo",
				Heartbeat: 100 * time.Millisecond}})
	}
	s := serveRepl()
	waitReplStarted(t, s)

	nc, err := nats.Connect(c.URL(1))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), serveTimeout)
	defer cancel()
	for i := range n {
		m := nats.NewMsg(fmt.Sprintf("orders.k%d", i%8))
		m.Header.Set(nats.MsgIdHdr, fmt.Sprintf("m-%d", i))
		m.Data = []byte("x")
		if _, err := js.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	c.WaitFor("every message stored", func() bool { return storedCount(s.Engine) >= n })
	before := replStored(t, s.Engine)
	if err := s.shutdown(); err != nil {
		t.Fatal(err)
	}

	// The consumers go: the ones the engine makes again start at each stream's first message.
	var streams []string
	for name := range js.StreamNames(ctx).Name() {
		streams = append(streams, name)
	}
	for _, name := range streams {
		st, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		for cons := range st.ConsumerNames(ctx).Name() {
			if err := st.DeleteConsumer(ctx, cons); err != nil {
				t.Fatal(err)
			}
		}
	}

	s = serveRepl()
	waitReplStarted(t, s)
	// Every message delivered again and acked: each stream's consumers have nothing pending.
	c.WaitFor("the redeliveries acked", func() bool {
		for _, name := range streams {
			st, err := js.Stream(ctx, name)
			if err != nil {
				return false
			}
			info, err := st.Info(ctx)
			if err != nil {
				return false
			}
			found := false
			for cons := range st.ListConsumers(ctx).Info() {
				found = true
				if cons.NumAckPending > 0 || cons.AckFloor.Stream < info.State.LastSeq {
					return false
				}
			}
			if !found {
				return false
			}
		}
		return true
	})
	if after := replStored(t, s.Engine); !maps.Equal(after, before) {
		t.Fatalf("after the restart the store holds %d messages, before it %d: a redelivery was stored again", len(after), len(before))
	}
}
