package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// A consumer group member written from docs/GROUPS.md alone, with plain nats.go, encoding/json
// and encoding/binary (the reply's decoding: docdecode_test.go): "Join", "The assignment",
// "Heartbeat", "Read", "The batched read's reply", "Commit", "Release", "Leave", "A member, step
// by step" and "Errors". It hands each message out to a callback synchronously, so what it
// handed out is what it handled: it commits once a second, releases a queue asked back at the
// first offset not handed out, and leaves with those offsets.

// docQueueRef is a queue in an assignment, a read, a release or a leave.
type docQueueRef struct {
	QueueID int32 `json:"queueId"`
	Epoch   int64 `json:"epoch"`
	Offset  int64 `json:"offset"`
}

// docAssignment is "The assignment", or an error reply.
type docAssignment struct {
	Engine           string        `json:"engine"`
	API              string        `json:"api"`
	Group            string        `json:"group"`
	Topic            string        `json:"topic"`
	MemberID         string        `json:"memberId"`
	Generation       int64         `json:"generation"`
	HeartbeatMs      int64         `json:"heartbeatMs"`
	SessionTimeoutMs int64         `json:"sessionTimeoutMs"`
	Queues           []docQueueRef `json:"queues"`
	Revoke           []docQueueRef `json:"revoke"`
	Error            *wireError    `json:"error"`
}

// docCodeError is an error reply's code and description.
type docCodeError struct {
	code int
	desc string
}

func (e *docCodeError) Error() string { return fmt.Sprintf("%d: %s", e.code, e.desc) }

func docCode(err error) int {
	var ce *docCodeError
	if errors.As(err, &ce) {
		return ce.code
	}
	return 0
}

// docHeld is a queue the member holds: its epoch, the offset to read from next, and the offset
// of the first message not handed out (what it commits).
type docHeld struct {
	epoch     int64
	next      int64
	handled   int64
	committed int64
	fenced    bool // a read came back FENCED: not read until an assignment says why
}

// docMember is the member. One goroutine runs it (run); the test reads its counters after.
type docMember struct {
	nc       *nats.Conn
	prefix   string
	group    string
	topic    string
	clientID string
	handle   func(who string, r docRecord)

	notify     chan *nats.Msg
	sub        *nats.Subscription
	api        string
	memberID   string
	generation int64
	heartbeat  time.Duration
	session    time.Duration
	lastBeat   time.Time
	answered   time.Time // the engine's last answer to a heartbeat
	lastCommit time.Time
	held       map[int32]*docHeld
	revoke     []docQueueRef // asked back, to release

	mu       sync.Mutex
	releases int // queues released
	fenced   int // sections refused
	handed   int
}

func newDocMember(nc *nats.Conn, group, topic, clientID string, handle func(string, docRecord)) (*docMember, error) {
	m := &docMember{nc: nc, prefix: "$RS.API", group: group, topic: topic, clientID: clientID, handle: handle,
		notify: make(chan *nats.Msg, 256), held: map[int32]*docHeld{}}
	// Step 1: a notify subject of its own, then the join.
	sub, err := nc.ChanSubscribe(nats.NewInbox(), m.notify)
	if err != nil {
		return nil, err
	}
	m.sub = sub
	if err := nc.Flush(); err != nil {
		return nil, err
	}
	return m, m.join(m.prefix + ".group.join")
}

// request sends a JSON request and decodes a JSON reply into out; an error reply is a
// *docCodeError.
func (m *docMember) request(subject string, req any, out any) error {
	return m.requestWithin(waitTimeout, subject, req, out)
}

func (m *docMember) requestWithin(timeout time.Duration, subject string, req any, out any) error {
	data, _ := json.Marshal(req)
	reply, err := m.nc.Request(subject, data, timeout)
	if err != nil {
		return fmt.Errorf("%s: %w", subject, err)
	}
	var e struct {
		Error *wireError `json:"error"`
	}
	if err := json.Unmarshal(reply.Data, &e); err != nil {
		return fmt.Errorf("%s: reply %q: %w", subject, reply.Data, err)
	}
	if e.Error != nil {
		return &docCodeError{e.Error.Code, e.Error.Description}
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(reply.Data, out)
}

func (m *docMember) join(subject string) error {
	var a docAssignment
	req := map[string]any{"group": m.group, "topic": m.topic, "clientId": m.clientID, "notify": m.sub.Subject, "memberId": m.memberID}
	if err := m.request(subject, req, &a); err != nil {
		return err
	}
	m.api, m.memberID, m.generation = a.API, a.MemberID, 0
	m.heartbeat = time.Duration(a.HeartbeatMs) * time.Millisecond
	m.session = time.Duration(a.SessionTimeoutMs) * time.Millisecond
	m.lastBeat, m.answered = time.Now(), time.Now()
	if a.API == "" || a.MemberID == "" || a.HeartbeatMs <= 0 || a.SessionTimeoutMs < a.HeartbeatMs {
		return fmt.Errorf("join: an assignment without api, member or times: %+v", a)
	}
	m.apply(a)
	return nil
}

// apply takes an assignment of a newer generation (step 3).
func (m *docMember) apply(a docAssignment) {
	if a.Generation <= m.generation {
		return // stale: a push and a heartbeat reply crossed
	}
	m.generation = a.Generation
	held := map[int32]*docHeld{}
	for _, q := range a.Queues {
		if h := m.held[q.QueueID]; h != nil && h.epoch == q.Epoch {
			h.fenced = false
			held[q.QueueID] = h // read on where it is
			continue
		}
		held[q.QueueID] = &docHeld{epoch: q.Epoch, next: q.Offset, handled: q.Offset, committed: q.Offset}
	}
	m.revoke = m.revoke[:0]
	for _, q := range a.Revoke {
		off := q.Offset // never read at this epoch: nothing handed out past the committed offset
		if h := m.held[q.QueueID]; h != nil && h.epoch == q.Epoch {
			off = h.handled
		}
		m.revoke = append(m.revoke, docQueueRef{QueueID: q.QueueID, Epoch: q.Epoch, Offset: off})
	}
	m.held = held // a queue listed nowhere, or only in revoke, is no longer read
}

// pushes applies the assignments pushed to the notify subject so far.
func (m *docMember) pushes() error {
	for {
		select {
		case msg := <-m.notify:
			if err := m.applyPush(msg); err != nil {
				return err
			}
		default:
			return nil
		}
	}
}

func (m *docMember) applyPush(msg *nats.Msg) error {
	var a docAssignment
	if err := json.Unmarshal(msg.Data, &a); err != nil {
		return fmt.Errorf("a push %q: %w", msg.Data, err)
	}
	if a.MemberID != m.memberID {
		return fmt.Errorf("a push for member %q, this one is %q", a.MemberID, m.memberID)
	}
	m.apply(a)
	return nil
}

// beat heartbeats (step 2), with a timeout of the session's; on 404 it drops every queue and
// joins again; with no answer for a whole session, it drops them and joins on the first join's
// subject (step 7).
func (m *docMember) beat() error {
	var a docAssignment
	err := m.requestWithin(m.session, m.api+".group.heartbeat", map[string]any{"group": m.group, "topic": m.topic, "memberId": m.memberID}, &a)
	m.lastBeat = time.Now()
	switch {
	case docCode(err) == 404:
		m.held, m.revoke = map[int32]*docHeld{}, nil
		return m.join(m.api + ".group.join")
	case errors.Is(err, nats.ErrNoResponders) || errors.Is(err, nats.ErrTimeout):
		if time.Since(m.answered) < m.session {
			return nil
		}
		m.held, m.revoke = map[int32]*docHeld{}, nil
		if err := m.join(m.prefix + ".group.join"); err != nil && docCode(err) == 0 {
			return nil // not back yet: the next heartbeat's time tries again
		} else if err != nil {
			return err
		}
		return nil
	case err != nil:
		return err
	}
	m.answered = time.Now()
	m.apply(a)
	return nil
}

// release gives back the queues asked back, at the first offset not handed out.
func (m *docMember) release() error {
	if len(m.revoke) == 0 {
		return nil
	}
	qs := append([]docQueueRef(nil), m.revoke...)
	m.revoke = m.revoke[:0]
	var a docAssignment
	err := m.request(m.api+".group.release", map[string]any{"group": m.group, "topic": m.topic, "memberId": m.memberID, "queues": qs}, &a)
	if err != nil {
		return fmt.Errorf("release %+v: %w", qs, err)
	}
	m.mu.Lock()
	m.releases += len(qs)
	m.mu.Unlock()
	m.apply(a)
	return nil
}

// read reads every queue held once (step 4) and hands the messages out.
func (m *docMember) read(waitMs int) error {
	var qs []docQueueRef
	for id, h := range m.held {
		if !h.fenced {
			qs = append(qs, docQueueRef{QueueID: id, Epoch: h.epoch, Offset: h.next})
		}
	}
	if len(qs) == 0 {
		select { // nothing to read: wait for a push, or the next heartbeat
		case msg := <-m.notify:
			return m.applyPush(msg)
		case <-time.After(time.Duration(waitMs) * time.Millisecond):
		}
		return nil
	}
	data, _ := json.Marshal(map[string]any{"topic": m.topic, "group": m.group, "memberId": m.memberID,
		"queues": qs, "max": 256, "waitMs": waitMs})
	reply, err := m.nc.Request(m.api+".read", data, waitTimeout)
	if err != nil {
		return fmt.Errorf("read: %w", err)
	}
	secs, err := decodeReadReply(reply, len(qs))
	if docCode(err) == 404 {
		return m.beat() // unknown member: the heartbeat joins again
	}
	if err != nil {
		return err
	}
	// A push that came meanwhile decides what of the reply is still the member's to hand out.
	if err := m.pushes(); err != nil {
		return err
	}
	for i, s := range secs {
		if s.queueID != qs[i].QueueID {
			return fmt.Errorf("read: section %d is queue %d, asked %d", i, s.queueID, qs[i].QueueID)
		}
		h := m.held[s.queueID]
		if s.status == docFenced {
			m.mu.Lock()
			m.fenced++
			m.mu.Unlock()
			if h != nil && h.epoch == qs[i].Epoch {
				h.fenced = true          // asked back, or gone: the assignment says which
				m.lastBeat = time.Time{} // heartbeat now
			}
			continue
		}
		if h == nil || h.epoch != qs[i].Epoch || h.next != qs[i].Offset {
			continue // revoked or moved meanwhile: dropped, not handed out
		}
		if s.status == docTooLarge {
			return fmt.Errorf("queue %d: a record too large at %d", s.queueID, s.nextOffset)
		}
		want := h.next
		for _, r := range s.records {
			if r.queueID != s.queueID || r.topic != m.topic || r.queueOffset < want {
				return fmt.Errorf("queue %d: record %s/%d@%d after offset %d", s.queueID, r.topic, r.queueID, r.queueOffset, want)
			}
			want = r.queueOffset + 1
			m.handle(m.clientID, r)
			m.mu.Lock()
			m.handed++
			m.mu.Unlock()
		}
		if s.nextOffset < want {
			return fmt.Errorf("queue %d: nextOffset %d before the records' end %d", s.queueID, s.nextOffset, want)
		}
		h.next, h.handled = s.nextOffset, s.nextOffset
	}
	return nil
}

// commit commits, per queue, one past the last message handed out (step 5); a refusal (409)
// drops the queue.
func (m *docMember) commit() error {
	for id, h := range m.held {
		if h.handled == h.committed {
			continue
		}
		var r struct {
			Offset int64 `json:"offset"`
		}
		err := m.request(m.api+".commit", map[string]any{"group": m.group, "topic": m.topic, "queueId": id,
			"offset": h.handled, "memberId": m.memberID, "epoch": h.epoch}, &r)
		if docCode(err) == 409 {
			delete(m.held, id)
			m.lastBeat = time.Time{}
			continue
		}
		if err != nil {
			return fmt.Errorf("commit %d@%d: %w", id, h.handled, err)
		}
		if r.Offset != h.handled {
			return fmt.Errorf("commit %d@%d answered %d", id, h.handled, r.Offset)
		}
		h.committed = h.handled
	}
	return nil
}

// run is the member's loop until stop is closed; then it leaves (step 6).
func (m *docMember) run(stop <-chan struct{}) error {
	deadline := time.Now().Add(3 * waitTimeout)
	for time.Now().Before(deadline) {
		select {
		case <-stop:
			return m.leave()
		default:
		}
		if err := m.pushes(); err != nil {
			return err
		}
		if time.Since(m.lastBeat) >= m.heartbeat {
			if err := m.beat(); err != nil {
				return err
			}
		}
		if err := m.release(); err != nil {
			return err
		}
		if err := m.read(200); err != nil {
			return err
		}
		// Commits once a second ("Commit as often as suits"): a release and a leave carry
		// what was handled since, as the doc says they commit it.
		if time.Since(m.lastCommit) >= time.Second {
			if err := m.commit(); err != nil {
				return err
			}
			m.lastCommit = time.Now()
		}
	}
	return errors.New("the member ran past its deadline")
}

// leave commits and leaves with the offsets of what was handed out.
func (m *docMember) leave() error {
	if err := m.pushes(); err != nil {
		return err
	}
	qs := []docQueueRef{}
	for id, h := range m.held {
		qs = append(qs, docQueueRef{QueueID: id, Epoch: h.epoch, Offset: h.handled})
	}
	for _, r := range m.revoke { // asked back and not yet released
		qs = append(qs, r)
	}
	err := m.request(m.api+".group.leave", map[string]any{"group": m.group, "topic": m.topic, "memberId": m.memberID, "queues": qs}, nil)
	_ = m.sub.Unsubscribe()
	return err
}

func (m *docMember) counts() (handed, releases, fenced int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.handed, m.releases, m.fenced
}

// runningMember is a docMember running in its own goroutine.
type runningMember struct {
	*docMember
	name   string
	stopCh chan struct{}
	done   chan error

	mu       sync.Mutex
	finished bool
	result   error
}

// runDocMember joins and runs a member in a goroutine until stop; the test's cleanup stops it.
func runDocMember(t *testing.T, nc *nats.Conn, group, topic, name string, handle func(string, docRecord)) *runningMember {
	t.Helper()
	m, err := newDocMember(nc, group, topic, name, handle)
	if err != nil {
		t.Fatalf("%s: join: %v", name, err)
	}
	r := &runningMember{docMember: m, name: name, stopCh: make(chan struct{}), done: make(chan error, 1)}
	go func() { r.done <- m.run(r.stopCh) }()
	t.Cleanup(func() { _ = r.stop() })
	return r
}

// failed is the loop's error if it ended on its own.
func (r *runningMember) failed() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.finished {
		select {
		case err := <-r.done:
			r.finished, r.result = true, fmt.Errorf("%s ended: %v", r.name, err)
		default:
			return nil
		}
	}
	return r.result
}

// stop makes the member leave and returns its loop's error.
func (r *runningMember) stop() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.finished {
		return r.result
	}
	close(r.stopCh)
	r.finished = true
	select {
	case r.result = <-r.done:
	case <-time.After(waitTimeout):
		r.result = fmt.Errorf("%s did not stop within %v", r.name, waitTimeout)
	}
	return r.result
}
