package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
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

// Helpers of the tests of a served engine (serve_test.go and the others that serve one).

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
