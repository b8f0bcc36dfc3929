package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/internal/vfs"
	"github.com/rocketstore/engine/internal/wire"
	"github.com/rocketstore/engine/stages/ingress"
	"github.com/rocketstore/engine/stages/ingress/route"
)

// Integration tests of the served engine: a real embedded nats-server on a random loopback
// port, publishers on their own connections, the whole pipeline on real files. Nothing here
// waits for time to pass: every wait is for a reply, a watermark or a channel, bounded by
// serveTimeout, which only a failing test reaches.

// serveTimeout bounds every wait of these tests.
const serveTimeout = 2 * time.Minute

// served is a Server under test. shutdown stops it once; the cleanup calls it if the test did
// not (Server.Shutdown must be called once: a second call would wait for Run's result again).
type served struct {
	*Server
	once sync.Once
	err  error
}

func (s *served) shutdown() error {
	s.once.Do(func() { s.err = s.Server.Shutdown() })
	return s.err
}

// serve starts an engine with an embedded nats-server on a random loopback port.
func serve(t testing.TB, opts Options, nopts NATSOptions) *served {
	t.Helper()
	if nopts.Listen == "" {
		nopts.Listen = "127.0.0.1:-1"
	}
	srv, err := Serve(opts, nopts)
	if err != nil {
		t.Fatal(err)
	}
	s := &served{Server: srv}
	t.Cleanup(func() {
		if err := s.shutdown(); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return s
}

// connect opens a publisher connection of its own to the served engine's server.
func connect(t testing.TB, s *served, name string) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(s.ClientURL(), nats.Name(name), nats.MaxReconnects(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// syncGate blocks the CommitLog's syncs while it is armed and not released: the group-commit
// flusher then stalls inside Segment.Sync, Durable stops, and so do acks and dispatch. Other
// syncs (ConsumeQueues, checkpoint) pass.
type syncGate struct {
	armed     atomic.Bool
	open      chan struct{} // closed by release
	entered   chan struct{} // closed when the first sync blocks
	enterOnce sync.Once
	openOnce  sync.Once
	blocked   atomic.Int64 // syncs that waited at the gate
}

func newSyncGate() *syncGate {
	return &syncGate{open: make(chan struct{}), entered: make(chan struct{})}
}

var commitlogDir = string(filepath.Separator) + "commitlog" + string(filepath.Separator)

func (g *syncGate) inject(op vfs.Op, name string) error {
	if op != vfs.OpSegmentSync || !g.armed.Load() || !strings.Contains(name, commitlogDir) {
		return nil
	}
	select {
	case <-g.open:
		return nil
	default:
	}
	g.blocked.Add(1)
	g.enterOnce.Do(func() { close(g.entered) })
	<-g.open
	return nil
}

func (g *syncGate) release() { g.openOnce.Do(func() { close(g.open) }) }

// rrPublisher publishes n messages on its own connection, in seq order from one goroutine, as
// requests whose replies come to prefix.<seq>, with at most cap(window) of them unanswered.
type rrPublisher struct {
	id     int
	nc     *nats.Conn
	n      int
	build  func(seq int) *nats.Msg
	prefix string
	window chan struct{} // a slot per unanswered request

	// Written by the reply handler only (one goroutine); read after done is closed.
	acks    []wire.Ack
	replied []bool
	errs    []error // error replies and malformed replies, by seq
	got     atomic.Int64
	done    chan struct{} // closed when every request has its reply

	stalled     chan struct{} // closed the first time the window is found full
	stalledOnce sync.Once
	stalledAcks int64 // replies received when the window was first found full
}

func newRRPublisher(t testing.TB, id int, nc *nats.Conn, n, window int, build func(seq int) *nats.Msg) *rrPublisher {
	t.Helper()
	p := &rrPublisher{
		id: id, nc: nc, n: n, build: build, prefix: nc.NewInbox(), window: make(chan struct{}, window),
		acks: make([]wire.Ack, n), replied: make([]bool, n), errs: make([]error, n),
		done: make(chan struct{}), stalled: make(chan struct{}),
	}
	if n == 0 {
		close(p.done)
	}
	sub, err := nc.Subscribe(p.prefix+".*", p.onReply)
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return p
}

func (p *rrPublisher) onReply(m *nats.Msg) {
	seq, err := strconv.Atoi(m.Subject[len(p.prefix)+1:])
	if err != nil || seq < 0 || seq >= p.n || p.replied[seq] {
		// Not ours to count: a test failure shows up as a missing reply.
		return
	}
	p.replied[seq] = true
	p.acks[seq], p.errs[seq] = wire.ParseReply(m.Data)
	<-p.window
	if p.got.Add(1) == int64(p.n) {
		close(p.done)
	}
}

// run publishes every message; it returns once they are all handed to the connection (and
// flushed), or with the reason it could not.
func (p *rrPublisher) run(ctx context.Context) error {
	for seq := range p.n {
		select {
		case p.window <- struct{}{}:
		default:
			p.stalledOnce.Do(func() {
				p.stalledAcks = p.got.Load()
				close(p.stalled)
			})
			select {
			case p.window <- struct{}{}:
			case <-ctx.Done():
				return fmt.Errorf("publisher %d: waiting for a window slot at seq %d: %w", p.id, seq, ctx.Err())
			}
		}
		m := p.build(seq)
		m.Reply = p.prefix + "." + strconv.Itoa(seq)
		if err := p.nc.PublishMsg(m); err != nil {
			return fmt.Errorf("publisher %d: seq %d: %w", p.id, seq, err)
		}
	}
	return p.nc.FlushWithContext(ctx)
}

// wait returns once every reply has come.
func (p *rrPublisher) wait(ctx context.Context) error {
	select {
	case <-p.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("publisher %d: %d of %d replies: %w", p.id, p.got.Load(), p.n, ctx.Err())
	}
}

// runAll runs the publishers in parallel and waits for every reply.
func runAll(ctx context.Context, pubs []*rrPublisher) error {
	errs := make(chan error, len(pubs))
	for _, p := range pubs {
		go func() {
			if err := p.run(ctx); err != nil {
				errs <- err
				return
			}
			errs <- p.wait(ctx)
		}()
	}
	var all []error
	for range pubs {
		all = append(all, <-errs)
	}
	return errors.Join(all...)
}

// loadRun is how many consecutive messages of a publisher go to one subject: with a window
// larger than that, a run is in flight at once, spread over the subject's queues by key, so
// that the order check has something to check.
const loadRun = 25

// loadMsg is message seq of publisher pub in the load test: runs of loadRun messages per
// subject (each publisher starting at a different subject), a body that names the publisher
// and the sequence (the order check reads them back), and headers.
func loadMsg(pub, seq, subjects int) *nats.Msg {
	subject := fmt.Sprintf("load.s%04d", (seq/loadRun+pub*subjects/4)%subjects)
	m := nats.NewMsg(subject)
	m.Data = loadBody(pub, seq, subject)
	m.Header.Set(nats.MsgIdHdr, fmt.Sprintf("p%d-%d", pub, seq))
	m.Header.Set(ingress.DefaultKeysHeader, fmt.Sprintf("k%d-%d other-%d", pub, seq, seq%7))
	m.Header.Set("X-Publisher", strconv.Itoa(pub))
	return m
}

func loadBody(pub, seq int, subject string) []byte {
	return fmt.Appendf(nil, "p%d|%08d|%s|%s", pub, seq, subject, bytes.Repeat([]byte{'x'}, seq%200))
}

// parseLoadBody reads the publisher and the sequence back from a loadBody.
func parseLoadBody(b []byte) (pub, seq int, ok bool) {
	f := bytes.SplitN(b, []byte{'|'}, 3)
	if len(f) < 3 || len(f[0]) < 2 || f[0][0] != 'p' {
		return 0, 0, false
	}
	pub, err1 := strconv.Atoi(string(f[0][1:]))
	seq, err2 := strconv.Atoi(string(f[1]))
	return pub, seq, err1 == nil && err2 == nil
}

// checkAcked reads the message of every ack back: the ConsumeQueue unit at the ack's queue
// offset points at the ack's CommitLog offset, and the record there is the message that was
// sent (topic, queue, offsets, body, properties).
func checkAcked(t testing.TB, e *Engine, acks []wire.Ack, want func(i int) *nats.Msg) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), serveTimeout)
	defer cancel()
	// Acks in sync mode are durable, and dispatch follows Durable.
	if err := e.WaitDispatched(ctx, e.Offsets().Durable); err != nil {
		t.Fatal(err)
	}
	bad := 0
	fail := func(format string, args ...any) {
		t.Helper()
		if bad++; bad <= 10 {
			t.Errorf(format, args...)
		}
	}
	for i, a := range acks {
		m := want(i)
		if a.Duplicate {
			fail("message %d: acked as a duplicate: %+v", i, a)
			continue
		}
		topic, err := route.SubjectToTopic(m.Subject)
		if err != nil {
			t.Fatal(err)
		}
		if a.Topic != topic {
			fail("message %d: ack topic %q, want %q", i, a.Topic, topic)
			continue
		}
		if a.MsgID != commitlog.OffsetMsgID(e.opts.StoreHost, a.CommitLogOffset) {
			fail("message %d: ack msgId %s does not name offset %d", i, a.MsgID, a.CommitLogOffset)
		}
		cq := e.cq.Find(a.Topic, a.QueueID)
		if cq == nil {
			fail("message %d: no consumequeue %s/%d", i, a.Topic, a.QueueID)
			continue
		}
		u, err := cq.Unit(a.QueueOffset)
		if err != nil {
			fail("message %d: %s/%d@%d: %v", i, a.Topic, a.QueueID, a.QueueOffset, err)
			continue
		}
		if u.Phys != a.CommitLogOffset {
			fail("message %d: unit %s/%d@%d points at %d, ack said %d", i, a.Topic, a.QueueID, a.QueueOffset, u.Phys, a.CommitLogOffset)
			continue
		}
		v, release, err := e.log.Read(u.Phys)
		if err != nil {
			fail("message %d: read %d: %v", i, u.Phys, err)
			continue
		}
		if err := checkRecord(v, a, m); err != nil {
			fail("message %d at %d: %v", i, u.Phys, err)
		}
		if int32(v.TotalSize()) != u.Size {
			fail("message %d: unit size %d, record size %d", i, u.Size, v.TotalSize())
		}
		release()
	}
	if bad > 0 {
		t.Fatalf("%d of %d acked messages do not read back", bad, len(acks))
	}
}

// checkRecord compares a stored record with the ack it got and the message that was sent.
func checkRecord(v commitlog.View, a wire.Ack, m *nats.Msg) error {
	if string(v.Topic()) != a.Topic || v.QueueID() != a.QueueID || v.QueueOffset() != a.QueueOffset ||
		v.PhysicalOffset() != a.CommitLogOffset || v.StoreTimestamp() != a.StoreTimestamp {
		return fmt.Errorf("record %s/%d@%d phys %d ts %d, ack %+v", v.Topic(), v.QueueID(), v.QueueOffset(),
			v.PhysicalOffset(), v.StoreTimestamp(), a)
	}
	if !bytes.Equal(v.Body(), m.Data) {
		return fmt.Errorf("body %q, want %q", v.Body(), m.Data)
	}
	props := v.Properties().Map()
	want := map[string]string{ingress.PropNatsSubject: m.Subject}
	for name, vals := range m.Header {
		switch name {
		case nats.MsgIdHdr:
			want[commitlog.PropUniqKey] = vals[0]
		case ingress.DefaultKeysHeader:
			want[commitlog.PropKeys] = strings.Join(vals, " ")
		case ingress.DefaultTagsHeader:
			want[commitlog.PropTags] = vals[0]
		default:
			want[name] = vals[0]
		}
	}
	if _, ok := m.Header[nats.MsgIdHdr]; !ok {
		// Ingress generates one, as a RocketMQ broker does.
		if len(props[commitlog.PropUniqKey]) != 32 {
			return fmt.Errorf("no generated UNIQ_KEY: properties %q", props)
		}
		want[commitlog.PropUniqKey] = props[commitlog.PropUniqKey]
	}
	for name, val := range want {
		if props[name] != val {
			return fmt.Errorf("property %s = %q, want %q (properties %q)", name, props[name], val, props)
		}
	}
	if !v.HasPropCRC() {
		return errors.New("no __CRC32# property")
	}
	if len(props) != len(want)+1 {
		return fmt.Errorf("properties %q, want %q and __CRC32#", props, want)
	}
	return nil
}

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
