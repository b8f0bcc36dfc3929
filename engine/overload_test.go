package engine

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"runtime"
	"strconv"
	"sync"
	"testing"

	natsserver "github.com/nats-io/nats-server/v2/server"
	natstest "github.com/nats-io/nats-server/v2/test"
	"github.com/nats-io/nats.go"

	clusters "github.com/rocketstore/engine/internal/natstest"
	"github.com/rocketstore/engine/internal/vfs"
	"github.com/rocketstore/engine/stages/ingress"
)

// Back-pressure and overload through NATS, with the CommitLog's sync held at a gate: nothing
// becomes durable, so nothing is acked or dispatched, and every queue of the pipeline fills up
// to its bound. The queue bounds are made small so that the bounds are cheap to reach.

// overloadOptions is an engine with the sync gate and small queues: the writer takes one batch
// per round and the ack queue holds one, so that while the sync is held the pipeline past the
// inbox holds at most three batches (the ack stage's, the ack queue's, the writer's).
func overloadOptions(t testing.TB, gate *syncGate) Options {
	opts := testOptions(t, t.TempDir())
	opts.FS = vfs.NewFaulty(vfs.Default, gate.inject)
	opts.CommitLogFileSize = 64 << 20
	opts.AppendInbox = 2
	opts.AckQueue = 1
	opts.MaxAppendBatch = 1
	return opts
}

const overloadWorkers = 2

// pipelineCapacity is how many messages a served engine can take in while its sync is held:
// per batch at most ingress.DefaultMaxBatch records; the batches of the ack stage, the ack
// queue, the writer, the inbox and one in the hands of each ingress worker; each worker's
// channel; and per subscription the message its callback holds plus nats.go's pending limit.
func pipelineCapacity(o Options, subs, pendingMsgs int) int {
	batches := 1 + o.AckQueue + o.MaxAppendBatch + o.AppendInbox + overloadWorkers
	// The workers' inboxes: WorkerQueue jobs that may wait each, and the fire-and-forget
	// messages of pendingMsgs shared over them; then nats.go's pending, per subscription.
	return batches*ingress.DefaultMaxBatch + overloadWorkers*ingress.DefaultWorkerQueue + pendingMsgs + subs*(1+pendingMsgs)
}

// barrier is a subscription on the engine's own connection to a subject the engine does not
// store. A message a publisher sends after others reaches it only after nats.go has read every
// earlier message of that publisher on that connection (queued or dropped it): an event that
// says "everything before has reached the engine's client", with no polling.
type barrier struct {
	subject string
	seen    chan string
}

func newBarrier(t testing.TB, s *served, subject string) *barrier {
	t.Helper()
	b := &barrier{subject: subject, seen: make(chan string, 16)}
	if _, err := s.conn.Subscribe(subject+".*", func(m *nats.Msg) { b.seen <- m.Subject }); err != nil {
		t.Fatal(err)
	}
	if err := s.conn.Flush(); err != nil {
		t.Fatal(err)
	}
	return b
}

// pass publishes barrier message k on nc and waits until the engine's connection has it.
func (b *barrier) pass(ctx context.Context, nc *nats.Conn, k int) error {
	subject := b.subject + "." + strconv.Itoa(k)
	if err := nc.Publish(subject, nil); err != nil {
		return err
	}
	if err := nc.FlushWithContext(ctx); err != nil {
		return err
	}
	select {
	case got := <-b.seen:
		if got != subject {
			return fmt.Errorf("barrier %s arrived, want %s", got, subject)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("barrier %s: %w", subject, ctx.Err())
	}
}

// heapAlloc is the live heap after a full collection.
func heapAlloc() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestSlowSyncStallsPublishersAndBoundsMemory: with the CommitLog's sync held,
//
//   - request/reply publishers with a bounded window of unanswered requests stall: no ack comes,
//     the writer's inbox fills to its capacity and the writer stores no more than the few batches
//     downstream of it can hold;
//   - a fire-and-forget publisher that keeps sending meanwhile does not grow the heap past a bound
//     derived from the queue limits (ingress, and nats.go behind it, drop past the pending
//     limits instead);
//   - once the sync is released, every request is acked and every ack reads back.
func TestSlowSyncStallsPublishersAndBoundsMemory(t *testing.T) {
	const (
		publishers  = 4
		window      = 512 // 4 × 512 in flight: more than the pipeline holds without a full inbox
		perPub      = 1500
		pendingMsgs = 4096
		ffBody      = 1 << 10
		chunk       = 2000
	)
	const ffTotal = 60_000 // cheap even in -short: nats.go drops nearly all of it
	pendingBytes := 2 << 20
	gate := newSyncGate()
	opts := overloadOptions(t, gate)
	s := serve(t, opts, NATSOptions{
		Subjects: []string{"rr.>", "ff.>"}, Workers: overloadWorkers,
		PendingMsgs: pendingMsgs, PendingBytes: pendingBytes,
	})
	t.Cleanup(gate.release) // before the shutdown (cleanups run last first): Close syncs
	gate.armed.Store(true)

	ctx, cancel := context.WithTimeout(context.Background(), serveTimeout)
	defer cancel()
	rrMsg := func(pub, seq int) *nats.Msg {
		m := nats.NewMsg(fmt.Sprintf("rr.s%d", seq%8))
		m.Data = fmt.Appendf(nil, "p%d|%08d|%s|", pub, seq, m.Subject)
		m.Header.Set(nats.MsgIdHdr, fmt.Sprintf("rr-%d-%d", pub, seq))
		return m
	}
	pubs := make([]*rrPublisher, publishers)
	for p := range pubs {
		nc := connect(t, s, fmt.Sprintf("rr-%d", p))
		pubs[p] = newRRPublisher(t, p, nc, perPub, window, func(seq int) *nats.Msg { return rrMsg(p, seq) })
	}
	rrDone := make(chan error, 1)
	go func() { rrDone <- runAll(ctx, pubs) }()

	// Every publisher fills its window and stalls; not one ack came.
	for _, p := range pubs {
		select {
		case <-p.stalled:
		case err := <-rrDone:
			t.Fatalf("publishers finished with the sync held: %v", err)
		case <-ctx.Done():
			t.Fatalf("publisher %d never stalled", p.id)
		}
		if p.stalledAcks != 0 {
			t.Fatalf("publisher %d had %d acks with the sync held", p.id, p.stalledAcks)
		}
	}
	select {
	case <-gate.entered:
	case <-ctx.Done():
		t.Fatal("no commitlog sync reached the gate")
	}
	// The inbox fills up. Its depth is a gauge with no event to wait on: this is the one poll.
	clusters.WaitFor(t, "appender inbox full", func() bool { st := s.Stats(); return st.AppendInbox == st.AppendInboxCap })
	st := s.Stats()
	t.Logf("stalled: inbox %d/%d, ack queue %d/%d, worker depths %v, nats pending %d, records written %d",
		st.AppendInbox, st.AppendInboxCap, st.AckQueue, st.AckQueueCap, st.Ingress.WorkerDepth, st.Ingress.Pending, st.Records)

	// A fire-and-forget publisher keeps sending. After each chunk a barrier makes sure the
	// engine's client has read (queued or dropped) all of it, so the heap is measured with the
	// engine's buffers at their fullest and the server's socket buffers empty.
	base := heapAlloc()
	ff := connect(t, s, "ff")
	bar := newBarrier(t, s, "barrier")
	body := make([]byte, ffBody)
	peak := base
	for sent, k := 0, 0; sent < ffTotal; k++ {
		for range min(chunk, ffTotal-sent) {
			if err := ff.Publish("ff.flood", body); err != nil {
				t.Fatal(err)
			}
			sent++
		}
		if err := bar.pass(ctx, ff, k); err != nil {
			t.Fatal(err)
		}
		peak = max(peak, heapAlloc())
	}
	st = s.Stats()
	for _, p := range pubs {
		if n := p.got.Load(); n != 0 {
			t.Fatalf("publisher %d got %d acks with the sync held", p.id, n)
		}
	}
	if st.Records > int64(3*ingress.DefaultMaxBatch) {
		t.Fatalf("the writer stored %d records with the sync held: more than the 3 batches past it hold", st.Records)
	}
	// Everything received is still inside (nothing was acked or refused), next to what nats.go
	// buffers (its pending count includes the message each callback holds).
	if held, limit := st.Ingress.Received+st.Ingress.Pending, int64(pipelineCapacity(opts, 2, pendingMsgs)+2); held > limit {
		t.Fatalf("the engine holds %d messages, bound %d", held, limit)
	}

	// The bound: what the queue limits let the engine hold, all of it as flood messages (as if
	// no request were in the way), on top of the heap before the flood.
	const (
		msgSize    = ffBody + 256       // payload, nats.Msg, subject
		recordSize = ffBody + 128 + 128 // payload, record header and properties, stages.Record
		arenaChunk = 64 << 10           // a batch's records may pin one more arena chunk
		slack      = 16 << 20           // the server, nats.go's read buffers, GC timing
	)
	const unbounded = ffBody * ffTotal // the flood, if it were all kept
	batches := 1 + opts.AckQueue + opts.MaxAppendBatch + opts.AppendInbox + overloadWorkers
	bound := base + uint64(
		batches*(ingress.DefaultMaxBatch*(recordSize+msgSize)+arenaChunk)+ // records and the messages behind them
			overloadWorkers*ingress.DefaultWorkerQueue*msgSize+ // ingress inboxes: jobs that may wait
			pendingBytes+ // ingress inboxes: fire-and-forget messages (their cost counts the nats.Msg)
			2*(pendingBytes+pendingMsgs*256)+ // nats.go pending, per subscription
			slack)
	t.Logf("flood of %d × %d B with the sync held: heap %.1f MiB before, peak %.1f MiB (+%.1f MiB), bound %.1f MiB; dropped %d, slow consumer events %d",
		ffTotal, ffBody, mib(base), mib(peak), mib(peak-base), mib(bound), st.Ingress.Dropped, st.Ingress.SlowConsumerEvents)
	if bound-base >= unbounded {
		t.Fatalf("the bound (+%.1f MiB) would not catch a flood kept in memory (%.1f MiB)", mib(bound-base), mib(unbounded))
	}
	if peak > bound {
		t.Fatalf("heap peaked at %.1f MiB with the sync held, bound %.1f MiB", mib(peak), mib(bound))
	}
	if st.Ingress.Dropped == 0 {
		t.Fatal("the flood was not dropped anywhere, yet the heap stayed bounded: the test measured nothing")
	}

	// Release: every request gets its ack, and every ack reads back.
	gate.release()
	if err := <-rrDone; err != nil {
		t.Fatal(err)
	}
	for _, p := range pubs {
		for seq, err := range p.errs {
			if err != nil {
				t.Fatalf("publisher %d seq %d: %v", p.id, seq, err)
			}
		}
		checkAcked(t, s.Engine, p.acks, func(seq int) *nats.Msg { return rrMsg(p.id, seq) })
	}
	if err := s.shutdown(); err != nil {
		t.Fatal(err)
	}
	st = s.Stats()
	rrTotal := int64(publishers * perPub)
	ffStored := st.Records - rrTotal
	if ffReceived := st.Ingress.Received - rrTotal; ffReceived != ffStored || ffReceived+st.Ingress.Dropped != int64(ffTotal) {
		t.Fatalf("flood: %d received, %d stored, %d dropped; want received = stored and received + dropped = %d",
			ffReceived, ffStored, st.Ingress.Dropped, ffTotal)
	}
}

func mib(n uint64) float64 { return float64(n) / (1 << 20) }

// TestFireAndForgetOverloadCountsDrops: a fire-and-forget publisher sends far more than the
// engine can take in while its sync is held; ingress and nats.go drop the rest. After the sync is released
// and the engine has stopped (a graceful stop stores everything received), every message is
// accounted for: received + dropped = sent, stored = received, what ingress dropped itself is
// counted by topic, and the ConsumeQueues hold exactly what was stored. The barrier (see barrier) makes the end of the flood an event.
func TestFireAndForgetOverloadCountsDrops(t *testing.T) {
	const pendingMsgs = 100
	total := 20_000
	if testing.Short() {
		total = 10_000
	}
	gate := newSyncGate()
	opts := overloadOptions(t, gate)
	s := serve(t, opts, NATSOptions{
		Subjects: []string{"ff.>"}, Workers: overloadWorkers, PendingMsgs: pendingMsgs, PendingBytes: 1 << 20,
	})
	t.Cleanup(gate.release)
	gate.armed.Store(true)
	capacity := pipelineCapacity(opts, 1, pendingMsgs)
	if total < 2*capacity {
		t.Fatalf("%d messages do not overload a pipeline that holds %d", total, capacity)
	}

	ctx, cancel := context.WithTimeout(context.Background(), serveTimeout)
	defer cancel()
	bar := newBarrier(t, s, "barrier")
	nc := connect(t, s, "ff")
	for i := range total {
		if err := nc.Publish(fmt.Sprintf("ff.q%d", i%3), fmt.Appendf(nil, "%08d|%0200d", i, i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := bar.pass(ctx, nc, 0); err != nil {
		t.Fatal(err)
	}
	held := s.Stats()
	gate.release()
	if err := s.shutdown(); err != nil {
		t.Fatal(err)
	}
	st := s.Stats()
	in := st.Ingress
	t.Logf("sent %d: received %d, dropped %d (at the barrier %d), stored %d; %d slow consumer events; the pipeline holds at most %d",
		total, in.Received, in.Dropped, held.Ingress.Dropped, st.Records, in.SlowConsumerEvents, capacity)
	if in.Dropped == 0 {
		t.Fatal("nothing dropped")
	}
	// Ingress drops what its inboxes have no room for as the callbacks run, which may be after
	// the barrier's: later drops can only be of what nats.go still held at the barrier.
	if later := in.Dropped - held.Ingress.Dropped; later < 0 || later > held.Ingress.Pending {
		t.Fatalf("%d dropped at the barrier with %d pending in nats.go, %d in the end", held.Ingress.Dropped,
			held.Ingress.Pending, in.Dropped)
	}
	if in.Received+in.Dropped != int64(total) {
		t.Fatalf("received %d + dropped %d != sent %d", in.Received, in.Dropped, total)
	}
	// What ingress dropped itself it counted by topic: the flood's three, and within the total.
	var byTopic int64
	for topic, n := range in.DroppedByTopic {
		if topic != "ff_q0" && topic != "ff_q1" && topic != "ff_q2" || n <= 0 {
			t.Fatalf("dropped by topic: %v", in.DroppedByTopic)
		}
		byTopic += n
	}
	if byTopic == 0 || byTopic > in.Dropped {
		t.Fatalf("%d dropped by topic (%v), %d dropped in all", byTopic, in.DroppedByTopic, in.Dropped)
	}
	if st.Records != in.Received || in.Encoded != in.Received {
		t.Fatalf("received %d, encoded %d, stored %d", in.Received, in.Encoded, st.Records)
	}
	if st.Records > int64(capacity) {
		t.Fatalf("stored %d, more than the %d the pipeline can hold while the sync is held", st.Records, capacity)
	}

	// The ConsumeQueues, read after a restart, hold exactly the stored messages.
	opts.FS = vfs.Default
	e := mustOpen(t, opts)
	defer e.Close()
	var units int64
	for _, topic := range e.cq.Topics() {
		for _, q := range e.cq.QueueIDs(topic) {
			units += e.cq.Find(topic, q).MaxOffset()
		}
	}
	if units != st.Records || int64(total)-units != in.Dropped {
		t.Fatalf("the consumequeues hold %d units; stored %d, dropped %d of %d", units, st.Records, in.Dropped, total)
	}
}

// holdProxy forwards TCP connections to a NATS server. The first time a client sends an UNSUB
// (the engine's drain), it holds everything that client sends from there on until release: the
// server keeps delivering to a subscription the engine is already draining.
type holdProxy struct {
	ln          net.Listener
	target      string
	unsub       chan struct{} // closed when the first UNSUB is seen
	unsubOnce   sync.Once
	release     chan struct{}
	releaseOnce sync.Once
	quit        chan struct{}
	wg          sync.WaitGroup
	mu          sync.Mutex
	conns       []net.Conn
}

func newHoldProxy(t testing.TB, target string) *holdProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &holdProxy{ln: ln, target: target, unsub: make(chan struct{}), release: make(chan struct{}), quit: make(chan struct{})}
	p.wg.Go(p.accept)
	t.Cleanup(func() {
		ln.Close()
		close(p.quit)
		p.mu.Lock()
		for _, c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

func (p *holdProxy) url() string { return "nats://" + p.ln.Addr().String() }
func (p *holdProxy) unhold()     { p.releaseOnce.Do(func() { close(p.release) }) }
func (p *holdProxy) track(c ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.quit:
		return false
	default:
	}
	p.conns = append(p.conns, c...)
	return true
}

func (p *holdProxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return // closed by the cleanup
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			client.Close()
			continue
		}
		if !p.track(client, server) {
			client.Close()
			server.Close()
			return
		}
		p.wg.Go(func() { // server -> client
			_, _ = io.Copy(client, server)
			client.Close()
		})
		p.wg.Go(func() { // client -> server, held from the first UNSUB
			defer server.Close()
			buf := make([]byte, 32<<10)
			var tail []byte // the end of the last read, for an UNSUB cut in two
			held := false
			for {
				n, err := client.Read(buf)
				if n > 0 && !held {
					seen := append(tail, buf[:n]...)
					if bytes.Contains(seen, []byte("UNSUB ")) {
						held = true
						p.unsubOnce.Do(func() { close(p.unsub) })
						select {
						case <-p.release:
						case <-p.quit:
							return
						}
					}
					tail = append(tail[:0], seen[max(0, len(seen)-5):]...)
				}
				if n > 0 {
					if _, err := server.Write(buf[:n]); err != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		})
	}
}

// TestDropsDuringDrainAreCounted: nats.go can still drop messages for a subscription that is
// draining (the server delivers until it has the UNSUB), and it stops telling a subscription's
// drop count once it is closed. Every message must still be counted: received + dropped = sent.
// The engine's connection goes through a proxy that holds its UNSUB, so that messages sent
// during the drain certainly arrive; the sync is held, and more are sent than the whole
// pipeline can take in, so some of them are certainly dropped during the drain.
func TestDropsDuringDrainAreCounted(t *testing.T) {
	const pendingMsgs, before, during = 100, 10_000, 5_000
	nopts := natstest.DefaultTestOptions
	nopts.Port = natsserver.RANDOM_PORT
	nopts.MaxPayload = 4<<20 + 64<<10
	ns := natstest.RunServer(&nopts)
	t.Cleanup(ns.Shutdown)
	proxy := newHoldProxy(t, ns.Addr().String())
	gate := newSyncGate()
	opts := overloadOptions(t, gate)
	capacity := pipelineCapacity(opts, 1, pendingMsgs)
	if during <= capacity {
		t.Fatalf("%d messages during the drain fit in a pipeline that holds %d", during, capacity)
	}
	s := serve(t, opts, NATSOptions{
		URL: proxy.url(), Subjects: []string{"ff.>"}, Workers: overloadWorkers, PendingMsgs: pendingMsgs, PendingBytes: 1 << 20,
	})
	t.Cleanup(gate.release)
	t.Cleanup(proxy.unhold)
	gate.armed.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), serveTimeout)
	defer cancel()
	bar := newBarrier(t, s, "barrier")
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	flood := func(n int) {
		t.Helper()
		for i := range n {
			if err := nc.Publish("ff.x", fmt.Appendf(nil, "%0200d", i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	flood(before)
	if err := bar.pass(ctx, nc, 0); err != nil {
		t.Fatal(err)
	}
	atStop := s.Stats().Ingress.Dropped
	stopped := make(chan error, 1)
	go func() { stopped <- s.shutdown() }()
	select {
	case <-proxy.unsub:
	case <-ctx.Done():
		t.Fatal("the drain never sent its UNSUB")
	}
	flood(during)
	if err := bar.pass(ctx, nc, 1); err != nil {
		t.Fatal(err)
	}
	proxy.unhold()
	gate.release()
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		t.Fatal("shutdown did not finish")
	}
	st := s.Stats()
	in := st.Ingress
	t.Logf("sent %d + %d during the drain: received %d, dropped %d (%d before the stop), stored %d",
		before, during, in.Received, in.Dropped, atStop, st.Records)
	if in.Received+in.Dropped != before+during {
		t.Fatalf("received %d + dropped %d = %d, sent %d: %d drops not counted",
			in.Received, in.Dropped, in.Received+in.Dropped, before+during, before+during-in.Received-in.Dropped)
	}
	// With the sync held until the end, at most capacity messages got in: of the ones sent
	// during the drain, at least during - capacity were dropped.
	if in.Received > int64(capacity) || in.Dropped-atStop < int64(during-capacity) || st.Records != in.Received {
		t.Fatalf("received %d (the pipeline holds %d), dropped %d during the drain (%d sent), stored %d",
			in.Received, capacity, in.Dropped-atStop, during, st.Records)
	}
}
