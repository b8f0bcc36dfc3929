package ingress

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/rocketstore/engine/stages"
	"github.com/rocketstore/engine/stages/ingress/route"
)

// TestRemovePartitionWaitsForItsMessages: docs/SCALE-OUT.md, a handoff without a hole or an
// overlap. RemovePartition returns only once every message taken for the partition is appended
// and acked: the releasing engine reads where the partition's queue ends right after it. The test
// is the appender: it holds the batch of a message taken for partition 0 and sees the fences
// come through every worker behind it; RemovePartition must not return before those batches
// are acked.
func TestRemovePartitionWaitsForItsMessages(t *testing.T) {
	h := newHarness(t, harnessOpts{gated: true, outCap: 16, cfg: func(c *Config) {
		c.Partitions = &route.Partitions{Count: 4, Owned: []int{0, 1}}
	}})
	deadline := time.After(waitTimeout)
	m := nats.NewMsg(route.PartitionSubject(route.DefaultPartitionPrefix, 0) + ".orders.a")
	m.Data, m.Reply = []byte("taken"), "reply.to.nobody"
	if err := h.pub.PublishMsg(m); err != nil {
		t.Fatal(err)
	}
	var held []*stages.Batch
	select {
	case b := <-h.out:
		held = append(held, b)
	case <-deadline:
		t.Fatal("the message never reached Out")
	}

	returned := make(chan error, 1)
	go func() { returned <- h.in.RemovePartition(context.Background(), 0) }()
	for fences := 0; fences < len(h.in.workers); {
		select {
		case err := <-returned:
			t.Fatalf("RemovePartition returned (%v) while the batch of a message it took was not acked", err)
		case b := <-h.out:
			held = append(held, b)
			for _, r := range b.Records {
				if errors.Is(r.Err, errFence) {
					fences++
				}
			}
		case <-deadline:
			t.Fatalf("%d fences of %d came through", fences, len(h.in.workers))
		}
	}
	for _, b := range held {
		b.Done(b)
	}
	select {
	case err := <-returned:
		if err != nil {
			t.Fatalf("RemovePartition: %v", err)
		}
	case <-deadline:
		t.Fatal("RemovePartition did not return once everything was acked")
	}
	if h.in.Partitions().Owns(0) {
		t.Fatal("partition 0 still owned")
	}
}
