package engine

import (
	"context"
	"fmt"
	"testing"

	"github.com/rocketstore/engine/engine/api"
	"github.com/rocketstore/engine/internal/wire"
	"github.com/rocketstore/engine/stages/ingress/route"
)

// keyIn is a key of partition p of partCount.
func keyIn(t *testing.T, p int) string {
	t.Helper()
	for i := range 10_000 {
		if k := fmt.Sprintf("k%d", i); route.PartitionOf(k, partCount) == p {
			return k
		}
	}
	t.Fatalf("no key for partition %d", p)
	return ""
}

// TestPartitionEmptyQueues: the owner of a partition answers a queue it does not have (no
// message of the topic went there yet, or the topic is unknown to it) as empty on the
// partition's subjects: get and pull find no message in the queue, at 0; offset_for_time is 0;
// a long poll waits for the first message. The fan-out offsets list every partition, the empty
// ones at 0, and no queue at all for a topic no engine has. On the shared subjects an unknown
// queue is still unknown (404).
func TestPartitionEmptyQueues(t *testing.T) {
	all := make([]int, partCount)
	for p := range all {
		all[p] = p
	}
	opts := testOptions(t, t.TempDir())
	s := serve(t, opts, NATSOptions{TopicTokens: 1, PartitionSources: []string{partSource},
		Partitions: &route.Partitions{Count: partCount, Owned: all}})
	nc := connect(t, s, "client")
	ctx, cancel := context.WithTimeout(context.Background(), serveTimeout)
	defer cancel()
	publish := func(p, i int) wire.Ack {
		t.Helper()
		m := partMsg(0, i, keyIn(t, p))
		reply, err := nc.RequestMsgWithContext(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		a, err := wire.ParseReply(reply.Data)
		if err != nil || int(a.QueueID) != p {
			t.Fatalf("message %d to partition %d: %+v, %v", i, p, a, err)
		}
		if err := s.Engine.WaitDispatched(ctx, a.CommitLogOffset+1); err != nil {
			t.Fatal(err)
		}
		return a
	}
	first := publish(1, 0)
	cl := api.NewClient(nc, api.WithPartitions(partCount))

	for _, topic := range []string{"orders", "nope"} {
		rep, err := cl.Get(ctx, api.GetRequest{Topic: topic, QueueID: 5})
		if err != nil || rep.Status != api.StatusNoMessageInQueue || rep.NextOffset != 0 || rep.MaxOffset != 0 || len(rep.Messages) != 0 {
			t.Fatalf("get %s/5: %+v, %v", topic, rep, err)
		}
		pr, err := cl.Pull(ctx, api.PullRequest{Topic: topic, QueueID: 5})
		if err != nil || pr.Status != api.StatusNoMessageInQueue || pr.NextOffset != 0 || pr.MaxOffset != 0 || len(pr.Messages) != 0 {
			t.Fatalf("pull %s/5: %+v, %v", topic, pr, err)
		}
		if off, err := cl.OffsetForTime(ctx, api.OffsetForTimeRequest{Topic: topic, QueueID: 5, Timestamp: first.StoreTimestamp}); err != nil || off != 0 {
			t.Fatalf("offset_for_time %s/5: %d, %v", topic, off, err)
		}
	}
	shared := api.NewClient(nc)
	if _, err := shared.Get(ctx, api.GetRequest{Topic: "orders", QueueID: 5}); api.CodeOf(err) != api.CodeNotFound {
		t.Fatalf("get orders/5 on the shared subject: %v", err)
	}

	offs, err := cl.OffsetsAll(ctx, "orders")
	if err != nil || len(offs.Queues) != partCount {
		t.Fatalf("offsets: %+v, %v", offs, err)
	}
	for i, q := range offs.Queues {
		want := api.QueueOffsets{QueueID: int32(i)}
		if i == 1 {
			want.MaxOffset, want.MinStoreTime, want.MaxStoreTime = 1, first.StoreTimestamp, first.StoreTimestamp
		}
		if q != want {
			t.Fatalf("offsets of queue %d: %+v, want %+v", i, q, want)
		}
	}
	at, err := cl.OffsetsForTimeAll(ctx, "orders", first.StoreTimestamp+1)
	if err != nil || len(at.Queues) != partCount || at.Queues[1].Offset != 1 || at.Queues[5].Offset != 0 {
		t.Fatalf("offsets for a time: %+v, %v", at, err)
	}
	if offs, err := cl.OffsetsAll(ctx, "nope"); err != nil || len(offs.Queues) != 0 {
		t.Fatalf("offsets of a topic no engine has: %+v, %v", offs, err)
	}

	// A long poll on the empty queue 6 ends with its first message.
	polling := make(chan struct{}, 1)
	s.api.OnPoll(func() { polling <- struct{}{} })
	type got struct {
		rep *api.GetReply
		err error
	}
	done := make(chan got, 1)
	go func() {
		rep, err := cl.Get(ctx, api.GetRequest{Topic: "orders", QueueID: 6, WaitMs: api.MaxWaitMs})
		done <- got{rep, err}
	}()
	select {
	case <-polling:
	case r := <-done:
		t.Fatalf("the long poll returned at once: %+v, %v", r.rep, r.err)
	}
	a := publish(6, 1)
	r := <-done
	if r.err != nil || r.rep.Status != api.StatusFound || len(r.rep.Messages) != 1 || r.rep.Messages[0].MsgID != a.MsgID {
		t.Fatalf("long poll on queue 6: %+v, %v", r.rep, r.err)
	}
}
