package api

// Member tests against a fake engine (fake endpoints on a real nats-server): how the member
// reads, releases and keeps its long polls, in orders a real engine makes rarely.

import (
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/rocketstore/engine/internal/store/commitlog"
)

// fakeAPI is the API subject prefix of the fake engine E.
const fakeAPI = "$RS.API.e.E"

// fakeAssignment is E's assignment of generation gen to member m of group g on topic t, asking
// for a heartbeat every heartbeatMs.
func fakeAssignment(gen, heartbeatMs int64, queues, revoke []AssignedQueue) []byte {
	b, _ := json.Marshal(Assignment{Engine: "E", API: fakeAPI, Group: "g", Topic: "t", MemberID: "m", Generation: gen,
		HeartbeatMs: heartbeatMs, SessionTimeoutMs: 3000, Queues: queues, Revoke: revoke})
	return b
}

// TestMemberReleasesAQueueFencedBeforeItsRevocation: the engine fences a read of a queue it is
// revoking, and its push of the revocation can reach the member after the read's reply. The
// member must still release the queue (committing what it handled), not drop it: a queue dropped
// without a release waits for the engine's rebalance timeout (30 s) before its next owner gets
// it. The fake engine answers the first read with queue 1 FENCED, and pushes the revocation only
// once the member has taken that reply (at its next read).
func TestMemberReleasesAQueueFencedBeforeItsRevocation(t *testing.T) {
	nc := runServer(t)
	const api = fakeAPI
	assignment := func(gen int64, queues, revoke []AssignedQueue) []byte {
		return fakeAssignment(gen, 1000, queues, revoke)
	}
	q0 := AssignedQueue{QueueID: 0, Epoch: 10, Offset: 0}
	q1 := AssignedQueue{QueueID: 1, Epoch: 11, Offset: 0}
	var notify atomic.Value
	fake(t, nc, DefaultPrefix, EndpointGroupJoin, func(m *nats.Msg) {
		var req JoinRequest
		_ = json.Unmarshal(m.Data, &req)
		notify.Store(req.Notify)
		_ = m.Respond(assignment(1, []AssignedQueue{q0, q1}, nil))
	})
	revoked := assignment(2, []AssignedQueue{q0}, []AssignedQueue{q1})
	fake(t, nc, api, EndpointGroupHeartbeat, func(m *nats.Msg) { _ = m.Respond(revoked) })
	var reads atomic.Int64
	fake(t, nc, api, EndpointRead, func(m *nats.Msg) {
		switch reads.Add(1) {
		case 1: // queue 0 at its end, queue 1 fenced: the engine is revoking it
			body := []byte(ReadMagic)
			body = AppendReadSection(body, ReadSection{QueueID: 0, Status: ReadOffsetOverflowOne})
			body = AppendReadSection(body, ReadSection{QueueID: 1, Status: ReadFenced})
			h := nats.Header{}
			h.Set(HeaderReadStatus, "OK")
			_ = m.RespondMsg(&nats.Msg{Header: h, Data: body})
		case 2: // the member took the reply: now the revocation's push comes
			_ = nc.Publish(notify.Load().(string), revoked)
		}
		// Later reads get no answer: the member waits for its read's timeout.
	})
	released := make(chan ReleaseRequest, 4)
	fake(t, nc, api, EndpointGroupRelease, func(m *nats.Msg) {
		var req ReleaseRequest
		_ = json.Unmarshal(m.Data, &req)
		released <- req
		_ = m.Respond(assignment(3, []AssignedQueue{q0}, nil))
	})

	c := NewClient(nc, WithTimeout(5*time.Second))
	mem, err := c.Join(testCtx(t), MemberConfig{Group: "g", Topic: "t", ManualCommit: true, Wait: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Abandon()
	select {
	case req := <-released:
		if len(req.Queues) != 1 || req.Queues[0] != (QueueOffset{QueueID: 1, Epoch: 11, Offset: 0}) {
			t.Fatalf("released %+v, want queue 1 at epoch 11, offset 0", req.Queues)
		}
	case <-time.After(10 * time.Second): // heartbeats every second repeat the revocation
		t.Fatalf("queue 1 was never released (reads: %d); the member holds %v", reads.Load(), mem.Queues())
	}
}

// TestMemberKeepsItsLongPollAcrossHeartbeats: a heartbeat whose assignment changes nothing must
// not cancel the member's read in flight. Each cancelled long poll is sent again (and the
// engine still holds the first one's slot until its wait ends); a member at the end of its
// queues whose polls are cancelled every heartbeat never sees one come back empty, so AtEnd
// (engine consume --until-end) waited seconds past the end. The fake engine asks for heartbeats
// every 20 ms and never answers a read: after its first read and 10 heartbeats, it must have sent no other.
func TestMemberKeepsItsLongPollAcrossHeartbeats(t *testing.T) {
	nc := runServer(t)
	const api = fakeAPI
	a := fakeAssignment(1, 20, []AssignedQueue{{QueueID: 0, Epoch: 10}}, nil)
	fake(t, nc, DefaultPrefix, EndpointGroupJoin, func(m *nats.Msg) { _ = m.Respond(a) })
	heartbeats := make(chan struct{}, 100)
	fake(t, nc, api, EndpointGroupHeartbeat, func(m *nats.Msg) {
		_ = m.Respond(a)
		select {
		case heartbeats <- struct{}{}:
		default:
		}
	})
	var reads atomic.Int64
	firstRead := make(chan struct{})
	fake(t, nc, api, EndpointRead, func(*nats.Msg) { // a long poll that does not end
		if reads.Add(1) == 1 {
			close(firstRead)
		}
	})

	c := NewClient(nc, WithTimeout(5*time.Second))
	mem, err := c.Join(testCtx(t), MemberConfig{Group: "g", Topic: "t", Wait: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Abandon()
	select {
	case <-firstRead:
	case <-time.After(10 * time.Second):
		t.Fatal("the member sent no read")
	}
	for range len(heartbeats) {
		<-heartbeats // those before the read
	}
	for i := range 10 {
		select {
		case <-heartbeats:
		case <-time.After(10 * time.Second):
			t.Fatalf("%d heartbeats, want 10", i)
		}
	}
	if n := reads.Load(); n != 1 {
		t.Fatalf("%d reads sent over 10 heartbeats that changed nothing, want 1", n)
	}
}

// TestMemberAtEndWithTheLastBatch: a read whose messages reach the queue's end (nextOffset at
// maxOffset) shows the end: once they are handed out, AtEnd is true without another read (which
// at the end is a long poll: engine consume --until-end waited out its 1 s).
func TestMemberAtEndWithTheLastBatch(t *testing.T) {
	nc := runServer(t)
	const api = fakeAPI
	a := fakeAssignment(1, 1000, []AssignedQueue{{QueueID: 0, Epoch: 10}}, nil)
	fake(t, nc, DefaultPrefix, EndpointGroupJoin, func(m *nats.Msg) { _ = m.Respond(a) })
	fake(t, nc, api, EndpointGroupHeartbeat, func(m *nats.Msg) { _ = m.Respond(a) })
	rec, err := commitlog.AppendRecord(nil, &commitlog.Message{Topic: "t", Body: []byte("last")}, commitlog.EncodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var reads atomic.Int64
	fake(t, nc, api, EndpointRead, func(m *nats.Msg) {
		if reads.Add(1) > 1 {
			return // at the end: a long poll that does not end
		}
		body := AppendReadSection([]byte(ReadMagic), ReadSection{QueueID: 0, Status: ReadFound, NextOffset: 1, MaxOffset: 1,
			Count: 1, Data: rec})
		h := nats.Header{}
		h.Set(HeaderReadStatus, "OK")
		_ = m.RespondMsg(&nats.Msg{Header: h, Data: body})
	})

	c := NewClient(nc, WithTimeout(5*time.Second))
	mem, err := c.Join(testCtx(t), MemberConfig{Group: "g", Topic: "t", Wait: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Abandon()
	got, err := mem.Next(testCtx(t))
	if err != nil || string(got.Body()) != "last" {
		t.Fatalf("Next: %q, %v", got.Body(), err)
	}
	if !mem.AtEnd() {
		t.Fatal("the queue was read to its end (nextOffset 1 = maxOffset 1) and its message handed out, but AtEnd is false")
	}
}

// TestMemberBacksOffSkippedLongPolls: a read whose long poll was skipped (every slot of the
// engine's taken: Rs-Read-Wait-Skipped) and found nothing is asked again after a pause that
// doubles while it goes on, up to the member's Wait: idle members beyond the engine's long-poll
// slots would otherwise ask ten times a second each. The fake engine skips every poll; the gaps
// between the member's reads must grow.
func TestMemberBacksOffSkippedLongPolls(t *testing.T) {
	nc := runServer(t)
	const api = fakeAPI
	a := fakeAssignment(1, 1000, []AssignedQueue{{QueueID: 0, Epoch: 10}}, nil)
	fake(t, nc, DefaultPrefix, EndpointGroupJoin, func(m *nats.Msg) { _ = m.Respond(a) })
	fake(t, nc, api, EndpointGroupHeartbeat, func(m *nats.Msg) { _ = m.Respond(a) })
	reads := make(chan time.Time, 16)
	fake(t, nc, api, EndpointRead, func(m *nats.Msg) {
		select {
		case reads <- time.Now():
		default:
		}
		h := nats.Header{}
		h.Set(HeaderReadStatus, "OK")
		h.Set(HeaderReadWaitSkipped, "true")
		_ = m.RespondMsg(&nats.Msg{Header: h, Data: AppendReadSection([]byte(ReadMagic), ReadSection{QueueID: 0, Status: ReadOffsetOverflowOne})})
	})
	c := NewClient(nc, WithTimeout(5*time.Second))
	mem, err := c.Join(testCtx(t), MemberConfig{Group: "g", Topic: "t", Wait: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Abandon()
	var at []time.Time
	for len(at) < 5 {
		select {
		case r := <-reads:
			at = append(at, r)
		case <-time.After(10 * time.Second):
			t.Fatalf("%d reads", len(at))
		}
	}
	first, fourth := at[1].Sub(at[0]), at[4].Sub(at[3])
	if fourth < 2*first || fourth < 4*skippedPause {
		t.Fatalf("gaps between skipped reads: first %s, fourth %s: no back-off", first, fourth)
	}
}

// TestMemberReleasesAQueueAskedBackBeforeItWasGiven: the engine's pushes of two rebalances can
// reach a member out of order: the one that gives it a queue after the one that asks it back
// (then stale, and dropped). Every heartbeat repeats the revocation and none the grant, so a
// member that releases only what it holds never releases it, and the engine waits its
// rebalance timeout (30 s; seen in TestClusterExampleGroup) before the queue's next owner gets
// it. The fake engine's join gives queue 0, and its heartbeats ask back queue 1 at epoch 11,
// which the member was never given: it must release it at the offset the engine names.
func TestMemberReleasesAQueueAskedBackBeforeItWasGiven(t *testing.T) {
	nc := runServer(t)
	const api = fakeAPI
	assignment := func(gen int64, queues, revoke []AssignedQueue) []byte { return fakeAssignment(gen, 20, queues, revoke) }
	q0 := AssignedQueue{QueueID: 0, Epoch: 10, Offset: 0}
	q1 := AssignedQueue{QueueID: 1, Epoch: 11, Offset: 7}
	fake(t, nc, DefaultPrefix, EndpointGroupJoin, func(m *nats.Msg) { _ = m.Respond(assignment(1, []AssignedQueue{q0}, nil)) })
	fake(t, nc, api, EndpointGroupHeartbeat, func(m *nats.Msg) {
		_ = m.Respond(assignment(3, []AssignedQueue{q0}, []AssignedQueue{q1}))
	})
	fake(t, nc, api, EndpointRead, func(*nats.Msg) {}) // a long poll that does not end
	released := make(chan ReleaseRequest, 4)
	fake(t, nc, api, EndpointGroupRelease, func(m *nats.Msg) {
		var req ReleaseRequest
		_ = json.Unmarshal(m.Data, &req)
		select {
		case released <- req:
		default:
		}
		_ = m.Respond(assignment(4, []AssignedQueue{q0}, nil))
	})

	c := NewClient(nc, WithTimeout(5*time.Second))
	mem, err := c.Join(testCtx(t), MemberConfig{Group: "g", Topic: "t", Wait: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Abandon()
	select {
	case req := <-released:
		if len(req.Queues) != 1 || req.Queues[0] != (QueueOffset{QueueID: 1, Epoch: 11, Offset: 7}) {
			t.Fatalf("released %+v, want queue 1 at epoch 11, offset 7", req.Queues)
		}
	case <-time.After(10 * time.Second): // heartbeats every 20 ms repeat the revocation
		t.Fatalf("queue 1, asked back, was never released; the member holds %v", mem.Queues())
	}
}

// TestMemberLetsGoOfHandedOutReplies: once Next has handed out every message read ahead, the
// member's buffer points into no reply any more (its entries are cleared all at once, not one by
// one), so a reply is garbage once its messages are handled. Here three messages of one reply
// are handed out, then the buffer is looked at.
func TestMemberLetsGoOfHandedOutReplies(t *testing.T) {
	nc := runServer(t)
	const api = fakeAPI
	a := fakeAssignment(1, 1000, []AssignedQueue{{QueueID: 0, Epoch: 10}}, nil)
	fake(t, nc, DefaultPrefix, EndpointGroupJoin, func(m *nats.Msg) { _ = m.Respond(a) })
	fake(t, nc, api, EndpointGroupHeartbeat, func(m *nats.Msg) { _ = m.Respond(a) })
	var recs []byte
	for i := range 3 {
		var err error
		recs, err = commitlog.AppendRecord(recs, &commitlog.Message{Topic: "t", QueueID: 0, Body: []byte{byte('a' + i)}}, commitlog.EncodeOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	var reads atomic.Int64
	fake(t, nc, api, EndpointRead, func(m *nats.Msg) {
		if reads.Add(1) > 1 {
			return // a long poll that does not end
		}
		body := AppendReadSection([]byte(ReadMagic), ReadSection{QueueID: 0, Status: ReadFound, NextOffset: 3, MaxOffset: 3,
			Count: 3, Data: recs})
		h := nats.Header{}
		h.Set(HeaderReadStatus, "OK")
		_ = m.RespondMsg(&nats.Msg{Header: h, Data: body})
	})

	c := NewClient(nc, WithTimeout(5*time.Second))
	mem, err := c.Join(testCtx(t), MemberConfig{Group: "g", Topic: "t", ManualCommit: true, Wait: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Abandon()
	for i := range 3 {
		got, err := mem.Next(testCtx(t))
		if err != nil || string(got.Body()) != string(rune('a'+i)) {
			t.Fatalf("Next %d: %q, %v", i, got.Body(), err)
		}
	}
	mem.mu.Lock()
	defer mem.mu.Unlock()
	for i, d := range mem.buf[:cap(mem.buf)] {
		if d.q != nil || d.rec.Bytes() != nil || d.off != 0 {
			t.Fatalf("buffer entry %d of %d still points into a reply after every message was handed out: %+v", i, cap(mem.buf), d)
		}
	}
}

// TestMemberAsksForItsDefaultBatch: a member asks for DefaultMemberMaxBatch (2,048) messages a
// read unless told otherwise, twice a read's own default: a reply costs the same rounds of
// wake-ups whatever it carries.
func TestMemberAsksForItsDefaultBatch(t *testing.T) {
	for _, tc := range []struct{ batch, want int }{{0, 2048}, {100, 100}, {1 << 20, MaxReadMax}} {
		nc := runServer(t)
		const api = fakeAPI
		a := fakeAssignment(1, 1000, []AssignedQueue{{QueueID: 0, Epoch: 10}}, nil)
		fake(t, nc, DefaultPrefix, EndpointGroupJoin, func(m *nats.Msg) { _ = m.Respond(a) })
		fake(t, nc, api, EndpointGroupHeartbeat, func(m *nats.Msg) { _ = m.Respond(a) })
		asked := make(chan ReadRequest, 1)
		fake(t, nc, api, EndpointRead, func(m *nats.Msg) {
			var req ReadRequest
			_ = json.Unmarshal(m.Data, &req)
			select {
			case asked <- req:
			default:
			}
		})
		mem, err := NewClient(nc, WithTimeout(5*time.Second)).Join(testCtx(t), MemberConfig{Group: "g", Topic: "t", MaxBatch: tc.batch})
		if err != nil {
			t.Fatal(err)
		}
		select {
		case req := <-asked:
			if req.Max != tc.want {
				t.Errorf("MaxBatch %d: the member asked for %d messages, want %d", tc.batch, req.Max, tc.want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("MaxBatch %d: no read", tc.batch)
		}
		mem.Abandon()
	}
}

// TestMemberNotAtEndAfterADiscard: a read that reached a queue's end marks it at its end with its
// messages still buffered; when they are discarded (the read of the queue came back FENCED, or
// it was asked back and then kept), they are read again, so the queue is not at its end, and a
// fenced queue is not either: engine consume --until-end would stop with them unread.
func TestMemberNotAtEndAfterADiscard(t *testing.T) {
	q := &heldQueue{id: 0, next: 10, handed: 4, handled: 4, atEnd: true}
	m := &Member{queues: map[int32]*heldQueue{0: q}}
	for off := int64(4); off < 10; off++ {
		m.buf = append(m.buf, delivery{q: q, off: off})
		q.buffered++
	}
	m.discardLocked(q)
	q.fenced = false // the heartbeat's assignment kept the queue
	if m.AtEnd() || q.next != 4 {
		t.Fatalf("after its 6 buffered messages were discarded: AtEnd %v, next %d; want false, 4", m.AtEnd(), q.next)
	}
	q.atEnd, q.fenced = true, true
	if m.AtEnd() {
		t.Fatal("AtEnd with the only queue fenced")
	}
}
