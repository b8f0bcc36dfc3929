package ingress

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/internal/wire"
	"github.com/rocketstore/engine/stages/ingress/batched"
)

// batchedHarness is a harness with batched acks on, a fake clock and a hand-driven expiry tick.
type batchedHarness struct {
	*harness
	mu    sync.Mutex
	now   time.Time
	tick  chan time.Time
	acks  *nats.Subscription
	inbox string
}

func newBatchedHarness(t *testing.T, bc batched.Config) *batchedHarness {
	return newBatchedHarnessWith(t, bc, nil)
}

// newBatchedHarnessWith is newBatchedHarness with more of the ingress configuration set by cfg.
func newBatchedHarnessWith(t *testing.T, bc batched.Config, cfg func(*Config)) *batchedHarness {
	b := &batchedHarness{now: time.Unix(1_700_000_000, 0), tick: make(chan time.Time)}
	bc.Clock = b.clock
	bc.ExpireTick = b.tick
	b.harness = newHarness(t, harnessOpts{cfg: func(c *Config) {
		c.Batched = &bc
		if cfg != nil {
			cfg(c)
		}
	}})
	b.inbox = b.pub.NewInbox()
	var err error
	if b.acks, err = b.pub.SubscribeSync(b.inbox + ".>"); err != nil {
		t.Fatal(err)
	}
	if err := b.pub.Flush(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.stop(); err != nil {
			t.Error(err)
		}
		b.closeAcks()
	})
	return b
}

func (b *batchedHarness) clock() time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.now
}

func (b *batchedHarness) advance(d time.Duration) {
	b.mu.Lock()
	b.now = b.now.Add(d)
	b.mu.Unlock()
}

// send publishes message seq of stream with the floor acked, its acks to inbox.<stream>.
func (b *batchedHarness) send(stream string, seq, acked uint64, subject string, hdr nats.Header) {
	b.t.Helper()
	m := nats.NewMsg(subject)
	for k, v := range hdr {
		m.Header[k] = v
	}
	m.Header.Set(wire.HeaderSeq, fmt.Sprintf("%s %d %d", stream, seq, acked))
	m.Reply = b.inbox + "." + stream
	m.Data = fmt.Appendf(nil, "%s-%d", stream, seq)
	if err := b.pub.PublishMsg(m); err != nil {
		b.t.Fatal(err)
	}
}

// next waits for the next ack.
func (b *batchedHarness) next() wire.BatchAck {
	b.t.Helper()
	m, err := b.acks.NextMsg(waitTimeout)
	if err != nil {
		b.t.Fatalf("waiting for an ack: %v", err)
	}
	a, err := wire.ParseBatchAck(m.Data)
	if err != nil {
		b.t.Fatal(err)
	}
	return a
}

// until collects acks of stream until one has through >= want, merging what they say.
func (b *batchedHarness) until(stream string, want uint64) (merged wire.BatchAck) {
	b.t.Helper()
	for merged.Through < want {
		a := b.next()
		if a.Stream != stream {
			b.t.Fatalf("an ack of %s while waiting for %s", a.Stream, stream)
		}
		merged.Stream, merged.Through = a.Stream, a.Through
		merged.Stored = append(merged.Stored, a.Stored...)
		merged.Refused = append(merged.Refused, a.Refused...)
		merged.Missing = append(merged.Missing, a.Missing...)
	}
	return merged
}

func storedSeqs(a wire.BatchAck) []uint64 {
	var out []uint64
	for _, r := range a.Stored {
		for k := range r.Count {
			out = append(out, r.Seq+k*r.Step)
		}
	}
	slices.Sort(out)
	return out
}

// TestBatchedAckRefusalAndMissing: one ack per round for a stream, positions matching what the
// appender stamped; a message refused for its stream is reported with its code and stops the
// cumulative ack until the floor passes it; a sequence never sent is reported missing once the
// markers are back, and acked once it comes.
func TestBatchedAckRefusalAndMissing(t *testing.T) {
	b := newBatchedHarness(t, batched.Config{})
	for seq := uint64(1); seq <= 3; seq++ {
		b.send("A", seq, 0, "orders.a", nil)
	}
	a := b.until("A", 3)
	if got := storedSeqs(a); !slices.Equal(got, []uint64{1, 2, 3}) || len(a.Refused)+len(a.Missing) != 0 {
		t.Fatalf("ack %+v", a)
	}
	byID := map[string]appended{} // by UNIQ_KEY: the dedupe of a stream is its claims, not MsgID
	for _, r := range b.app.snapshot() {
		id, _ := commitlog.Properties(r.rec.Properties).Get(commitlog.PropUniqKey)
		byID[string(id)] = r
		if r.meta.MsgID != "" {
			t.Fatalf("record %s has MsgID %q: it would take a place in the appender's window", id, r.meta.MsgID)
		}
	}
	for _, r := range a.Stored {
		for k := range r.Count {
			seq := r.Seq + k*r.Step
			rec, ok := byID[fmt.Sprintf("A:%d", seq)]
			if !ok || rec.meta.QueueID != r.QueueID || rec.meta.QueueOffset != r.QueueOffset+int64(k) || rec.meta.Topic != r.Topic {
				t.Fatalf("seq %d: ack %+v, stored %+v", seq, r, rec.meta)
			}
			if _, ok := commitlog.Properties(rec.rec.Properties).Get(wire.HeaderSeq); ok {
				t.Fatal("the Rs-Seq header was stored")
			}
		}
	}

	// 4 has a header the store refuses (400); 5 is never sent; 6 and 7 are stored.
	b.send("A", 4, 3, "orders.a", nats.Header{"X-Bad": {"a\x01b"}})
	b.send("A", 6, 3, "orders.a", nil)
	b.send("A", 7, 3, "orders.a", nil)
	var refused []wire.RefusedRun
	var missing [][2]uint64
	var seen []uint64
	for len(missing) == 0 {
		a := b.next()
		if a.Through != 3 {
			t.Fatalf("through %d: the cumulative ack passed a refused or missing sequence (%+v)", a.Through, a)
		}
		refused = append(refused, a.Refused...)
		missing = append(missing, a.Missing...)
		seen = append(seen, storedSeqs(a)...)
	}
	if len(refused) != 1 || refused[0].Seq != 4 || refused[0].Count != 1 || refused[0].Code != wire.CodeInvalid {
		t.Fatalf("refused %+v", refused)
	}
	if !slices.Equal(missing, [][2]uint64{{5, 5}}) {
		t.Fatalf("missing %v", missing)
	}
	// The publisher resends 5, its floor at 4 now that it has the refusal of 4.
	b.send("A", 5, 4, "orders.a", nil)
	a = b.until("A", 7)
	seen = append(seen, storedSeqs(a)...)
	slices.Sort(seen)
	if !slices.Equal(seen, []uint64{5, 6, 7}) || len(a.Missing) != 0 {
		t.Fatalf("stored %v, ack %+v", seen, a)
	}
	st := b.in.Stats()
	if st.Batched.Missing != 1 || st.Batched.Refused != 1 || st.Batched.Streams != 1 || st.Rejected[wire.CodeInvalid] != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// TestBatchedIdleExpiry: streams with nothing for StreamIdle expire on the expiry tick (a fake
// clock); one that comes back is rebuilt from its floor.
func TestBatchedIdleExpiry(t *testing.T) {
	b := newBatchedHarness(t, batched.Config{StreamIdle: time.Minute})
	for _, s := range []string{"A", "B"} {
		b.send(s, 1, 0, "idle."+s, nil)
		b.until(s, 1)
	}
	b.advance(30 * time.Second)
	b.send("C", 1, 0, "idle.C", nil)
	b.until("C", 1)
	b.advance(40 * time.Second) // A and B idle for 70 s, C for 40 s
	b.tick <- b.clock()         // unbuffered: the tracker has it once this returns
	b.send("C", 2, 1, "idle.C", nil)
	b.until("C", 2) // handled after the expiry
	if st := b.in.Stats().Batched; st.Expired != 2 || st.Streams != 1 {
		t.Fatalf("stats %+v: want A and B expired, C kept", st)
	}
	// A comes back at seq 5, its floor at 4: the rebuilt stream acks through 5 at once.
	b.send("A", 5, 4, "idle.A", nil)
	if a := b.until("A", 5); !slices.Equal(storedSeqs(a), []uint64{5}) || len(a.Missing) != 0 {
		t.Fatalf("ack %+v", a)
	}
	if st := b.in.Stats().Batched; st.Streams != 2 {
		t.Fatalf("stats %+v", st)
	}
}

// TestBatchedHeaderErrors: a malformed header is refused with a plain error reply (400) and
// nothing is stored.
func TestBatchedHeaderErrors(t *testing.T) {
	b := newBatchedHarness(t, batched.Config{})
	m := nats.NewMsg("orders.bad")
	m.Header.Set(wire.HeaderSeq, "stream.with.dots 1 0")
	if _, err := b.request(m); err == nil || !strings.Contains(err.Error(), "(400)") {
		t.Fatalf("reply %v", err)
	}
	if len(b.app.snapshot()) != 0 {
		t.Fatal("something was stored")
	}
}

// TestBatchedOff: without Config.Batched, the header is refused (ErrBatchedOff, 400).
func TestBatchedOff(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	m := nats.NewMsg("orders.off")
	m.Header.Set(wire.HeaderSeq, "s 1 0")
	if _, err := h.request(m); err == nil || !strings.Contains(err.Error(), "batched acks") {
		t.Fatalf("reply %v", err)
	}
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	if len(h.app.snapshot()) != 0 {
		t.Fatal("something was stored")
	}
}
