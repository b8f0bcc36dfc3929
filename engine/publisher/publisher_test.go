package publisher_test

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/rocketstore/engine/engine"
	"github.com/rocketstore/engine/engine/publisher"
	"github.com/rocketstore/engine/stages/ingress"
)

// TestProtocolConstants holds the two sides of the protocol together.
func TestProtocolConstants(t *testing.T) {
	if publisher.HeaderSeq != ingress.HeaderSeq || publisher.MaxStreamID != ingress.MaxStreamID {
		t.Fatalf("publisher %q/%d, engine %q/%d", publisher.HeaderSeq, publisher.MaxStreamID, ingress.HeaderSeq, ingress.MaxStreamID)
	}
}

// TestPublishSync: many messages through one publisher in sync mode, over 16 subjects (so over
// 64 queues and both ingress workers: the stream reaches the tracker out of order), all
// acknowledged, each stored once at its acked position; far fewer acks than messages; and plain
// request/reply works alongside on the same engine.
func TestPublishSync(t *testing.T) {
	n := 50_000
	if testing.Short() {
		n = 10_000
	}
	s := serve(t, testOptions(t, t.TempDir(), engine.FlushSync), engine.NATSOptions{})
	nc := connect(t, s.ClientURL())
	p := newPublisher(t, nc, publisher.Options{})
	msgs := publishN(t, p, n, 128, subjects("orders", 16))

	// Plain request/reply, alongside.
	plain := connect(t, s.ClientURL())
	reply, err := plain.Request("plain.one", []byte("plain"), testTimeout)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ingress.ParseReply(reply.Data); err != nil {
		t.Fatalf("plain request: %v", err)
	}

	flush(t, p)
	st, est := p.Stats(), s.Stats()
	t.Logf("publisher %+v", st)
	t.Logf("engine: %d records, %d syncs; batched %+v", est.Records, est.Syncs, est.Ingress.Batched)
	if st.Acked != int64(n) || st.Failed != 0 || st.Resent != 0 || st.InFlight != 0 {
		t.Fatalf("stats %+v", st)
	}
	if st.AckMessages > int64(n)/10 {
		t.Errorf("%d acks for %d messages: not batched", st.AckMessages, n)
	}
	if b := est.Ingress.Batched; b.Received != int64(n) || b.Acked != int64(n) || b.Missing != 0 || b.Streams != 1 {
		t.Errorf("engine batched stats %+v", b)
	}
	if est.Ingress.AcksSent != 1 {
		t.Errorf("%d plain acks, want 1", est.Ingress.AcksSent)
	}
	a, err := msgs[0].future.Wait(context.Background())
	if err != nil || a.Seq != 1 || a.MsgID != p.StreamID()+":1" || a.Duplicate {
		t.Fatalf("first ack %+v, %v", a, err)
	}
	checkExactlyOnce(t, s.Engine, msgs)
}

// TestNatsMsgIDIsTheID: a Nats-Msg-Id given by the user is the message's id (UNIQ_KEY), and a
// second message with the same id, sent once the first is acked, is answered as a duplicate of
// it. (Sent back to back, they may take two queues and two ingress workers, and either may be
// stored first: order holds per queue.)
func TestNatsMsgIDIsTheID(t *testing.T) {
	s := serve(t, testOptions(t, t.TempDir(), engine.FlushSync), engine.NATSOptions{})
	p := newPublisher(t, connect(t, s.ClientURL()), publisher.Options{})
	ctx := context.Background()
	f1, err := p.Publish(ctx, "orders.id", []byte("one"), nats.Header{nats.MsgIdHdr: {"order-1"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f1.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	f2, err := p.Publish(ctx, "orders.id", []byte("two"), nats.Header{nats.MsgIdHdr: {"order-1"}})
	if err != nil {
		t.Fatal(err)
	}
	flush(t, p)
	a1, _ := f1.Wait(ctx)
	a2, _ := f2.Wait(ctx)
	if a1.MsgID != "order-1" || a1.Duplicate || !a2.Duplicate || a2.QueueOffset != a1.QueueOffset || a2.QueueID != a1.QueueID {
		t.Fatalf("acks %+v, %+v", a1, a2)
	}
	if got := readStore(t, s.Engine)["order-1"]; len(got) != 1 || string(got[0].body) != "one" {
		t.Fatalf("stored %+v", got)
	}
}
