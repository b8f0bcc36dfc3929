package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nats.go"
)

// groupTap is an outside observer of a group's traffic: a plain NATS subscriber on the read
// API's subjects ($RS.API.>) and on the inboxes the replies and pushes go to (_INBOX.>). It sees
// every request a member sends and every reply the engine gives, also the replies to a member
// that has just been killed (the server delivers them to the tap all the same), in the order the
// server passes them on: a request before its reply.
//
// From them it keeps, per queue, the model of docs/GROUPS.md's redelivery count: when a queue's
// owner ends without releasing it (its session ran out: it was killed), what it was served past
// the group's committed offset is its uncommitted window; each message of a window served again
// to a member counts once. groupTap.redelivered is that count: what the engine's
// rocketstore_group_redelivered_messages_total must equal exactly.
//
// Publishers must use another inbox prefix (nats.CustomInboxPrefix), so that their acks stay
// out of the tap.
type groupTap struct {
	t     *testing.T
	nc    *nats.Conn
	ch    chan *nats.Msg // its capacity bounds what the tap may lag behind; a drop fails sync
	subs  []*nats.Subscription
	done  chan struct{}
	topic string

	mu       sync.Mutex
	markers  map[string]chan struct{}
	reqs     map[string]tapRequest // by reply subject
	clientOf map[string]string     // memberId → clientId
	joins    map[string]int        // joins answered, by clientId
	queues   map[int32]*tapQueue
	// lastCommit is each member's last successful commit (or release, or leave) per queue.
	lastCommit map[string]map[int32]int64
	// redeliveredAt counts, per position, the redeliveries of it the model counted.
	redeliveredAt map[qpos]int
	redelivered   int
	served        int // records served in all
	problems      []string
	history       map[int32][]tapEvent // per queue, what happened, for a failing test to show
	// handed are the holds (member, queue, epoch) an assignment has shown.
	handed map[tapHold]bool
}

// tapHold is one member's hold of a queue.
type tapHold struct {
	member string
	queue  int32
	epoch  int64
}

// tapRequest is a request seen, waiting for its reply.
type tapRequest struct {
	kind string // join, read, commit, release, leave
	body map[string]json.RawMessage
	read []docQueueRef // a read's queues, in order
}

// tapQueue is the model of one queue of the group.
type tapQueue struct {
	committed int64
	hasCommit bool
	owner     string // the member last served it
	epoch     int64
	servedEnd int64 // the end of what owner was served at epoch
	released  bool  // owner let it go cleanly (release, leave)
	pending   map[int64]bool
}

func startGroupTap(t *testing.T, url, topic string) *groupTap {
	t.Helper()
	nc, err := nats.Connect(url, nats.MaxReconnects(0))
	if err != nil {
		t.Fatal(err)
	}
	g := &groupTap{t: t, nc: nc, markers: map[string]chan struct{}{}, ch: make(chan *nats.Msg, 1<<20), done: make(chan struct{}), topic: topic,
		reqs: map[string]tapRequest{}, clientOf: map[string]string{}, joins: map[string]int{}, queues: map[int32]*tapQueue{},
		handed:     map[tapHold]bool{},
		lastCommit: map[string]map[int32]int64{}, redeliveredAt: map[qpos]int{}, history: map[int32][]tapEvent{}}
	// One channel for both subscriptions: the connection's reader fills it in the order the
	// server sent, so a request comes before its reply.
	for _, subj := range []string{"$RS.API.>", "_INBOX.>"} {
		sub, err := nc.ChanSubscribe(subj, g.ch)
		if err != nil {
			t.Fatal(err)
		}
		g.subs = append(g.subs, sub)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(g.done)
		for m := range g.ch {
			if m == nil {
				return
			}
			g.observe(m)
		}
	}()
	t.Cleanup(func() {
		nc.Close()
		select {
		case g.ch <- nil:
		default:
		}
	})
	return g
}

// sync waits until the tap has taken in everything the server passed it before a marker that
// nc publishes now (so, every reply to a request a member has had its answer to), and checks
// that it lost nothing.
func (g *groupTap) sync(nc *nats.Conn) {
	g.t.Helper()
	marker := nats.NewInbox()
	got := make(chan struct{})
	g.mu.Lock()
	g.markers[marker] = got
	g.mu.Unlock()
	if err := nc.Publish(marker, nil); err != nil {
		g.t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		g.t.Fatal(err)
	}
	recv(g.t, "the tap's marker", got)
	if !g.nc.IsConnected() {
		g.t.Fatalf("the tap lost its connection (%v): its model is incomplete", g.nc.LastError())
	}
	for _, s := range g.subs {
		if n, _ := s.Dropped(); n > 0 {
			g.t.Fatalf("the tap dropped %d messages: its model is incomplete", n)
		}
	}
}

func (g *groupTap) observe(m *nats.Msg) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if strings.HasPrefix(m.Subject, "$RS.API.") {
		g.request(m)
		return
	}
	if ch, ok := g.markers[m.Subject]; ok {
		delete(g.markers, m.Subject)
		close(ch)
		return
	}
	g.assignment(m)
	req, ok := g.reqs[m.Subject]
	if !ok {
		return // a push, or a reply to a request of another kind
	}
	delete(g.reqs, m.Subject)
	switch req.kind {
	case "join":
		var a docAssignment
		if json.Unmarshal(m.Data, &a) == nil && a.MemberID != "" {
			var client string
			_ = json.Unmarshal(req.body["clientId"], &client)
			g.clientOf[a.MemberID] = client
			g.joins[client]++
		}
	case "read":
		g.readReply(req, m)
	case "commit":
		var r struct {
			Offset int64      `json:"offset"`
			Error  *wireError `json:"error"`
		}
		if json.Unmarshal(m.Data, &r) != nil || r.Error != nil {
			return
		}
		var member string
		var q int32
		_ = json.Unmarshal(req.body["memberId"], &member)
		_ = json.Unmarshal(req.body["queueId"], &q)
		g.commit(member, q, r.Offset)
	case "release", "leave":
		var e struct {
			Error *wireError `json:"error"`
		}
		if json.Unmarshal(m.Data, &e) != nil {
			return
		}
		var member string
		var qs []docQueueRef
		_ = json.Unmarshal(req.body["memberId"], &member)
		_ = json.Unmarshal(req.body["queues"], &qs)
		if e.Error != nil {
			if e.Error.Code == 409 { // a release partly refused: which commits happened is not said
				g.problems = append(g.problems, fmt.Sprintf("%s of %s refused: %+v", req.kind, member, *e.Error))
			}
			return
		}
		for _, rq := range qs {
			g.note(rq.QueueID, rq.Offset, "%s by %s at epoch %d, at %d", req.kind, g.name(member), rq.Epoch, rq.Offset)
			g.commit(member, rq.QueueID, rq.Offset)
			if q := g.queues[rq.QueueID]; q != nil && q.owner == member && q.epoch == rq.Epoch {
				q.released = true
			}
		}
		if req.kind == "leave" {
			for _, q := range g.queues {
				if q.owner == member {
					q.released = true // a leave lets every queue go
				}
			}
		}
	}
}

// assignment checks an assignment (a reply to a join, a heartbeat or a release, or a push):
// every queue it hands to a member for the first time at that epoch is at an offset at or past
// the last commit acknowledged in it, since that is where the group resumes ("A queue handed
// over resumes at its last committed offset"; a commit acknowledged is never lost, also across
// a restart of the engine). A queue the member already holds at that epoch is not checked: its
// offset only says where the hold began (the member reads on from where it is), and a reply or
// push built before the holder's own commit may reach the wire after that commit's answer.
func (g *groupTap) assignment(m *nats.Msg) {
	if len(m.Data) == 0 || m.Data[0] != '{' {
		return
	}
	var a docAssignment
	if json.Unmarshal(m.Data, &a) != nil || a.Generation == 0 || a.Topic != g.topic {
		return
	}
	for _, q := range a.Queues {
		g.note(q.QueueID, q.Offset, "assigned to %s at epoch %d, offset %d (generation %d)", g.name(a.MemberID), q.Epoch, q.Offset, a.Generation)
	}
	for _, q := range a.Revoke {
		g.note(q.QueueID, q.Offset, "asked back from %s at epoch %d (generation %d)", g.name(a.MemberID), q.Epoch, a.Generation)
	}
	for _, q := range append(append([]docQueueRef(nil), a.Queues...), a.Revoke...) {
		hold := tapHold{a.MemberID, q.QueueID, q.Epoch}
		if g.handed[hold] {
			continue
		}
		g.handed[hold] = true
		if tq := g.queues[q.QueueID]; tq != nil && q.Offset < tq.committed {
			g.problems = append(g.problems, fmt.Sprintf("member %s assigned queue %d at offset %d, below the %d committed and acknowledged",
				a.MemberID, q.QueueID, q.Offset, tq.committed))
		}
	}
}

// request keeps a request of interest until its reply.
func (g *groupTap) request(m *nats.Msg) {
	if m.Reply == "" {
		return
	}
	var kind string
	switch {
	case strings.HasSuffix(m.Subject, ".group.join"):
		kind = "join"
	case strings.HasSuffix(m.Subject, ".read"):
		kind = "read"
	case strings.HasSuffix(m.Subject, ".commit"):
		kind = "commit"
	case strings.HasSuffix(m.Subject, ".group.release"):
		kind = "release"
	case strings.HasSuffix(m.Subject, ".group.leave"):
		kind = "leave"
	default:
		return
	}
	var body map[string]json.RawMessage
	if json.Unmarshal(m.Data, &body) != nil {
		return
	}
	var topic string
	_ = json.Unmarshal(body["topic"], &topic)
	if topic != g.topic {
		return
	}
	if _, member := body["memberId"]; !member && kind != "join" {
		return // outside the group (a plain commit, a read outside a group)
	}
	r := tapRequest{kind: kind, body: body}
	if kind == "read" {
		_ = json.Unmarshal(body["queues"], &r.read)
	}
	g.reqs[m.Reply] = r
}

func (g *groupTap) queue(id int32) *tapQueue {
	q := g.queues[id]
	if q == nil {
		q = &tapQueue{pending: map[int64]bool{}}
		g.queues[id] = q
	}
	return q
}

func (g *groupTap) commit(member string, id int32, offset int64) {
	g.note(id, offset, "commit %d by %s", offset, g.name(member))
	q := g.queue(id)
	q.committed, q.hasCommit = offset, true
	if g.lastCommit[member] == nil {
		g.lastCommit[member] = map[int32]int64{}
	}
	g.lastCommit[member][id] = offset
}

// readReply applies a read's reply: each section with records was served to the member at the
// epoch it named. A queue served to another holder than its last one changed hands: if the last
// one did not let it go, it was lost, and its window is pending (the engine's queueState.lost).
func (g *groupTap) readReply(req tapRequest, m *nats.Msg) {
	secs, err := decodeReadReply(m, len(req.read))
	if err != nil {
		return // an error reply: nothing served
	}
	var member string
	_ = json.Unmarshal(req.body["memberId"], &member)
	for i, s := range secs {
		if len(s.records) == 0 {
			continue
		}
		rq := req.read[i]
		q := g.queue(s.queueID)
		if q.owner != member || q.epoch != rq.Epoch {
			if q.owner != "" && !q.released {
				for off := q.committed; off < q.servedEnd; off++ {
					q.pending[off] = true
				}
			}
			q.owner, q.epoch, q.servedEnd, q.released = member, rq.Epoch, 0, false
		}
		g.note(s.queueID, s.records[0].queueOffset, "served %d..%d (next %d) to %s at epoch %d", s.records[0].queueOffset,
			s.records[len(s.records)-1].queueOffset, s.nextOffset, g.name(member), rq.Epoch)
		for _, r := range s.records {
			g.served++
			if q.pending[r.queueOffset] {
				delete(q.pending, r.queueOffset)
				g.redelivered++
				g.redeliveredAt[qpos{s.queueID, r.queueOffset}]++
			}
		}
		q.servedEnd = max(q.servedEnd, s.nextOffset)
	}
}

// counts are the model's results so far.
func (g *groupTap) counts() (redelivered, served int, at map[qpos]int, problems []string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	at = make(map[qpos]int, len(g.redeliveredAt))
	for k, v := range g.redeliveredAt {
		at[k] = v
	}
	return g.redelivered, g.served, at, append([]string(nil), g.problems...)
}

// memberOf is the member id a client id joined as (the last one).
func (g *groupTap) membersOf(client string) []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []string
	for m, c := range g.clientOf {
		if c == client {
			out = append(out, m)
		}
	}
	return out
}

// committedBy is the last offset member committed in each queue.
func (g *groupTap) committedBy(member string) map[int32]int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := map[int32]int64{}
	for q, off := range g.lastCommit[member] {
		out[q] = off
	}
	return out
}

// committedNow is each queue's last commit acknowledged, by anyone.
func (g *groupTap) committedNow() map[int32]int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := map[int32]int64{}
	for id, q := range g.queues {
		if q.hasCommit {
			out[id] = q.committed
		}
	}
	return out
}

// joined is how many of client's joins the engine answered with an assignment.
func (g *groupTap) joined(client string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.joins[client]
}

// tapEvent is something that happened to a queue, near offset.
type tapEvent struct {
	offset int64
	text   string
}

// note records an event of a queue (the lock held).
func (g *groupTap) note(id int32, offset int64, format string, args ...any) {
	if h := g.history[id]; len(h) < 1_000_000 {
		g.history[id] = append(h, tapEvent{offset, fmt.Sprintf(format, args...)})
	}
}

// name is a member's client id, or its id.
func (g *groupTap) name(member string) string {
	if c := g.clientOf[member]; c != "" {
		return c
	}
	return member
}

// story is what happened to a queue around an offset: the events from the first one within 200
// of it to the last one.
func (g *groupTap) story(id int32, offset int64) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	h := g.history[id]
	first, last := -1, -1
	for i, e := range h {
		if e.offset >= offset-200 && e.offset <= offset+200 {
			if first < 0 {
				first = i
			}
			last = i
		}
	}
	if first < 0 {
		return "(nothing seen near it)"
	}
	var b strings.Builder
	for _, e := range h[first : last+1] {
		b.WriteString(e.text)
		b.WriteByte('\n')
	}
	return b.String()
}
