package publisher_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/rocketstore/engine/engine"
	"github.com/rocketstore/engine/engine/publisher"
	"github.com/rocketstore/engine/internal/wire"
)

// TestProtocolConstants: the publisher's names are the protocol's (internal/wire), which the
// engine speaks too.
func TestProtocolConstants(t *testing.T) {
	if publisher.HeaderSeq != wire.HeaderSeq || publisher.MaxStreamID != wire.MaxStreamID ||
		publisher.HeaderPack != wire.HeaderPack || publisher.DefaultMaxPack > wire.MaxPackEntries {
		t.Fatalf("publisher %q/%d/%q/%d, engine %q/%d/%q/%d", publisher.HeaderSeq, publisher.MaxStreamID,
			publisher.HeaderPack, publisher.DefaultMaxPack, wire.HeaderSeq, wire.MaxStreamID,
			wire.HeaderPack, wire.MaxPackEntries)
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
	if _, err := wire.ParseReply(reply.Data); err != nil {
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
	// Published and Answered bracket each message's latency, on one monotonic clock.
	for _, m := range []int{0, n - 1} {
		f := msgs[m].future
		if pub, ans := f.Published(), f.Answered(); pub.IsZero() || ans.Before(pub) || time.Since(ans) < 0 {
			t.Fatalf("message %d: published %v, answered %v", m, pub, ans)
		}
	}
	if first, last := msgs[0].future.Published(), msgs[n-1].future.Published(); last.Before(first) {
		t.Fatalf("the last message was published at %v, before the first (%v)", last, first)
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

// TestPacks: packs carry each message's own headers (its Nats-Msg-Id is its id, other headers
// are stored as properties); a message too big for a pack goes alone; a window smaller than a
// pack sends the pack when it fills the window; a pack that does not fill goes after Linger; a
// header a header block cannot carry is refused by Publish.
func TestPacks(t *testing.T) {
	s := serve(t, testOptions(t, t.TempDir(), engine.FlushSync), engine.NATSOptions{})
	nc := connect(t, s.ClientURL())
	p := newPublisher(t, nc, publisher.Options{Window: 100, MaxPack: 64, MaxPackBytes: 4096})
	ctx := context.Background()
	var msgs []sent
	for i := range 1000 {
		subject := subjects("packs", 3)(i)
		body := fmt.Appendf(nil, "%s|%08d|", p.StreamID(), i)
		if i%250 == 0 {
			body = append(body, make([]byte, 5000)...) // over MaxPackBytes: sent alone
		}
		hdr := nats.Header{"Trace": {strconv.Itoa(i)}}
		if i%10 == 0 {
			hdr[nats.MsgIdHdr] = []string{fmt.Sprintf("own-%d", i)}
		}
		f, err := p.Publish(ctx, subject, body, hdr)
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, sent{subject: subject, body: body, future: f})
	}
	flush(t, p)
	st := p.Stats()
	t.Logf("publisher %+v", st)
	if st.Acked != 1000 || st.Failed != 0 || st.Packs == 0 || st.Packed > 996 || st.Packed < 900 {
		t.Fatalf("stats %+v: want most messages in packs, the 4 big ones alone", st)
	}
	checkExactlyOnce(t, s.Engine, msgs)
	got := readStore(t, s.Engine)
	if m := got["own-10"]; len(m) != 1 || !strings.Contains(string(m[0].body), "|00000010|") {
		t.Fatalf("own-10: %+v", m)
	}

	// Below the window and the pack size: the linger sends it.
	f, err := p.Publish(ctx, "packs.linger", []byte("alone"), nil)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, testTimeout)
	defer cancel()
	if _, err := f.Wait(wctx); err != nil {
		t.Fatal(err)
	}

	for _, h := range []nats.Header{{"A": {"x\r\ny"}}, {"B:c": {"x"}}, {"": {"x"}}, {publisher.HeaderSeq: {"s 1 0"}}} {
		if _, err := p.Publish(ctx, "packs.bad", nil, h); err == nil {
			t.Errorf("header %q accepted", h)
		}
	}
}
