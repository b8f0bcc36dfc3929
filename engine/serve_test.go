package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rocketstore/engine/internal/wire"
)

// Integration tests of the served engine: a real embedded nats-server on a random loopback
// port, publishers on their own connections, the whole pipeline on real files. Nothing here
// waits for time to pass: every wait is for a reply, a watermark or a channel, bounded by
// serveTimeout, which only a failing test reaches.

// TestServeLoadRequestReply is the load test of the pipeline issue: 4 publishers on their own
// connections send 100,000 messages over 1,000 subjects as requests (sync mode: an ack means on
// disk), each with up to 256 unanswered, with a unique Nats-Msg-Id, Rmq-Keys (which picks the
// queue) and a custom header, in runs of loadRun messages per subject, so that a run is in
// flight at once over the subject's four queues. Every ack must name the place where the
// message is, byte for byte, and within each queue the messages of each publisher must be in
// publish order (breaking ingress's worker choice per queue makes this test fail).
func TestServeLoadRequestReply(t *testing.T) {
	const publishers, subjects, window = 4, 1000, 256
	total := 100_000
	if testing.Short() {
		total = 20_000
	}
	perPub := total / publishers
	opts := testOptions(t, t.TempDir())
	opts.CommitLogFileSize = 64 << 20
	opts.ConsumeQueueUnits = 1000
	opts.IndexSlots, opts.IndexEntries = 1<<16, 1<<19
	s := serve(t, opts, NATSOptions{})

	pubs := make([]*rrPublisher, publishers)
	for p := range pubs {
		nc := connect(t, s, fmt.Sprintf("pub-%d", p))
		pubs[p] = newRRPublisher(t, p, nc, perPub, window, func(seq int) *nats.Msg { return loadMsg(p, seq, subjects) })
	}
	ctx, cancel := context.WithTimeout(context.Background(), serveTimeout)
	defer cancel()
	start := time.Now()
	if err := runAll(ctx, pubs); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	st := s.Stats()
	t.Logf("%d messages acked in %v (%.0f msg/s); %d syncs (%.4f per record), %d batches",
		total, took.Round(time.Millisecond), float64(total)/took.Seconds(), st.Syncs, st.SyncsPerRecord, st.Batches)

	for _, p := range pubs {
		for seq, err := range p.errs {
			if err != nil {
				t.Fatalf("publisher %d seq %d: error reply: %v", p.id, seq, err)
			}
		}
	}
	if st.Records != int64(total) || st.Duplicates != 0 || st.AppendErrors != 0 {
		t.Fatalf("stored %d records (%d duplicates, %d errors), want %d", st.Records, st.Duplicates, st.AppendErrors, total)
	}
	start = time.Now()
	for _, p := range pubs {
		checkAcked(t, s.Engine, p.acks, func(seq int) *nats.Msg { return loadMsg(p.id, seq, subjects) })
	}

	// Order: walk every queue; within it, each publisher's sequence numbers only go up. And the
	// queues hold exactly the acked messages, once each.
	units := 0
	for _, cq := range s.Engine.cq.Queues() {
		last := map[int]int{}
		for off := cq.MinOffset(); off < cq.MaxOffset(); off++ {
			u, err := cq.Unit(off)
			if err != nil {
				t.Fatalf("%s@%d: %v", cq, off, err)
			}
			v, release, err := s.Engine.log.Read(u.Phys)
			if err != nil {
				t.Fatal(err)
			}
			pub, seq, ok := parseLoadBody(v.Body())
			release()
			if !ok || pub < 0 || pub >= publishers || seq < 0 || seq >= perPub {
				t.Fatalf("%s@%d: body is not a load message", cq, off)
			}
			if prev, seen := last[pub]; seen && seq <= prev {
				t.Fatalf("%s@%d: publisher %d's seq %d after %d: publish order lost", cq, off, pub, seq, prev)
			}
			last[pub] = seq
			if a := pubs[pub].acks[seq]; a.Topic != cq.Topic() || a.QueueID != cq.QueueID() || a.QueueOffset != off {
				t.Fatalf("%s@%d holds publisher %d seq %d, acked at %s/%d@%d", cq, off, pub, seq, a.Topic, a.QueueID, a.QueueOffset)
			}
			units++
		}
	}
	if units != total {
		t.Fatalf("the consumequeues hold %d units, want %d", units, total)
	}
	t.Logf("read back and order checked in %v", time.Since(start).Round(time.Millisecond))
}

// TestServeDuplicatesStoredOnce: a second message with the same Nats-Msg-Id, through NATS, is
// acked as a duplicate with the first one's position and not stored again, whether it comes
// after the first was acked or right behind it.
func TestServeDuplicatesStoredOnce(t *testing.T) {
	s := serve(t, testOptions(t, t.TempDir()), NATSOptions{})
	nc := connect(t, s, "dup")
	msg := func(id, body string) *nats.Msg {
		m := nats.NewMsg("orders.dup")
		m.Header.Set(nats.MsgIdHdr, id)
		m.Data = []byte(body)
		return m
	}
	request := func(m *nats.Msg) wire.Ack {
		t.Helper()
		reply, err := nc.RequestMsg(m, serveTimeout)
		if err != nil {
			t.Fatal(err)
		}
		a, err := wire.ParseReply(reply.Data)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	first := request(msg("id-1", "first"))
	second := request(msg("id-1", "second copy, different body"))
	if first.Duplicate || !second.Duplicate {
		t.Fatalf("acks %+v then %+v: want the second one flagged duplicate", first, second)
	}
	same := func(a, b wire.Ack) bool {
		return a.Topic == b.Topic && a.QueueID == b.QueueID && a.QueueOffset == b.QueueOffset &&
			a.CommitLogOffset == b.CommitLogOffset && a.MsgID == b.MsgID
	}
	if !same(first, second) {
		t.Fatalf("duplicate acked at %+v, the original at %+v", second, first)
	}

	// Two copies back to back, without waiting. Without a key header they take two queues
	// (round-robin), so two ingress workers: either may reach the writer first (order holds per
	// queue only). Exactly one is stored; the other is acked as its duplicate.
	pipelined := func(seq int) *nats.Msg { return msg("id-2", fmt.Sprint("pipelined copy ", seq)) }
	p := newRRPublisher(t, 0, nc, 2, 2, pipelined)
	ctx, cancel := context.WithTimeout(context.Background(), serveTimeout)
	defer cancel()
	if err := runAll(ctx, []*rrPublisher{p}); err != nil {
		t.Fatal(err)
	}
	a, b := p.acks[0], p.acks[1]
	if p.errs[0] != nil || p.errs[1] != nil || a.Duplicate == b.Duplicate || !same(a, b) {
		t.Fatalf("back-to-back copies: %+v (%v), %+v (%v): want one stored, one its duplicate", a, p.errs[0], b, p.errs[1])
	}
	stored := 0
	if a.Duplicate {
		stored = 1
	}

	checkAcked(t, s.Engine, []wire.Ack{first}, func(int) *nats.Msg { return msg("id-1", "first") })
	checkAcked(t, s.Engine, []wire.Ack{p.acks[stored]}, func(int) *nats.Msg { return pipelined(stored) })
	units := int64(0)
	for _, q := range s.Engine.cq.QueueIDs(first.Topic) {
		units += s.Engine.cq.Find(first.Topic, q).MaxOffset()
	}
	if st := s.Stats(); units != 2 || st.Records != 2 || st.Duplicates != 2 {
		t.Fatalf("topic %s holds %d units; %d records stored, %d duplicates: want 2, 2, 2", first.Topic, units, st.Records, st.Duplicates)
	}
}

// TestServeBadInputStoresNothing: through NATS, a body over the limit gets 413, a subject
// whose topic would be too long 400, a header with a 0x01 byte 400, and none of them is
// stored: the first good message after them is acked at CommitLog offset 0.
func TestServeBadInputStoresNothing(t *testing.T) {
	opts := testOptions(t, t.TempDir())
	opts.MaxBodySize = 1 << 10
	s := serve(t, opts, NATSOptions{})
	nc := connect(t, s, "bad")

	bigBody := nats.NewMsg("orders.big")
	bigBody.Data = make([]byte, opts.MaxBodySize+1)
	longSubject := nats.NewMsg(strings.Repeat("a", 128)) // a 128-byte topic; RocketMQ allows 127
	longSubject.Data = []byte("x")
	badHeader := nats.NewMsg("orders.header")
	badHeader.Header.Set("X-Bad", "a\x01b")
	badHeader.Data = []byte("x")
	cases := []struct {
		name string
		msg  *nats.Msg
		code int
	}{
		{"body over the limit", bigBody, wire.CodeTooLarge},
		{"topic too long", longSubject, wire.CodeInvalid},
		{"0x01 in a header", badHeader, wire.CodeInvalid},
	}
	for _, c := range cases {
		reply, err := nc.RequestMsg(c.msg, serveTimeout)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		_, err = wire.ParseReply(reply.Data)
		var re *wire.ReplyError
		if !errors.As(err, &re) || re.Code != c.code {
			t.Errorf("%s: reply %s, want an error with code %d", c.name, reply.Data, c.code)
		}
	}
	if end := s.Engine.Offsets().Written; end != 0 {
		t.Fatalf("the commitlog grew to %d", end)
	}

	ok := nats.NewMsg("orders.ok")
	ok.Data = bytes.Repeat([]byte{'y'}, opts.MaxBodySize) // exactly at the limit
	reply, err := nc.RequestMsg(ok, serveTimeout)
	if err != nil {
		t.Fatal(err)
	}
	a, err := wire.ParseReply(reply.Data)
	if err != nil {
		t.Fatalf("a body at the limit: %v", err)
	}
	if a.CommitLogOffset != 0 || a.QueueOffset != 0 {
		t.Fatalf("the first good message is at %d (queue offset %d): something was stored before it", a.CommitLogOffset, a.QueueOffset)
	}
	checkAcked(t, s.Engine, []wire.Ack{a}, func(int) *nats.Msg { return ok })
	st := s.Stats()
	if st.Records != 1 || st.Ingress.Rejected[wire.CodeTooLarge] != 1 || st.Ingress.Rejected[wire.CodeInvalid] != 2 {
		t.Fatalf("records %d, rejected %v: want 1 record, 1×413 and 2×400", st.Records, st.Ingress.Rejected)
	}
}

// goroutineStacks returns the stacks of every goroutine by goroutine id.
func goroutineStacks() map[string]string {
	buf := make([]byte, 1<<20)
	for range 6 { // up to 32 MiB
		if n := runtime.Stack(buf, true); n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	out := map[string]string{}
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		head, _, _ := strings.Cut(g, "\n")
		if id, ok := strings.CutPrefix(head, "goroutine "); ok {
			id, _, _ = strings.Cut(id, " ")
			out[id] = g
		}
	}
	return out
}

// newGoroutines lists the goroutines that are not in before, but for the runtime's and the
// testing package's own.
func newGoroutines(before map[string]string) []string {
	var out []string
	for id, stack := range goroutineStacks() {
		if _, ok := before[id]; ok {
			continue
		}
		if strings.Contains(stack, "testing.tRunner") || strings.Contains(stack, "testing.(*T).Run") {
			continue
		}
		out = append(out, stack)
	}
	slices.Sort(out)
	return out
}

// TestServeShutdownLeavesNoGoroutines: after Shutdown (and the publishers' Close) every
// goroutine the engine, ingress, nats.go and the embedded nats-server started has exited.
// Some of them exit asynchronously after Shutdown returns (nats.go's reader and flusher, the
// server's client loops), so the check waits for them, bounded: it yields and looks again a
// few times a millisecond apart, for at most leakTimeout.
func TestServeShutdownLeavesNoGoroutines(t *testing.T) {
	before := goroutineStacks()
	opts := testOptions(t, t.TempDir())
	opts.MaxBodySize = 1 << 10
	srv, err := Serve(opts, NATSOptions{Listen: "127.0.0.1:-1"})
	if err != nil {
		t.Fatal(err)
	}
	s := &served{Server: srv}
	defer s.shutdown() // on a failure before the real one
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	// Some of everything: acks, an error reply, fire-and-forget messages.
	p := newRRPublisher(t, 0, nc, 500, 64, func(seq int) *nats.Msg { return loadMsg(0, seq, 10) })
	ctx, cancel := context.WithTimeout(context.Background(), serveTimeout)
	defer cancel()
	if err := runAll(ctx, []*rrPublisher{p}); err != nil {
		t.Fatal(err)
	}
	big := nats.NewMsg("orders.big")
	big.Data = make([]byte, 2<<10)
	if reply, err := nc.RequestMsg(big, serveTimeout); err != nil {
		t.Fatal(err)
	} else if _, err := wire.ParseReply(reply.Data); err == nil {
		t.Fatal("a body over the limit was acked")
	}
	for i := range 100 {
		if err := nc.Publish("orders.ff", []byte(strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	nc.Close()
	if err := s.shutdown(); err != nil {
		t.Fatal(err)
	}

	const leakTimeout = 10 * time.Second
	deadline := time.NewTimer(leakTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for rounds := 0; ; rounds++ {
		left := newGoroutines(before)
		if len(left) == 0 {
			t.Logf("every goroutine gone after %d looks", rounds+1)
			return
		}
		runtime.Gosched()
		select {
		case <-tick.C:
		case <-deadline.C:
			t.Fatalf("%d goroutines left after Shutdown:\n\n%s", len(left), strings.Join(left, "\n\n"))
		}
	}
}
