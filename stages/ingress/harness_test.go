package ingress

import (
	"bytes"
	"context"
	"net/netip"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	natstest "github.com/nats-io/nats-server/v2/test"
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/internal/wire"
	"github.com/rocketstore/engine/stages"
)

var (
	testStoreHost = netip.MustParseAddrPort("127.0.0.1:10911")
	testBornHost  = netip.MustParseAddrPort("10.1.2.3:4222")
)

// waitTimeout bounds every wait in these tests; nothing here waits for time to pass, only for
// events, so it is only ever reached by a failing test.
const waitTimeout = 20 * time.Second

// runServer starts an embedded nats-server on a random loopback port.
func runServer(t testing.TB, maxPayload int32) *server.Server {
	t.Helper()
	opts := natstest.DefaultTestOptions // 127.0.0.1, no logs, no signal handlers
	opts.Port = -1
	if maxPayload > 0 {
		opts.MaxPayload = maxPayload
	}
	s := natstest.RunServer(&opts)
	t.Cleanup(s.Shutdown)
	return s
}

func connect(t testing.TB, s *server.Server) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// appended is one record as the fake appender stored it: the stamped bytes, decoded.
type appended struct {
	rec  commitlog.Record
	meta stages.Record
}

// fakeAppender stands in for the appender and the ack stage at ingress's boundary: it takes
// batches from Out in order, gives each record the next offset of its (topic, queue) and the
// next CommitLog position, stamps a copy of its bytes and checks it decodes (both CRCs), treats a
// repeated MsgID as a duplicate, then calls Done. Count is advanced by the records seen, so tests
// wait for "n records appended" on a watermark instead of sleeping.
type fakeAppender struct {
	t     testing.TB
	in    <-chan *stages.Batch
	gate  chan struct{} // closed: go; the appender waits for it before its first batch
	Count *stages.Watermark
	done  chan struct{} // closed when Out was closed and drained

	mu       sync.Mutex
	records  []appended
	batches  int
	largest  int // records in the largest batch
	next     map[string]int64
	seen     map[string]stages.Record
	phys     int64
	decodeOK bool
}

func newFakeAppender(t testing.TB, in <-chan *stages.Batch, open bool) *fakeAppender {
	a := &fakeAppender{
		t: t, in: in, gate: make(chan struct{}), Count: stages.NewWatermark(0), done: make(chan struct{}),
		next: map[string]int64{}, seen: map[string]stages.Record{}, phys: 1 << 20, decodeOK: true,
	}
	if open {
		close(a.gate)
	}
	go a.run()
	return a
}

func (a *fakeAppender) run() {
	defer close(a.done)
	<-a.gate
	var n int64
	for b := range a.in {
		a.mu.Lock()
		a.batches++
		a.largest = max(a.largest, len(b.Records))
		for i := range b.Records {
			r := &b.Records[i]
			if r.Err != nil {
				continue // as the appender: refused before (a marker, a batched refusal)
			}
			if first, ok := a.seen[r.Topic+"\x00"+r.MsgID]; ok && r.MsgID != "" {
				r.Duplicate = true
				r.QueueID, r.QueueOffset, r.PhysOffset = first.QueueID, first.QueueOffset, first.PhysOffset
				r.Size, r.StoreTimestamp = first.Size, first.StoreTimestamp
				continue
			}
			key := r.Topic + "\x00" + string(rune('0'+r.QueueID))
			r.QueueOffset = a.next[key]
			a.next[key]++
			r.PhysOffset, r.Size, r.StoreTimestamp = a.phys, int32(len(r.Bytes)), 1700000000000+a.phys
			a.phys += int64(r.Size)
			stamped := bytes.Clone(r.Bytes)
			commitlog.Stamp(stamped, r.QueueOffset, r.PhysOffset, r.StoreTimestamp, r.PropCRC)
			dec, err := commitlog.Decode(stamped, commitlog.Check{RequirePropCRC: r.PropCRC})
			if err != nil {
				a.decodeOK = false
				a.t.Errorf("record %d does not decode: %v", len(a.records), err)
			}
			a.records = append(a.records, appended{rec: dec, meta: *r})
			if r.MsgID != "" {
				a.seen[r.Topic+"\x00"+r.MsgID] = *r
			}
		}
		n += int64(len(b.Records))
		a.mu.Unlock()
		b.Done(b)
		a.Count.Advance(n)
	}
}

// wait waits until n records went through, or fails.
func (a *fakeAppender) wait(t testing.TB, n int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := a.Count.Wait(ctx, n); err != nil {
		t.Fatalf("waiting for %d records (have %d): %v", n, a.Count.Load(), err)
	}
}

func (a *fakeAppender) snapshot() []appended {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]appended(nil), a.records...)
}

// harness runs an Ingress on a real embedded server, with a fake appender on Out.
type harness struct {
	t      testing.TB
	srv    *server.Server
	nc     *nats.Conn // ingress's connection
	pub    *nats.Conn // the publisher's
	out    chan *stages.Batch
	in     *Ingress
	app    *fakeAppender
	cancel context.CancelFunc
	runErr chan error
	logs   *syncBuffer
	// drained is closed by closeAcks (the tracker's end), acksDone once RunAcks returned.
	drained, acksDone chan struct{}
	drainOnce         sync.Once
}

// closeAcks ends the batched-ack tracker once the fake appender has called Done for every batch,
// as the engine's Drained does, and waits for it: what it was handed is answered.
func (h *harness) closeAcks() {
	h.drainOnce.Do(func() {
		<-h.app.done
		close(h.drained)
	})
	<-h.acksDone
}

type harnessOpts struct {
	maxPayload int32
	outCap     int
	gated      bool // the appender waits for app.gate
	cfg        func(*Config)
}

func newHarness(t testing.TB, o harnessOpts) *harness {
	t.Helper()
	h := &harness{t: t, srv: runServer(t, o.maxPayload), runErr: make(chan error, 1), logs: &syncBuffer{}}
	h.nc = connect(t, h.srv)
	h.pub = connect(t, h.srv)
	h.out = make(chan *stages.Batch, max(o.outCap, 1))
	cfg := Config{
		Conn:      h.nc,
		Out:       h.out,
		StoreHost: testStoreHost,
		BornHost:  testBornHost,
		Workers:   4,
		Logger:    zerolog.New(h.logs),
	}
	if o.cfg != nil {
		o.cfg(&cfg)
	}
	in, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.in = in
	h.app = newFakeAppender(t, h.out, !o.gated)
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() {
		err := in.Run(ctx)
		close(h.out) // the owner of Out closes it once its producer has returned
		h.runErr <- err
	}()
	// The tracker runs until the fake appender has called Done for every batch (its done),
	// and closeAcks has been asked for: the engine's Drained.
	h.drained, h.acksDone = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(h.acksDone)
		_ = in.RunAcks(h.drained)
	}()
	t.Cleanup(func() {
		// A test that did not stop ingress: abort, and still insist that nothing leaks.
		cancel()
		h.openGate()
		select {
		case <-h.runErr:
		case <-time.After(waitTimeout):
			t.Errorf("Run did not return")
		}
		select {
		case <-h.app.done:
		case <-time.After(waitTimeout):
			t.Errorf("Out was not closed")
		}
		h.closeAcks()
		checkNoLeaks(t)
	})
	select {
	case <-in.Ready():
	case err := <-h.runErr:
		t.Fatalf("Run: %v", err)
	case <-time.After(waitTimeout):
		t.Fatal("ingress not ready")
	}
	return h
}

func (h *harness) openGate() {
	select {
	case <-h.app.gate:
	default:
		close(h.app.gate)
	}
}

// stop stops ingress gracefully and waits for Run and the appender to finish.
func (h *harness) stop() error {
	h.t.Helper()
	h.in.Stop()
	var err error
	select {
	case err = <-h.runErr:
		h.runErr <- err // for the cleanup
	case <-time.After(waitTimeout):
		h.t.Fatal("Run did not return after Stop")
	}
	select {
	case <-h.app.done: // Out was closed and drained
	case <-time.After(waitTimeout):
		h.t.Fatal("Out was not closed")
	}
	return err
}

// request sends m and parses the reply.
func (h *harness) request(m *nats.Msg) (wire.Ack, error) {
	h.t.Helper()
	resp, err := h.pub.RequestMsg(m, waitTimeout)
	if err != nil {
		h.t.Fatalf("request on %q: %v", m.Subject, err)
	}
	return wire.ParseReply(resp.Data)
}

// checkNoLeaks fails if a goroutine other than the caller's still runs code of this package. It
// retries a bounded number of times, yielding in between, because a goroutine that signalled its
// end (nats.go's callback goroutine after our closed handler) may still be returning.
func checkNoLeaks(t testing.TB) {
	t.Helper()
	var leaks []string
	buf := make([]byte, 1<<20)
	for range 2000 {
		n := runtime.Stack(buf, true)
		leaks = leaks[:0]
		for i, g := range strings.Split(string(buf[:n]), "\n\n") {
			if i == 0 || strings.Contains(g, "testing.tRunner") {
				continue // ourselves, and test goroutines
			}
			if strings.Contains(g, "rocketstore/engine/stages/ingress") {
				leaks = append(leaks, g)
			}
		}
		if len(leaks) == 0 {
			return
		}
		runtime.Gosched()
	}
	t.Fatalf("%d goroutines leaked:\n%s", len(leaks), strings.Join(leaks, "\n\n"))
}

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
