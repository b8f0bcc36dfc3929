package publisher_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	natstest "github.com/nats-io/nats-server/v2/test"
	"github.com/nats-io/nats.go"

	"github.com/rocketstore/engine/engine"
	"github.com/rocketstore/engine/engine/publisher"
	"github.com/rocketstore/engine/internal/vfs"
	"github.com/rocketstore/engine/internal/wire"
)

// packModes are the publisher's two ways of sending: packs (the default) and one NATS message
// per message.
var packModes = []struct {
	name    string
	maxPack int
}{{"packed", 0}, {"unpacked", 1}}

// TestInjectedLoss: messages lost between the publisher and the engine are reported missing by
// the engine (exactly: the markers say they never came) and resent; a resend lost again, and
// the last messages of the stream (no later message shows the gap), are resent on timeout.
// Everything ends up acknowledged and stored once. Packed, whole packs are lost.
func TestInjectedLoss(t *testing.T) {
	for _, pm := range packModes {
		t.Run(pm.name, func(t *testing.T) { testInjectedLoss(t, pm.maxPack) })
	}
}

func testInjectedLoss(t *testing.T, maxPack int) {
	const n = 20_000
	s := serve(t, testOptions(t, t.TempDir(), engine.FlushSync), engine.NATSOptions{})
	nc := connect(t, s.ClientURL())
	var resends sync.Map // seq -> resends seen
	var sends atomic.Int64
	d := &dropper{nc: nc, drop: func(seq uint64, resend bool, m *nats.Msg) bool {
		if !resend {
			if maxPack != 1 { // every 5th pack, and whatever carries the last messages
				return sends.Add(1)%5 == 0 || seq+uint64(entries(m)) > n-3
			}
			return seq%37 == 0 || seq > n-3
		}
		k, _ := resends.LoadOrStore(seq, new(atomic.Int32))
		return seq%(37*5) == 0 && k.(*atomic.Int32).Add(1) == 1 // its first resend is lost too
	}}
	p := newPublisher(t, nc, publisher.Options{PublishMsg: d.publish, AckTimeout: 300 * time.Millisecond, MaxPack: maxPack})
	msgs := publishN(t, p, n, 128, subjects("loss", 8))
	flush(t, p)
	st, est := p.Stats(), s.Stats()
	t.Logf("dropped %d; publisher %+v; engine batched %+v", d.dropped(), st, est.Ingress.Batched)
	if st.Failed != 0 || st.Acked != n || st.ResentTimeout < 1 || st.ResentMissing == 0 {
		t.Fatalf("publisher stats %+v: want resends as missing and on timeout", st)
	}
	if lost := int64(n/37 + 3); maxPack == 1 && (st.ResentMissing < lost-3-int64(n/(37*5)) || st.ResentTimeout < 3) {
		t.Fatalf("publisher stats %+v: want about %d resent as missing, at least 3 on timeout", st, lost)
	}
	if maxPack != 1 && st.Packs == 0 {
		t.Fatalf("publisher stats %+v: no packs", st)
	}
	if est.Ingress.Batched.Missing < st.ResentMissing {
		t.Fatalf("engine reported %d missing, publisher resent %d as missing", est.Ingress.Batched.Missing, st.ResentMissing)
	}
	checkExactlyOnce(t, s.Engine, msgs)
}

// TestReordering: the publisher's messages reach NATS out of order (pairs swapped), and the
// stream spreads over many queues and both ingress workers. Sending out of sequence order breaks
// the protocol's premise (the markers can then declare missing a message that is only late), so
// a few resends are expected; each is answered as a duplicate: everything is stored once.
// Packed, packs are swapped.
func TestReordering(t *testing.T) {
	for _, pm := range packModes {
		t.Run(pm.name, func(t *testing.T) { testReordering(t, pm.maxPack) })
	}
}

func testReordering(t *testing.T, maxPack int) {
	const n = 10_000
	s := serve(t, testOptions(t, t.TempDir(), engine.FlushSync), engine.NATSOptions{})
	nc := connect(t, s.ClientURL())
	var held *nats.Msg
	var mu sync.Mutex
	swap := func(m *nats.Msg) error {
		mu.Lock()
		defer mu.Unlock()
		if seq, resend := seqOf(m); !resend && seq%2 == 1 {
			held = copyMsg(m) // the publisher reuses m
			return nil
		}
		if err := nc.PublishMsg(m); err != nil {
			return err
		}
		if held != nil {
			h := held
			held = nil
			return nc.PublishMsg(h)
		}
		return nil
	}
	p := newPublisher(t, nc, publisher.Options{PublishMsg: swap, AckTimeout: time.Second, MaxPack: maxPack})
	msgs := publishN(t, p, n, 64, subjects("reorder", 16))
	flush(t, p)
	st := p.Stats()
	t.Logf("publisher %+v; engine duplicates %d, batched %+v", st, s.Stats().Duplicates, s.Stats().Ingress.Batched)
	if st.Acked != n || st.Failed != 0 {
		t.Fatalf("stats %+v", st)
	}
	checkExactlyOnce(t, s.Engine, msgs)
}

// TestDuplicateResends: copies of messages reach the engine (as they are, and as resends): the
// first copy of a sequence is stored, the others are dropped (the stream's claims) or, resends
// found in the store, answered from it. An already acknowledged sequence resent by hand after the
// stream is done is answered with the first copy's position. Nothing is stored twice. Packed,
// whole packs are copied.
func TestDuplicateResends(t *testing.T) {
	for _, pm := range packModes {
		t.Run(pm.name, func(t *testing.T) { testDuplicateResends(t, pm.maxPack) })
	}
}

func testDuplicateResends(t *testing.T, maxPack int) {
	const n = 5_000
	s := serve(t, testOptions(t, t.TempDir(), engine.FlushSync), engine.NATSOptions{})
	nc := connect(t, s.ClientURL())
	var copies, sends atomic.Int64 // messages sent twice; NATS messages sent
	twice := func(m *nats.Msg) error {
		if err := nc.PublishMsg(m); err != nil {
			return err
		}
		_, resend := seqOf(m)
		k := sends.Add(1)
		switch {
		case resend:
		case k%10 == 0: // the same bytes again
			copies.Add(int64(entries(m)))
			return nc.PublishMsg(m)
		case k%7 == 0: // a resend right behind the original
			copies.Add(int64(entries(m)))
			c := copyMsg(m)
			c.Header.Set(publisher.HeaderSeq, m.Header.Get(publisher.HeaderSeq)+" r")
			return nc.PublishMsg(c)
		}
		return nil
	}
	p := newPublisher(t, nc, publisher.Options{PublishMsg: twice, MaxPack: maxPack})
	msgs := publishN(t, p, n, 100, subjects("dup", 4))
	flush(t, p)
	est := s.Stats()
	t.Logf("publisher %+v; engine duplicates %d, batched %+v", p.Stats(), est.Duplicates, est.Ingress.Batched)
	b := est.Ingress.Batched
	if got := b.Dropped + b.LookupHits + est.Duplicates; got != copies.Load() || got == 0 {
		t.Fatalf("%d copies dropped, found by lookup or deduped, want %d", got, copies.Load())
	}
	checkExactlyOnce(t, s.Engine, msgs)

	// By hand, after the stream is done: message 41 again, flagged as a resend (with the floor
	// just below it, as a publisher that lost its ack would send it): the engine finds it in the
	// store and answers with its position, as a duplicate.
	first, err := msgs[41].future.Wait(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	hits := s.Stats().Ingress.Batched.LookupHits
	inbox := nc.NewInbox()
	acks, err := nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	m := nats.NewMsg(msgs[41].subject)
	m.Reply, m.Data = inbox, msgs[41].body
	m.Header.Set(publisher.HeaderSeq, fmt.Sprintf("%s %d %d r", p.StreamID(), first.Seq, first.Seq-1))
	if err := nc.PublishMsg(m); err != nil {
		t.Fatal(err)
	}
	reply, err := acks.NextMsg(testTimeout)
	if err != nil {
		t.Fatal(err)
	}
	a, err := wire.ParseBatchAck(reply.Data)
	if err != nil {
		t.Fatal(err)
	}
	want := wire.StoredRun{Topic: first.Topic, QueueID: first.QueueID, QueueOffset: first.QueueOffset, Seq: first.Seq, Count: 1, Step: 1, Dup: true}
	if a.Stream != p.StreamID() || a.Through != n || len(a.Stored) != 1 || a.Stored[0] != want {
		t.Fatalf("ack %s, want the position %+v", reply.Data, want)
	}
	if b := s.Stats().Ingress.Batched; b.LookupHits != hits+1 {
		t.Fatalf("%d resends found in the store, want %d", b.LookupHits, hits+1)
	}
	checkExactlyOnce(t, s.Engine, msgs)
}

// TestEngineRestart: the engine is killed (Server.Abort: as a crash of the process, the page
// cache survives) in the middle of a stream and started again on the same store, while NATS (a
// server of the test's own) and the publisher carry on. Messages published while no engine
// listens are lost; the publisher resends what was not acked, the restarted engine finds the
// resends of what the first one stored in the store (its IndexFile) and answers them as
// duplicates. Every message acknowledged is stored exactly once.
func TestEngineRestart(t *testing.T) {
	for _, mode := range []engine.FlushMode{engine.FlushSync, engine.FlushAsync} {
		t.Run(mode.String(), func(t *testing.T) { testEngineRestart(t, mode) })
	}
}

func testEngineRestart(t *testing.T, mode engine.FlushMode) {
	const n = 30_000
	opts := natstest.DefaultTestOptions
	opts.Port = -1
	ns := natstest.RunServer(&opts)
	t.Cleanup(ns.Shutdown)
	dir := t.TempDir()
	nopts := engine.NATSOptions{URL: ns.ClientURL(), Subjects: []string{"restart.>"}}
	s1 := serve(t, testOptions(t, dir, mode), nopts)

	nc := connect(t, ns.ClientURL())
	var acked atomic.Int64
	third := make(chan struct{})
	p := newPublisher(t, nc, publisher.Options{
		Window: 2048, AckTimeout: 300 * time.Millisecond, MaxRetries: 1000,
		OnResult: func(*publisher.Future, publisher.Ack, error) {
			if acked.Add(1) == n/3 {
				close(third)
			}
		},
	})
	published := make(chan []sent, 1)
	go func() { published <- publishN(t, p, n, 128, subjects("restart", 8)) }()

	select {
	case <-third:
	case <-time.After(testTimeout):
		t.Fatal("no third of the acks")
	}
	if err := s1.abort(); err != nil {
		t.Fatalf("abort: %v", err)
	}
	s2 := serve(t, testOptions(t, dir, mode), nopts)
	if s2.Engine.Recovery().CleanExit {
		t.Fatal("the restart saw a clean exit")
	}
	msgs := <-published
	flush(t, p)
	st, est := p.Stats(), s2.Stats()
	t.Logf("publisher %+v", st)
	t.Logf("restarted engine: batched %+v, duplicates %d", est.Ingress.Batched, est.Duplicates)
	if st.Acked != n || st.Failed != 0 || st.Resent == 0 {
		t.Fatalf("stats %+v", st)
	}
	checkExactlyOnce(t, s2.Engine, msgs)
}

// TestManyPublishers: 50 streams at once, 5 per connection, each over its own subjects and some
// shared ones; all acknowledged, stored once, one stream each in the table.
func TestManyPublishers(t *testing.T) {
	const streams, perConn, n = 50, 5, 1_000
	s := serve(t, testOptions(t, t.TempDir(), engine.FlushSync), engine.NATSOptions{})
	var all [streams][]sent
	var wg sync.WaitGroup
	pubs := make([]*publisher.Publisher, streams)
	for i := range streams {
		var nc *nats.Conn
		if i%perConn == 0 || nc == nil {
			nc = connect(t, s.ClientURL())
		}
		pubs[i] = newPublisher(t, nc, publisher.Options{Window: 256})
	}
	for i := range streams {
		wg.Go(func() {
			all[i] = publishN(t, pubs[i], n, 128, func(k int) string {
				if k%3 == 0 {
					return "many.shared" + strconv.Itoa(k%4)
				}
				return fmt.Sprintf("many.p%d.s%d", i, k%2)
			})
			flush(t, pubs[i])
		})
	}
	wg.Wait()
	b := s.Stats().Ingress.Batched
	t.Logf("engine batched %+v", b)
	if b.Streams != streams || b.Acked != streams*n || b.Evicted != 0 {
		t.Fatalf("engine batched stats %+v", b)
	}
	checkExactlyOnce(t, s.Engine, all[:]...)
}

// TestStreamTableBound: with room for 4 streams and 12 publishing at once, the engine evicts the
// least recently active stream for each new one (after sending it what it had) and tells it; the
// evicted streams are rebuilt from their floors when their next outcome comes. The table never
// holds more than 4, nothing fails, everything is stored once.
func TestStreamTableBound(t *testing.T) {
	const streams, n, room = 12, 2_000, 4
	s := serve(t, testOptions(t, t.TempDir(), engine.FlushSync), engine.NATSOptions{MaxStreams: room})
	nc := connect(t, s.ClientURL())
	var all [streams][]sent
	pubs := make([]*publisher.Publisher, streams)
	for i := range pubs {
		pubs[i] = newPublisher(t, nc, publisher.Options{Window: 128, AckTimeout: time.Second})
	}
	var wg sync.WaitGroup
	for i := range streams {
		wg.Go(func() {
			all[i] = publishN(t, pubs[i], n, 64, subjects(fmt.Sprintf("bound.p%d", i), 2))
			flush(t, pubs[i])
		})
	}
	wg.Wait()
	b := s.Stats().Ingress.Batched
	var evictions, resent int64
	for _, p := range pubs {
		evictions += p.Stats().Evictions
		resent += p.Stats().Resent
	}
	t.Logf("engine batched %+v; publishers told of %d evictions, resent %d", b, evictions, resent)
	if b.Streams > room || b.Evicted == 0 || evictions == 0 {
		t.Fatalf("engine batched stats %+v, %d evictions told", b, evictions)
	}
	checkExactlyOnce(t, s.Engine, all[:]...)
}

// TestBatchedOff: against an engine with batched acks off, every message is refused at once
// with a plain error, and the publisher fails: Publish and Flush report it.
func TestBatchedOff(t *testing.T) {
	s := serve(t, testOptions(t, t.TempDir(), engine.FlushSync), engine.NATSOptions{NoBatchedAcks: true})
	p := newPublisher(t, connect(t, s.ClientURL()), publisher.Options{})
	f, err := p.Publish(context.Background(), "off.x", []byte("x"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Wait(context.Background()); err == nil {
		t.Fatal("acked by an engine with batched acks off")
	} else {
		t.Logf("the future: %v", err)
	}
	if _, err := p.Publish(context.Background(), "off.x", []byte("x"), nil); err == nil {
		t.Fatal("Publish still works")
	}
	if err := p.Flush(context.Background()); err == nil {
		t.Fatal("Flush reports nothing")
	}
	if st := s.Stats(); st.Records != 0 {
		t.Fatalf("%d records stored", st.Records)
	}
}

// fullFS reports the disk as full (99%) while full is set.
type fullFS struct {
	vfs.FS
	full atomic.Bool
}

func (f *fullFS) DiskUsage(dir string) (vfs.Usage, error) {
	if f.full.Load() {
		return vfs.Usage{Total: 100 << 20, Free: 1 << 20, Avail: 1 << 20}, nil
	}
	return f.FS.DiskUsage(dir)
}

// TestRetriableRefusals: the disk is full, the engine refuses every message (507) in the
// streams' acks, and the cumulative ack stays below them; once space returns, the publisher's
// retries (after RetryDelay) are stored, once each.
func TestRetriableRefusals(t *testing.T) {
	const n = 300
	fs := &fullFS{FS: vfs.Default}
	fs.full.Store(true)
	opts := testOptions(t, t.TempDir(), engine.FlushSync)
	opts.FS, opts.CleanInterval, opts.CleanFirstDelay = fs, 10*time.Millisecond, time.Hour
	s := serve(t, opts, engine.NATSOptions{})
	nc := connect(t, s.ClientURL())
	p := newPublisher(t, nc, publisher.Options{RetryDelay: 50 * time.Millisecond, MaxRetries: 100})

	// A second subscriber on the stream's ack subject frees the disk at the first refusal.
	spy := connect(t, s.ClientURL())
	var through atomic.Uint64
	if _, err := spy.Subscribe(p.AckSubject(), func(m *nats.Msg) {
		a, err := wire.ParseBatchAck(m.Data)
		if err != nil {
			t.Error(err)
			return
		}
		if fs.full.Load() && len(a.Refused) > 0 {
			if a.Refused[0].Code != wire.CodeDiskFull || a.Through != 0 || len(a.Stored) != 0 {
				t.Errorf("while full: %s", m.Data)
			}
			through.Store(a.Through)
			fs.full.Store(false)
		}
	}); err != nil {
		t.Fatal(err)
	}
	if err := spy.Flush(); err != nil {
		t.Fatal(err)
	}
	msgs := publishN(t, p, n, 64, subjects("full", 4))
	flush(t, p)
	st, b := p.Stats(), s.Stats().Ingress.Batched
	t.Logf("publisher %+v; engine batched %+v", st, b)
	if fs.full.Load() || st.ResentRefused == 0 || b.Refused == 0 || st.Acked != n {
		t.Fatalf("full %v; publisher %+v; engine %+v", fs.full.Load(), st, b)
	}
	checkExactlyOnce(t, s.Engine, msgs)
}
