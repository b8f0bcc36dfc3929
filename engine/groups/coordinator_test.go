package groups

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketstore/engine/internal/store/offsets"
	"github.com/rocketstore/engine/internal/vfs"
)

// fakeStore has topics with queue ids and fixed bounds.
type fakeStore struct {
	mu     sync.Mutex
	topics map[string][]int32
	max    int64
}

func (s *fakeStore) Queues(topic string) ([]int32, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, ok := s.topics[topic]
	return slices.Clone(q), ok
}

func (s *fakeStore) Bounds(string, int32) (int64, int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return 0, s.max
}

// pushes records the assignments pushed to each notify subject.
type pushes struct {
	mu   sync.Mutex
	last map[string]Assignment
	n    int
}

func (p *pushes) notify(subject string, a Assignment) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if old, ok := p.last[subject]; ok && old.Generation > a.Generation {
		return // stale: a member ignores it
	}
	p.last[subject] = a
	p.n++
}

func (p *pushes) get(subject string) Assignment {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last[subject]
}

type harness struct {
	c     *Coordinator
	store *fakeStore
	table *offsets.Table
	push  *pushes
}

func newHarness(t *testing.T, queues int, cfg Config) *harness {
	t.Helper()
	table, err := offsets.Open(vfs.NewMem(), "/s", offsets.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st := &fakeStore{topics: map[string][]int32{"orders": ids(queues)}, max: 1000}
	p := &pushes{last: make(map[string]Assignment)}
	cfg.Logger = zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	c := New(cfg, st, table, p.notify)
	t.Cleanup(c.Close)
	return &harness{c: c, store: st, table: table, push: p}
}

var key = Key{Group: "billing", Topic: "orders"}

func (h *harness) join(t *testing.T, name string) Assignment {
	t.Helper()
	a, err := h.c.Join(JoinRequest{Key: key, MemberID: name, Notify: "n." + name})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// owned maps each queue to the members that may read it now (AuthorizeRead at the epoch their
// latest assignment says).
func (h *harness) readers(t *testing.T, members []string) map[int32][]string {
	t.Helper()
	out := make(map[int32][]string)
	for _, m := range members {
		a, err := h.c.Heartbeat(key, m)
		if err != nil {
			continue
		}
		for _, q := range append(a.Queues, a.Revoke...) {
			if h.c.AuthorizeRead(key, m, q.QueueID, q.Epoch) == nil {
				out[q.QueueID] = append(out[q.QueueID], m)
			}
		}
	}
	return out
}

// releaseAll makes every member release what it is asked to give up, committing offset.
func (h *harness) releaseAll(t *testing.T, members []string, offset int64) {
	t.Helper()
	for range 4 { // a release can start another move; bounded
		done := true
		for _, m := range members {
			a, err := h.c.Heartbeat(key, m)
			if err != nil || len(a.Revoke) == 0 {
				continue
			}
			done = false
			var qc []QueueCommit
			for _, q := range a.Revoke {
				qc = append(qc, QueueCommit{QueueID: q.QueueID, Epoch: q.Epoch, Offset: offset})
			}
			if _, err := h.c.Release(key, m, qc); err != nil {
				t.Fatal(err)
			}
		}
		if done {
			return
		}
	}
}

func checkSpread(t *testing.T, readers map[int32][]string, queues int, members []string) {
	t.Helper()
	count := make(map[string]int)
	for q := range int32(queues) {
		if len(readers[q]) != 1 {
			t.Fatalf("queue %d readable by %v, want exactly one member", q, readers[q])
		}
		count[readers[q][0]]++
	}
	for _, m := range members {
		if c := count[m]; c < queues/len(members) || c > queues/len(members)+1 {
			t.Fatalf("uneven: %v", count)
		}
	}
}

// TestJoinRevokeRelease: a join takes its share only once the owners released it, committing
// where they stopped; the newcomer starts there; the old owner's later commits and reads of a
// queue it gave up are fenced.
func TestJoinRevokeRelease(t *testing.T) {
	h := newHarness(t, 8, Config{})
	a := h.join(t, "a")
	if len(a.Queues) != 8 {
		t.Fatalf("first member: %d queues, want all 8", len(a.Queues))
	}
	b := h.join(t, "b")
	if len(b.Queues) != 0 {
		t.Fatalf("newcomer got %v before anyone released", b.Queues)
	}
	pa := h.push.get("n.a")
	if len(pa.Revoke) != 4 || len(pa.Queues) != 4 {
		t.Fatalf("push to a: keep %v, revoke %v; want 4 and 4", pa.Queues, pa.Revoke)
	}
	// Nobody reads a queue being revoked.
	if r := h.readers(t, []string{"a", "b"}); len(r) != 4 {
		t.Fatalf("readable queues while 4 are revoked: %v", r)
	}
	var qc []QueueCommit
	for _, q := range pa.Revoke {
		qc = append(qc, QueueCommit{QueueID: q.QueueID, Epoch: q.Epoch, Offset: 100 + int64(q.QueueID)})
	}
	if _, err := h.c.Release(key, "a", qc); err != nil {
		t.Fatal(err)
	}
	pb := h.push.get("n.b")
	if len(pb.Queues) != 4 {
		t.Fatalf("push to b after the release: %v", pb.Queues)
	}
	for _, q := range pb.Queues {
		if q.Offset != 100+int64(q.QueueID) {
			t.Fatalf("b starts queue %d at %d, want where a committed", q.QueueID, q.Offset)
		}
	}
	checkSpread(t, h.readers(t, []string{"a", "b"}), 8, []string{"a", "b"})
	// a's stale commit and read of a queue it let go.
	old := pa.Revoke[0]
	if err := h.c.Commit(key, "a", QueueCommit{QueueID: old.QueueID, Epoch: old.Epoch, Offset: 999}); !errors.Is(err, ErrFenced) {
		t.Fatalf("commit of a released queue: %v", err)
	}
	if got, _ := h.table.Get("billing", "orders", old.QueueID); got.Offset != 100+int64(old.QueueID) {
		t.Fatalf("a fenced commit moved the offset to %d", got.Offset)
	}
	if err := h.c.AuthorizeRead(key, "a", old.QueueID, old.Epoch); !errors.Is(err, ErrFenced) {
		t.Fatalf("read of a released queue: %v", err)
	}
	st := h.c.Stats()
	if st.Members != 2 || st.Joins != 2 || st.Fenced < 2 {
		t.Fatalf("stats %+v", st)
	}
}

// TestLeaveMovesAtOnce: a clean leave hands its queues to the others at once, from its commits.
func TestLeaveMovesAtOnce(t *testing.T) {
	h := newHarness(t, 6, Config{})
	h.join(t, "a")
	h.join(t, "b")
	h.join(t, "c")
	h.releaseAll(t, []string{"a", "b", "c"}, 0)
	a, _ := h.c.Heartbeat(key, "a")
	var qc []QueueCommit
	for _, q := range a.Queues {
		qc = append(qc, QueueCommit{QueueID: q.QueueID, Epoch: q.Epoch, Offset: 50})
	}
	if err := h.c.Leave(key, "a", qc); err != nil {
		t.Fatal(err)
	}
	r := h.readers(t, []string{"b", "c"})
	checkSpread(t, r, 6, []string{"b", "c"})
	for _, q := range a.Queues {
		if got, _ := h.c.Heartbeat(key, r[q.QueueID][0]); !slices.ContainsFunc(got.Queues, func(x AssignedQueue) bool {
			return x.QueueID == q.QueueID && x.Offset == 50
		}) {
			t.Fatalf("queue %d after a's leave: %+v, want it from offset 50", q.QueueID, got.Queues)
		}
	}
	if _, err := h.c.Heartbeat(key, "a"); !errors.Is(err, ErrUnknownMember) {
		t.Fatalf("heartbeat after leaving: %v", err)
	}
}

// TestSessionTimeoutAndRedelivery: a member that stops heartbeating is taken out after the
// session timeout; its queues move, and what it was handed past its commit counts as
// redelivered as the new owner reads it.
func TestSessionTimeoutAndRedelivery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 2, Config{HeartbeatInterval: 100 * time.Millisecond, SessionTimeout: time.Second})
		a := h.join(t, "a")
		q := a.Queues[0]
		if err := h.c.AuthorizeRead(key, "a", q.QueueID, q.Epoch); err != nil {
			t.Fatal(err)
		}
		h.c.Served(key, "a", q.QueueID, q.Epoch, slices.Values(seq(0, 30)), 30)
		if err := h.c.Commit(key, "a", QueueCommit{QueueID: q.QueueID, Epoch: q.Epoch, Offset: 10}); err != nil {
			t.Fatal(err)
		}
		h.join(t, "b")
		// b heartbeats, a is silent.
		for range 12 {
			time.Sleep(100 * time.Millisecond)
			if _, err := h.c.Heartbeat(key, "b"); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait()
		if _, err := h.c.Heartbeat(key, "a"); !errors.Is(err, ErrUnknownMember) {
			t.Fatalf("a after its session ran out: %v", err)
		}
		b, _ := h.c.Heartbeat(key, "b")
		if len(b.Queues) != 2 {
			t.Fatalf("b holds %v, want both queues", b.Queues)
		}
		nq := b.Queues[slices.IndexFunc(b.Queues, func(x AssignedQueue) bool { return x.QueueID == q.QueueID })]
		if nq.Offset != 10 {
			t.Fatalf("b starts at %d, want a's commit 10", nq.Offset)
		}
		h.c.Served(key, "b", nq.QueueID, nq.Epoch, slices.Values(seq(10, 25)), 25)
		h.c.Served(key, "b", nq.QueueID, nq.Epoch, slices.Values(seq(25, 40)), 40)
		if st := h.c.Stats(); st.Redelivered != 20 || st.Expired != 1 {
			t.Fatalf("stats %+v: want 20 redelivered (offsets 10-29), 1 expired", st)
		}
		// Past them, a read's offsets are not walked: nothing is left to count.
		h.c.Served(key, "b", nq.QueueID, nq.Epoch, func(func(int64) bool) { t.Error("offsets walked past the redelivered ones") }, 50)
	})
}

// TestRevokeTimeout: an owner that never releases loses the queue after the rebalance timeout.
func TestRevokeTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 2, Config{HeartbeatInterval: 100 * time.Millisecond, SessionTimeout: time.Second, RebalanceTimeout: 2 * time.Second})
		h.join(t, "a")
		h.join(t, "b")
		for range 25 { // both heartbeat; a ignores its revocation
			time.Sleep(100 * time.Millisecond)
			h.c.Heartbeat(key, "a")
			h.c.Heartbeat(key, "b")
		}
		synctest.Wait()
		checkSpread(t, h.readers(t, []string{"a", "b"}), 2, []string{"a", "b"})
	})
}

// TestBounds: joins past the bounds, with another filter, or on an unknown topic are refused
// with their reason and change nothing.
func TestBounds(t *testing.T) {
	h := newHarness(t, 4, Config{MaxMembers: 3, MaxGroupMembers: 2})
	h.join(t, "a")
	h.join(t, "b")
	if _, err := h.c.Join(JoinRequest{Key: key, MemberID: "c"}); !errors.Is(err, ErrTooManyMembers) {
		t.Fatalf("a third member of the group: %v", err)
	}
	other := Key{Group: "audit", Topic: "orders"}
	if _, err := h.c.Join(JoinRequest{Key: other, MemberID: "x"}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.c.Join(JoinRequest{Key: other, MemberID: "y"}); !errors.Is(err, ErrTooManyMembers) {
		t.Fatalf("a fourth member in all: %v", err)
	}
	if _, err := h.c.Join(JoinRequest{Key: key, MemberID: "a", Subject: "orders.eu"}); !errors.Is(err, ErrConflict) {
		t.Fatalf("a join with another filter: %v", err)
	}
	if _, err := h.c.Join(JoinRequest{Key: Key{"g", "nope"}}); !errors.Is(err, ErrUnknownTopic) {
		t.Fatalf("an unknown topic: %v", err)
	}
	if st := h.c.Stats(); st.Members != 3 || st.Groups != 2 {
		t.Fatalf("stats after the refusals: %+v", st)
	}
	if err := h.c.WhileIdle(key, func() error { return nil }); !errors.Is(err, ErrConflict) {
		t.Fatalf("a reset of a group with members: %v", err)
	}
}

// TestStartLatest: a group that starts at the latest offset commits each queue's end when its
// first member joins, so a later owner starts at the same place.
func TestStartLatest(t *testing.T) {
	h := newHarness(t, 2, Config{})
	a, err := h.c.Join(JoinRequest{Key: key, MemberID: "a", Start: StartLatest})
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range a.Queues {
		if q.Offset != 1000 {
			t.Fatalf("queue %d starts at %d, want the end 1000", q.QueueID, q.Offset)
		}
	}
	h.store.max = 2000
	if err := h.c.Leave(key, "a", nil); err != nil {
		t.Fatal(err)
	}
	b := h.join(t, "b")
	if b.Queues[0].Offset != 1000 {
		t.Fatalf("the next member starts at %d, want 1000", b.Queues[0].Offset)
	}
}

// TestRandomMembership: joins, leaves, expiries and releases in random order: at no moment may
// two members read one queue, and once the releases are done every queue has one reader and the
// spread is even.
func TestRandomMembership(t *testing.T) {
	for seed := range uint64(30) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 1))
			h := newHarness(t, 1+rng.IntN(16), Config{})
			queues, _ := h.store.Queues("orders")
			var live []string
			for i := range 60 {
				switch op := rng.IntN(10); {
				case op < 4 || len(live) == 0:
					name := fmt.Sprintf("m%d", i)
					h.join(t, name)
					live = append(live, name)
				case op < 6:
					j := rng.IntN(len(live))
					a, _ := h.c.Heartbeat(key, live[j])
					var qc []QueueCommit
					for _, q := range append(a.Queues, a.Revoke...) {
						qc = append(qc, QueueCommit{QueueID: q.QueueID, Epoch: q.Epoch, Offset: int64(i)})
					}
					if err := h.c.Leave(key, live[j], qc); err != nil {
						t.Fatal(err)
					}
					live = slices.Delete(live, j, j+1)
				case op < 7:
					j := rng.IntN(len(live))
					h.c.expire(key, live[j])
					live = slices.Delete(live, j, j+1)
				default:
					h.releaseAll(t, live, int64(i))
				}
				for q, rs := range h.readers(t, live) {
					if len(rs) > 1 {
						t.Fatalf("step %d: queue %d readable by %v", i, q, rs)
					}
				}
			}
			if len(live) > 0 {
				h.releaseAll(t, live, 0)
				checkSpread(t, h.readers(t, live), len(queues), live)
			}
		})
	}
}

// seq is the offsets [from, to).
func seq(from, to int64) []int64 {
	var out []int64
	for o := from; o < to; o++ {
		out = append(out, o)
	}
	return out
}

// TestCommitNeverGoesBackWithinAHold: a member's older commit that arrives after a newer one of
// the same hold (its commit and its own leave race on different endpoints) leaves the offset
// where the newer one put it, so the queue's next owner starts past what was handled; a new
// hold starts from there and may commit anything.
func TestCommitNeverGoesBackWithinAHold(t *testing.T) {
	h := newHarness(t, 1, Config{})
	a := h.join(t, "a")
	q := a.Queues[0]
	if err := h.c.Commit(key, "a", QueueCommit{QueueID: q.QueueID, Epoch: q.Epoch, Offset: 51}); err != nil {
		t.Fatal(err)
	}
	if err := h.c.Commit(key, "a", QueueCommit{QueueID: q.QueueID, Epoch: q.Epoch, Offset: 50}); err != nil {
		t.Fatalf("an overtaken commit: %v, want it answered", err)
	}
	if got, _ := h.table.Get(key.Group, key.Topic, q.QueueID); got.Offset != 51 {
		t.Fatalf("after commits 51 then 50 of one hold: %d, want 51", got.Offset)
	}
	if err := h.c.Leave(key, "a", nil); err != nil {
		t.Fatal(err)
	}
	b := h.join(t, "b")
	if b.Queues[0].Offset != 51 {
		t.Fatalf("the next owner starts at %d, want 51", b.Queues[0].Offset)
	}
	if err := h.c.Commit(key, "b", QueueCommit{QueueID: q.QueueID, Epoch: b.Queues[0].Epoch, Offset: 7}); err != nil {
		t.Fatal(err)
	}
	if got, _ := h.table.Get(key.Group, key.Topic, q.QueueID); got.Offset != 7 {
		t.Fatalf("a new hold's first commit: %d, want 7", got.Offset)
	}
}
