package main

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/internal/store/consumequeue"
	"github.com/rocketstore/engine/internal/vfs"
	"github.com/rocketstore/engine/internal/wire"
)

// TestRunSurvivesSIGKILL runs the real command, publishes with acks from several publishers,
// kills it with SIGKILL after a random number of acks, restarts it on the same store, again and
// again; then checks that every acked message is stored exactly once, at the position its ack
// gave, and readable. In async mode a SIGKILL loses nothing either (the page cache survives the
// process), so both modes get the same check.
func TestRunSurvivesSIGKILL(t *testing.T) {
	for _, mode := range []string{"sync", "async"} {
		t.Run(mode, func(t *testing.T) {
			kills := 20
			if mode == "async" || testing.Short() {
				kills = 5
			}
			dir := t.TempDir()
			rng := rand.New(rand.NewPCG(uint64(len(mode)), 42))
			var acked []sent
			seq := 0
			for k := range kills {
				c := startChild(t, append(storeArgs(dir), "--listen", "127.0.0.1:-1", "--flush", mode)...)
				running, _ := c.waitLog(0, "engine running")
				url, _ := running["nats"].(string)
				target := 20 + rng.IntN(300)
				got := publishUntilKilled(t, c, url, k, &seq, target)
				acked = append(acked, got...)
				if code := c.wait(); code != -1 && code != 137 {
					t.Logf("kill %d: exit code %d", k, code)
				}
			}
			// One clean run more, so that recovery after the last kill runs and is checked.
			c := startChild(t, append(storeArgs(dir), "--listen", "127.0.0.1:-1", "--flush", mode)...)
			c.waitLog(0, "engine running")
			c.signal(syscall.SIGTERM)
			if code := c.wait(); code != 0 {
				t.Fatalf("clean stop after %d kills: exit %d", kills, code)
			}
			checkExactlyOnce(t, dir, acked)
			t.Logf("%s: %d kills survived, %d acked messages all present once", mode, kills, len(acked))
		})
	}
}

// publishUntilKilled publishes requests from 4 publishers until target acks came, then SIGKILLs
// the child while the publishers keep sending; it returns what was acked.
func publishUntilKilled(t *testing.T, c *child, url string, round int, seq *int, target int) []sent {
	t.Helper()
	nc, err := nats.Connect(url, nats.MaxReconnects(0))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	var mu sync.Mutex
	var acked []sent
	reached := make(chan struct{})
	var once sync.Once
	var wg sync.WaitGroup
	base := *seq
	const perPublisher = 100000 // bounded: the kill ends the loop long before
	for p := range 4 {
		wg.Go(func() {
			for i := range perPublisher {
				m := nats.NewMsg(fmt.Sprintf("kill.p%d", p))
				m.Data = fmt.Appendf(nil, "r%d p%d n%d", round, p, base+i)
				m.Header.Set(nats.MsgIdHdr, string(m.Data))
				reply, err := nc.RequestMsg(m, 10*time.Second)
				if err != nil {
					return // killed
				}
				a, err := wire.ParseReply(reply.Data)
				if err != nil {
					t.Errorf("reply: %v", err)
					return
				}
				mu.Lock()
				acked = append(acked, sent{subject: m.Subject, body: m.Data, ack: a})
				if len(acked) >= target {
					once.Do(func() { close(reached) })
				}
				mu.Unlock()
			}
		})
	}
	select {
	case <-reached:
	case <-time.After(waitTimeout):
		t.Fatal("acks did not come")
	}
	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-c.exited
	nc.Close() // the publishers' pending requests fail now
	wg.Wait()
	*seq += perPublisher
	mu.Lock()
	defer mu.Unlock()
	return acked
}

// checkExactlyOnce reads every ConsumeQueue of the stopped store: each acked message is at its
// ack's position with its body, and no body is stored twice.
func checkExactlyOnce(t *testing.T, dir string, acked []sent) {
	t.Helper()
	cqs, err := consumequeue.Open(consumequeue.Options{FS: vfs.Default, Root: dir, UnitsPerFile: cqUnits})
	if err != nil {
		t.Fatal(err)
	}
	defer cqs.Close()
	if _, err := cqs.Load(); err != nil {
		t.Fatal(err)
	}
	if _, err := cqs.RecoverAll(); err != nil {
		t.Fatal(err)
	}
	log, err := commitlog.OpenLog(commitlog.LogOptions{FS: vfs.Default, Dir: filepath.Join(dir, "commitlog"), FileSize: commitLogSize, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	seen := map[string]int{}
	for _, cq := range cqs.Queues() {
		for off := cq.MinOffset(); off < cq.MaxOffset(); off++ {
			u, err := cq.Unit(off)
			if err != nil {
				t.Fatalf("%s@%d: %v", cq, off, err)
			}
			v, release, err := log.Read(u.Phys)
			if err != nil {
				t.Fatalf("%s@%d -> %d: %v", cq, off, u.Phys, err)
			}
			seen[string(v.Body())]++
			release()
		}
	}
	for body, n := range seen {
		if n > 1 {
			t.Errorf("%q stored %d times", body, n)
		}
	}
	for _, s := range acked {
		a := s.ack
		cq := cqs.Find(a.Topic, a.QueueID)
		if cq == nil {
			t.Fatalf("no consumequeue %s/%d", a.Topic, a.QueueID)
		}
		u, err := cq.Unit(a.QueueOffset)
		if err != nil {
			t.Fatalf("acked %q at %s/%d@%d: %v", s.body, a.Topic, a.QueueID, a.QueueOffset, err)
		}
		v, release, err := log.Read(u.Phys)
		if err != nil {
			t.Fatal(err)
		}
		ok := u.Phys == a.CommitLogOffset && bytes.Equal(v.Body(), s.body)
		release()
		if !ok {
			t.Fatalf("acked %q at %s/%d@%d (commitlog %d) is not there", s.body, a.Topic, a.QueueID, a.QueueOffset, a.CommitLogOffset)
		}
	}
}
