package publisher_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/rocketstore/engine/engine"
	"github.com/rocketstore/engine/engine/publisher"
	"github.com/rocketstore/engine/stages/ingress"
	"github.com/rocketstore/engine/stages/ingress/route"
)

// Tests against engine.Serve: a real embedded nats-server on a random loopback port (or one of
// the test's own, when the engine restarts), the whole pipeline on real files. Nothing waits for
// time to pass: every wait is for an ack, a future or a Flush, bounded by testTimeout, which only
// a failing test reaches.

const testTimeout = 2 * time.Minute

func testOptions(t testing.TB, dir string, mode engine.FlushMode) engine.Options {
	return engine.Options{
		Dir:               dir,
		Logger:            zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel),
		FlushMode:         mode,
		CommitLogFileSize: 16 << 20,
		ConsumeQueueUnits: 10_000,
		IndexSlots:        1 << 14,
		IndexEntries:      1 << 17,
	}
}

// server is a served engine that the test stops once (Shutdown or Abort).
type server struct {
	*engine.Server
	once sync.Once
	err  error
}

func (s *server) shutdown() error {
	s.once.Do(func() { s.err = s.Server.Shutdown() })
	return s.err
}

func (s *server) abort() error {
	s.once.Do(func() { s.err = s.Server.Abort() })
	return s.err
}

func serve(t testing.TB, opts engine.Options, nopts engine.NATSOptions) *server {
	t.Helper()
	if nopts.URL == "" && nopts.Listen == "" {
		nopts.Listen = "127.0.0.1:-1"
	}
	srv, err := engine.Serve(opts, nopts)
	if err != nil {
		t.Fatal(err)
	}
	s := &server{Server: srv}
	t.Cleanup(func() {
		if err := s.shutdown(); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return s
}

func connect(t testing.TB, url string, opts ...nats.Option) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

func newPublisher(t testing.TB, nc *nats.Conn, opts publisher.Options) *publisher.Publisher {
	t.Helper()
	p, err := publisher.New(nc, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		_ = p.Close(ctx)
	})
	return p
}

// sent is one message a test published, and what the publisher answered.
type sent struct {
	subject string
	body    []byte
	future  *publisher.Future
}

// publishN publishes n messages of about size bytes on subjects subj(i), returning them in
// order.
func publishN(t testing.TB, p *publisher.Publisher, n, size int, subj func(i int) string) []sent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	out := make([]sent, n)
	for i := range n {
		body := fmt.Appendf(nil, "%s|%08d|", p.StreamID(), i)
		for len(body) < size {
			body = append(body, 'x')
		}
		f, err := p.Publish(ctx, subj(i), body, nil)
		if err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
		out[i] = sent{subject: subj(i), body: body, future: f}
	}
	return out
}

// flush waits until p has every answer and fails on any failure.
func flush(t testing.TB, p *publisher.Publisher) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := p.Flush(ctx); err != nil {
		t.Fatalf("flush: %v (stats %+v)", err, p.Stats())
	}
}

// stored is one message read back from the store.
type stored struct {
	topic       string
	queueID     int32
	queueOffset int64
	body        []byte
	subject     string
}

// readStore reads every message of every queue, by UNIQ_KEY.
func readStore(t testing.TB, e *engine.Engine) map[string][]stored {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := e.WaitDispatched(ctx, e.Offsets().Written); err != nil {
		t.Fatal(err)
	}
	out := map[string][]stored{}
	for _, ti := range e.Topics() {
		for _, q := range ti.Queues {
			for off := int64(0); ; {
				res, err := e.Get(ctx, engine.GetRequest{Topic: ti.Name, QueueID: q, Offset: off, Max: 1024, MaxBytes: 8 << 20})
				if err != nil {
					t.Fatal(err)
				}
				if len(res.Messages) == 0 {
					break
				}
				for _, m := range res.Messages {
					out[m.UniqKey] = append(out[m.UniqKey], stored{topic: m.Topic, queueID: m.QueueID,
						queueOffset: m.QueueOffset, body: m.Body, subject: m.Properties[ingress.PropNatsSubject]})
					if _, ok := m.Properties[publisher.HeaderSeq]; ok {
						t.Fatalf("%s: the %s header was stored", m.UniqKey, publisher.HeaderSeq)
					}
				}
				off = res.NextOffset
			}
		}
	}
	return out
}

// checkExactlyOnce checks the store against what was published: every message whose future was
// acked is stored exactly once, at the ack's position, with its body and subject; every message
// stored in their topics is one that was published, once. Futures must all be answered.
func checkExactlyOnce(t testing.TB, e *engine.Engine, msgs ...[]sent) {
	t.Helper()
	got := readStore(t, e)
	want := 0
	bad := 0
	fail := func(format string, args ...any) {
		t.Helper()
		if bad++; bad <= 10 {
			t.Errorf(format, args...)
		}
	}
	for _, list := range msgs {
		for i, m := range list {
			a, err, ok := m.future.Result()
			if !ok {
				fail("message %d (%s): not answered", i, m.future.MsgID())
				continue
			}
			if err != nil {
				fail("message %d (%s): %v", i, m.future.MsgID(), err)
				continue
			}
			want++
			copies := got[a.MsgID]
			if len(copies) != 1 {
				fail("message %d (%s): stored %d times", i, a.MsgID, len(copies))
				continue
			}
			c := copies[0]
			topic, _ := route.SubjectToTopic(m.subject)
			if c.topic != topic || a.Topic != topic || c.queueID != a.QueueID || c.queueOffset != a.QueueOffset {
				fail("message %d (%s): acked at %s/%d@%d, stored at %s/%d@%d", i, a.MsgID, a.Topic, a.QueueID,
					a.QueueOffset, c.topic, c.queueID, c.queueOffset)
			}
			if string(c.body) != string(m.body) || c.subject != m.subject {
				fail("message %d (%s): stored %q on %q, sent %q on %q", i, a.MsgID, c.body, c.subject, m.body, m.subject)
			}
		}
	}
	topics := map[string]bool{}
	for _, list := range msgs {
		for _, m := range list {
			topic, _ := route.SubjectToTopic(m.subject)
			topics[topic] = true
		}
	}
	total := 0
	for id, copies := range got {
		if !topics[copies[0].topic] {
			continue // not a topic these messages went to
		}
		total += len(copies)
		if len(copies) > 1 {
			fail("%s stored %d times", id, len(copies))
		}
	}
	if total != want {
		fail("the store holds %d messages, %d were acknowledged", total, want)
	}
	if bad > 0 {
		t.Fatalf("%d problems", bad)
	}
}

// dropper is a PublishMsg hook that loses the messages drop says to lose, and counts them.
type dropper struct {
	nc    *nats.Conn
	drop  func(seq uint64, resend bool, m *nats.Msg) bool
	mu    sync.Mutex
	count int
}

func (d *dropper) publish(m *nats.Msg) error {
	seq, resend := seqOf(m)
	if d.drop(seq, resend, m) {
		d.mu.Lock()
		d.count++
		d.mu.Unlock()
		return nil
	}
	return d.nc.PublishMsg(m)
}

func (d *dropper) dropped() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.count
}

// seqOf reads the sequence and the resend flag of a message's Rs-Seq header.
func seqOf(m *nats.Msg) (uint64, bool) {
	f := strings.Fields(m.Header.Get(publisher.HeaderSeq))
	var seq uint64
	fmt.Sscan(f[1], &seq)
	return seq, len(f) == 4
}

// entries is the number of messages m carries: its Rs-Pack count, or 1.
func entries(m *nats.Msg) int {
	if v := m.Header.Get(publisher.HeaderPack); v != "" {
		n, _ := strconv.Atoi(v)
		return n
	}
	return 1
}

func subjects(prefix string, n int) func(int) string {
	return func(i int) string { return fmt.Sprintf("%s.s%d", prefix, i%n) }
}

// copyMsg copies a message the publisher hands its PublishMsg hook (it reuses the original).
func copyMsg(m *nats.Msg) *nats.Msg {
	c := &nats.Msg{Subject: m.Subject, Reply: m.Reply, Data: slices.Clone(m.Data), Header: nats.Header{}}
	for k, v := range m.Header {
		c.Header[k] = slices.Clone(v)
	}
	return c
}
