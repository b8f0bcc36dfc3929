package engine

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/rocketstore/engine/internal/vfs"
)

// failingSyncGate blocks the CommitLog's syncs once armed, until fail is called; from then on
// every CommitLog sync fails with EIO (a disk that died while the flusher waited on it).
type failingSyncGate struct {
	syncGate
}

func (g *failingSyncGate) inject(op vfs.Op, name string) error {
	if op != vfs.OpSegmentSync || !g.armed.Load() || !strings.Contains(name, commitlogDir) {
		return nil
	}
	g.enterOnce.Do(func() { close(g.entered) })
	<-g.open
	return fmt.Errorf("injected: %w", syscall.EIO)
}

// TestFatalErrorAnswersEveryHeldMessage: a sync fails while the pipeline is full to every
// bound (the ack queue, the writer's inbox, the workers' channels, nats.go's pending buffer).
// The failure must reach ingress: every request the engine received is answered (acked before
// the failure, or refused with an error), none waits for ever, and Shutdown returns. With
// the inbox two batches deep, the few thousand messages held fill it many times over.
//
// It runs with the default dispatch lag, where the writer never waits for dispatch, and with a
// lag of one byte, where the writer holds a round of batches while it waits for dispatch (which
// follows Durable in sync mode, so the failed sync leaves it waiting when the engine stops).
func TestFatalErrorAnswersEveryHeldMessage(t *testing.T) {
	for _, c := range []struct {
		name string
		lag  int64
	}{{"default dispatch lag", 0}, {"dispatch lag 1", 1}} {
		t.Run(c.name, func(t *testing.T) { testFatalErrorAnswersEveryHeldMessage(t, c.lag) })
	}
}

func testFatalErrorAnswersEveryHeldMessage(t *testing.T, lag int64) {
	gate := &failingSyncGate{syncGate: *newSyncGate()}
	opts := testOptions(t, t.TempDir())
	opts.FS = vfs.NewFaulty(vfs.Default, gate.inject)
	opts.AppendInbox, opts.AckQueue, opts.MaxAppendBatch = 2, 2, 1
	opts.MaxDispatchLag = lag
	srv, err := Serve(opts, NATSOptions{Listen: "127.0.0.1:-1", Workers: 2, WorkerQueue: 8, MaxBatch: 4})
	if err != nil {
		t.Fatal(err)
	}
	s := &served{Server: srv}
	stopped := make(chan error, 1)
	defer func() {
		select {
		case <-stopped:
		default:
			go func() { stopped <- s.shutdown() }()
			select {
			case <-stopped:
			case <-time.After(serveTimeout):
				t.Error("Shutdown still waiting")
			}
		}
	}()
	nc := connect(t, s, "publisher")

	const n = 3000
	var mu sync.Mutex
	answers := map[string]int{} // "ack", or the error code
	got := make(chan struct{}, n)
	inbox := nc.NewInbox()
	sub, err := nc.Subscribe(inbox+".*", func(m *nats.Msg) {
		kind := "ack"
		if strings.Contains(string(m.Data), `"error"`) {
			kind = "error"
		}
		mu.Lock()
		answers[kind]++
		mu.Unlock()
		got <- struct{}{}
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		t.Fatal(err)
	}
	gate.armed.Store(true)
	for i := range n {
		m := nats.NewMsg(fmt.Sprintf("fatal.s%d", i%16))
		m.Reply = fmt.Sprintf("%s.%d", inbox, i)
		m.Data = fmt.Appendf(nil, "message %d", i)
		if err := nc.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-gate.entered:
	case <-time.After(serveTimeout):
		t.Fatal("no CommitLog sync started")
	}
	gate.release() // the blocked sync, and every later one, fails
	select {
	case <-s.Done():
	case <-time.After(serveTimeout):
		t.Fatal("the pipeline did not stop after the failed sync")
	}
	if !errors.Is(s.Engine.Err(), syscall.EIO) {
		t.Fatalf("pipeline error %v, want the injected EIO", s.Engine.Err())
	}
	deadline := time.After(serveTimeout)
	for i := range n {
		select {
		case <-got:
		case <-deadline:
			mu.Lock()
			t.Fatalf("%d of %d requests answered after the failure (%v)", i, n, answers)
		}
	}
	go func() { stopped <- s.shutdown() }()
	select {
	case err := <-stopped:
		if !errors.Is(err, syscall.EIO) {
			t.Logf("shutdown: %v", err)
		}
	case <-time.After(serveTimeout):
		t.Fatal("Shutdown hangs after the pipeline failed")
	}
	mu.Lock()
	defer mu.Unlock()
	if answers["error"] == 0 {
		t.Fatalf("no request was refused: %v", answers)
	}
	t.Logf("answers after the failed sync: %v", answers)
}
