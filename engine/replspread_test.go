package engine

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rocketstore/engine/internal/natstest"
	"github.com/rocketstore/engine/stages/ingress/replicated"
	"github.com/rocketstore/engine/stages/ingress/route"
)

// spreadParts is the partition count of TestReplicatedSpread.
const spreadParts = 12

// TestReplicatedSpread: three engines share every partition's pinned consumer. The partitions
// are spread evenly over them (none takes more than its share) and each partition's messages are
// stored by the engine it is spread to. An engine stopped gracefully gives its pins up and says
// it is leaving: the other two spread its partitions between them and take its messages, long
// before the pins' TTL (ten minutes here) would have let them. It comes back, under the same
// name: it gets the same partitions back, which the others hand over (they give up the pins).
func TestReplicatedSpread(t *testing.T) {
	dest, err := route.PartitionMapping(route.DefaultPartitionPrefix, spreadParts, partSource)
	if err != nil {
		t.Fatal(err)
	}
	c := natstest.StartJetStreamCluster(t, 3, map[string]string{partSource: dest})
	all := make([]int, spreadParts)
	for p := range all {
		all[p] = p
	}
	dirs := map[string]string{"a": t.TempDir(), "b": t.TempDir(), "c": t.TempDir()}
	start := func(name string, server int) *served {
		return serve(t, testOptions(t, dirs[name]), NATSOptions{URL: c.URL(server), TopicTokens: 1, NoReadAPI: true,
			Partitions: &route.Partitions{Count: spreadParts, Owned: all},
			Replicated: &replicated.Config{PinnedTTL: 10 * time.Minute, AckWait: 2 * time.Second,
				Name: name, Heartbeat: 100 * time.Millisecond}})
	}
	engines := map[string]*served{"a": start("a", 0), "b": start("b", 1), "c": start("c", 2)}
	for _, s := range engines {
		waitReplStarted(t, s)
	}
	nc, err := nats.Connect(c.URL(0))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	keys := make([]string, spreadParts)
	for n, found := 0, 0; found < spreadParts; n++ {
		if key := fmt.Sprintf("k%d", n); keys[route.PartitionOf(key, spreadParts)] == "" {
			keys[route.PartitionOf(key, spreadParts)] = key
			found++
		}
	}
	round := 0
	// spread waits until the live engines agree on each other and returns who takes each
	// partition, checking that no one takes more than its share; then it publishes one message
	// per partition and waits until each is stored by its taker.
	spread := func(live ...string) map[int]string {
		t.Helper()
		c.WaitFor(fmt.Sprintf("engines %v find each other", live), func() bool {
			for _, n := range live {
				if got := engines[n].Ingress().ReplicatedEngines(); !slices.Equal(got, live) {
					return false
				}
			}
			return true
		})
		takers := map[int]string{}
		share := (spreadParts + len(live) - 1) / len(live)
		for _, n := range live {
			taken := engines[n].Ingress().ReplicatedTaken()
			if len(taken) > share {
				t.Fatalf("%s takes %v, more than its share %d", n, taken, share)
			}
			for _, p := range taken {
				if other, ok := takers[p]; ok {
					t.Fatalf("partition %d taken by %s and %s", p, other, n)
				}
				takers[p] = n
			}
		}
		if len(takers) != spreadParts {
			t.Fatalf("%d partitions taken: %v", len(takers), takers)
		}
		round++
		ctx, cancel := context.WithTimeout(context.Background(), serveTimeout)
		defer cancel()
		for p, key := range keys {
			m := nats.NewMsg("orders." + key)
			m.Header.Set(nats.MsgIdHdr, fmt.Sprintf("r%d-p%d", round, p))
			if _, err := js.PublishMsg(ctx, m); err != nil {
				t.Fatal(err)
			}
		}
		c.WaitFor(fmt.Sprintf("round %d stored by the takers", round), func() bool {
			for p, n := range takers {
				if engines[n].Ingress().ReplicatedFloors()[p] < uint64(round) {
					return false
				}
			}
			return true
		})
		return takers
	}

	first := spread("a", "b", "c")
	if err := engines["c"].shutdown(); err != nil {
		t.Fatal(err)
	}
	spread("a", "b")
	engines["c"] = start("c", 2)
	waitReplStarted(t, engines["c"])
	third := spread("a", "b", "c")
	for p, n := range first {
		if (n == "c") != (third[p] == "c") {
			t.Fatalf("partition %d: taken by %s before c left, by %s after it came back", p, n, third[p])
		}
	}
}
