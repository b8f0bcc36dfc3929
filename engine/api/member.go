package api

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"
)

// A consumer group member (docs/GROUPS.md, "A member, step by step"): Join, then Next hands out
// the messages of the queues the engine assigned, each queue in order; Commit (or auto-commit)
// records what was handled; Close commits and leaves.
//
// What was handled: a message Next returned is handled once Next is called again, or Commit or
// Close is. A queue the engine asks back is released only then, at the offset after the last
// message handled, so that no message is with two live members at once and nothing handled is
// handed out again.

// Defaults of MemberConfig.
const (
	DefaultAutoCommitInterval = time.Second
	DefaultMemberWait         = time.Second
	// DefaultMemberMaxBatch is the messages a member asks for in each batched read: twice a
	// read's own default (DefaultReadMax), since each reply costs the engine, NATS and the
	// member a round of wake-ups and bookkeeping whatever it carries (4 members reading a
	// topic of 128 B bodies: about 5 % less CPU a message than at 1,024; at 8,192 more, the
	// replies past what the caches hold).
	DefaultMemberMaxBatch = 2 * DefaultReadMax
)

// ErrMemberClosed is returned by Next and Commit after Close.
var ErrMemberClosed = errors.New("api: member closed")

// MemberConfig configures a member of a consumer group.
type MemberConfig struct {
	Group, Topic string
	// Subject filters the messages (a NATS subject or pattern); the group's members share it.
	Subject string
	// ClientID names the member's process for people (engine groups describe).
	ClientID string
	// Start is StartEarliest (the default) or StartLatest, for a group new to a queue.
	Start string
	// ManualCommit turns auto-commit off: only Commit and Close commit. Otherwise what was
	// handled is committed every AutoCommitInterval (DefaultAutoCommitInterval).
	ManualCommit       bool
	AutoCommitInterval time.Duration
	// MaxBatch and MaxBytes bound each batched read (DefaultMemberMaxBatch,
	// DefaultReadMaxBytes; the engine lowers MaxBytes to what fits in a reply); Buffer bounds
	// the messages read ahead of Next (2 x MaxBatch): after a kill -9 the engine counts as
	// redelivered what was read ahead, handed out or not.
	MaxBatch, MaxBytes, Buffer int
	// Wait is the long poll of a read at the end of every queue (DefaultMemberWait).
	Wait time.Duration
	// OnAssign, if set, is called with the queues held after every change of assignment.
	OnAssign func(queues []int32)
}

// Member is a member of a consumer group. Next, Commit and Close may be called from different
// goroutines, but Next hands out one message at a time.
type Member struct {
	c      *Client
	cfg    MemberConfig
	id     string
	ctx    context.Context
	cancel context.CancelFunc
	notify *nats.Subscription
	events chan *nats.Msg // pushed assignments
	wg     sync.WaitGroup

	mu       sync.Mutex
	sessions map[string]*session // by engine id
	queues   map[int32]*heldQueue
	// buf[head:] is what was read and not handed out, in order per queue: a queue whose head
	// moves, so that handing out allocates nothing (take moves the rest to the front).
	buf  []delivery
	head int
	nbuf atomic.Int64 // bufferedLocked, for Buffered
	// inFlight is the queue of the message Next handed out last and that is not yet handled
	// (nil: none), flightOff its offset. Not a delivery: copying one (three pointers) into the
	// Member cost a write barrier per message while the collector runs.
	inFlight  *heldQueue
	flightOff int64
	closed    bool
	err       error         // fatal: Next returns it
	ready     chan struct{} // cap 1: a message arrived, or the member closed
	control   chan struct{} // cap 1: the control loop has work (a release, a rejoin)
	rejoin    bool          // every session must be found again (no responders, an unknown member)
	beatNow   bool          // heartbeat at once: a read was fenced
}

// session is the member's session with one engine.
type session struct {
	engine, api string
	generation  int64
	heartbeat   time.Duration
	// timeout is the engine's session timeout; heard when the engine last answered (an
	// assignment, a read). A session not answered for timeout is gone at the engine too.
	timeout    time.Duration
	heard      time.Time
	partitions []int32
	kick       chan struct{} // cap 1: its reader's queues changed
	cancelRead context.CancelFunc
	gone       bool
}

// heldQueue is a queue the member holds on one engine.
type heldQueue struct {
	s        *session
	id       int32
	epoch    int64
	next     int64 // the next offset to read
	handed   int64 // one past the last message Next returned
	handled  int64 // one past the last message handled
	commit   int64 // the offset last committed
	buffered int   // its messages in Member.buf
	revoking bool
	// fenced: a read of it came back FENCED; it is not read until an assignment says whether
	// it is asked back (release it) or gone (drop it).
	fenced bool
	atEnd  bool // its last read found nothing more to read
}

type delivery struct {
	rec Record
	q   *heldQueue
	off int64
}

// Join joins the group cfg names on the topic and returns the member, reading its queues in the
// background. An error from the engine at the join (an unknown topic: 404; another subject
// filter than the group's: 409; too many members: 429; a malformed name: 400) is returned as an
// *Error.
func (c *Client) Join(ctx context.Context, cfg MemberConfig) (*Member, error) {
	cfg.MaxBatch = min(cmp.Or(cfg.MaxBatch, DefaultMemberMaxBatch), MaxReadMax)
	cfg.MaxBytes = cmp.Or(cfg.MaxBytes, DefaultReadMaxBytes)
	cfg.Buffer = cmp.Or(cfg.Buffer, 2*cfg.MaxBatch)
	cfg.Wait = cmp.Or(cfg.Wait, DefaultMemberWait)
	cfg.AutoCommitInterval = cmp.Or(cfg.AutoCommitInterval, DefaultAutoCommitInterval)
	m := &Member{c: c, cfg: cfg, id: nuid.Next(), sessions: map[string]*session{}, queues: map[int32]*heldQueue{},
		events: make(chan *nats.Msg, 64), ready: make(chan struct{}, 1), control: make(chan struct{}, 1)}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	var err error
	if m.notify, err = c.nc.ChanSubscribe(c.nc.NewRespInbox(), m.events); err != nil {
		return nil, err
	}
	if err := m.discover(ctx); err != nil {
		_ = m.notify.Unsubscribe()
		m.cancel()
		return nil, err
	}
	m.wg.Go(m.loop)
	return m, nil
}

// Buffered is how many messages Next can hand out without waiting. It takes no lock (a loop
// that asks it before each Next, as engine consume's, paid a second lock a message).
func (m *Member) Buffered() int { return int(m.nbuf.Load()) }

func (m *Member) bufferedLocked() int { return len(m.buf) - m.head }

// counted publishes bufferedLocked to Buffered: after every change of buf or head.
func (m *Member) counted() { m.nbuf.Store(int64(m.bufferedLocked())) }

// AtEnd says the member holds queues, every one read to its end (as of its last read), and has
// nothing left to hand out: what a script draining a topic waits for. A message stored since
// the last read, or a rebalance, makes it false again.
func (m *Member) AtEnd() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.bufferedLocked() > 0 || len(m.queues) == 0 {
		return false
	}
	for _, q := range m.queues {
		if q.revoking || q.fenced || !q.atEnd {
			return false
		}
	}
	return true
}

// ID is the member's id (engine groups describe shows it).
func (m *Member) ID() string { return m.id }

// Queues lists the queues the member holds now, ascending.
func (m *Member) Queues() []int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.heldLocked()
}

func (m *Member) heldLocked() []int32 {
	out := make([]int32, 0, len(m.queues))
	for id, q := range m.queues {
		if !q.revoking {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// discover joins on the read API's shared subject (every engine's, on a partitioned
// deployment), and takes each engine's answer as a session.
func (m *Member) discover(ctx context.Context) error {
	req, _ := json.Marshal(JoinRequest{Group: m.cfg.Group, Topic: m.cfg.Topic, Subject: m.cfg.Subject, MemberID: m.id,
		ClientID: m.cfg.ClientID, Notify: m.notify.Subject, Start: m.cfg.Start})
	if m.c.partitions == 0 {
		var a Assignment
		if err := m.c.requestTo(ctx, Subject(m.c.prefix, EndpointGroupJoin), 0, json.RawMessage(req), &a); err != nil {
			return err
		}
		m.apply(a)
		return nil
	}
	covered := make([]bool, m.c.partitions)
	err := m.c.gatherRaw(ctx, m.c.prefix+"."+FanOutToken+"."+EndpointGroupJoin, req, func(msg *nats.Msg) (bool, error) {
		var a Assignment
		if err := decodeReply(msg, &a); err != nil {
			return false, err
		}
		m.apply(a)
		for _, p := range a.Partitions {
			if p >= 0 && int(p) < len(covered) {
				covered[p] = true
			}
		}
		return !slices.Contains(covered, false), nil
	})
	if err != nil {
		return err
	}
	if i := slices.Index(covered, false); i >= 0 {
		return fmt.Errorf("api: join: no engine answered for partition %d of %d", i, m.c.partitions)
	}
	return nil
}

// apply takes an assignment from an engine: new queues are read from their offset, queues asked
// back stop being handed out and are released once what was handed out of them is handled,
// queues no longer listed are dropped.
func (m *Member) apply(a Assignment) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	s := m.sessions[a.Engine]
	if s == nil {
		s = &session{engine: a.Engine, api: a.API, kick: make(chan struct{}, 1)}
		m.sessions[a.Engine] = s
		m.wg.Go(func() { m.read(s) })
	}
	if a.Generation < s.generation {
		return // stale: a push and a heartbeat's reply crossed
	}
	s.generation, s.partitions = a.Generation, a.Partitions
	s.heartbeat = time.Duration(cmp.Or(a.HeartbeatMs, 1000)) * time.Millisecond
	s.timeout = time.Duration(cmp.Or(a.SessionTimeoutMs, 3000)) * time.Millisecond
	s.heard = time.Now()
	listed := make(map[int32]bool, len(a.Queues)+len(a.Revoke))
	changed := false // the queues the session's reader reads: a heartbeat's same assignment keeps its read
	for _, aq := range a.Queues {
		listed[aq.QueueID] = true
		if q := m.queues[aq.QueueID]; q != nil && q.s == s && q.epoch == aq.Epoch {
			changed = changed || q.revoking || q.fenced
			q.revoking, q.fenced = false, false // still, or again (a revocation the engine took back), the member's
			continue
		}
		m.dropLocked(aq.QueueID)
		m.queues[aq.QueueID] = &heldQueue{s: s, id: aq.QueueID, epoch: aq.Epoch, next: aq.Offset, handed: aq.Offset, handled: aq.Offset, commit: aq.Offset}
		changed = true
	}
	for _, aq := range a.Revoke {
		listed[aq.QueueID] = true
		q := m.queues[aq.QueueID]
		switch {
		case q == nil || q.s != s || q.epoch != aq.Epoch:
			// Asked back a hold the member never saw given: the push that gave it crossed the
			// one that asks it back and came second, so it was stale. Nothing of it was handed
			// out; it is released where the group stands, or the engine waits its rebalance
			// timeout for it (every heartbeat repeats the revocation, none the grant).
			m.dropLocked(aq.QueueID)
			m.queues[aq.QueueID] = &heldQueue{s: s, id: aq.QueueID, epoch: aq.Epoch, next: aq.Offset, handed: aq.Offset,
				handled: aq.Offset, commit: aq.Offset, revoking: true}
			m.signal(m.control)
			changed = true
		case !q.revoking:
			q.revoking = true
			m.discardLocked(q)
			m.signal(m.control)
			changed = true
		}
	}
	for id, q := range m.queues {
		if q.s == s && !listed[id] {
			m.dropLocked(id)
			changed = true
		}
	}
	if !changed {
		return
	}
	m.kickLocked(s)
	if m.cfg.OnAssign != nil {
		m.cfg.OnAssign(m.heldLocked())
	}
}

// dropLocked forgets a queue without committing: it is not the member's any more.
func (m *Member) dropLocked(id int32) {
	if q := m.queues[id]; q != nil {
		m.discardLocked(q)
		delete(m.queues, id)
	}
}

// discardLocked removes q's messages read ahead: they will not be handed out.
func (m *Member) discardLocked(q *heldQueue) {
	if q.buffered > 0 {
		kept := slices.DeleteFunc(m.buf[m.head:], func(d delivery) bool { return d.q == q })
		m.buf = m.buf[:m.head+len(kept)]
		q.buffered = 0
		m.counted()
	}
	if q.next > q.handed {
		q.next = q.handed // what was read ahead is read again, if the queue stays
		q.atEnd = false   // and it is no longer read to its end
	}
}

// positionLocked is where q's group goes on from: past every message handled, and past those
// its filter passed over when nothing of it is read ahead or in flight.
func (m *Member) positionLocked(q *heldQueue) int64 {
	if q.buffered == 0 && m.inFlight != q {
		return max(q.next, q.handled)
	}
	return q.handled
}

func (m *Member) kickLocked(s *session) {
	if s.cancelRead != nil {
		s.cancelRead() // a read under way names the old queues: ask again at once
	}
	m.signal(s.kick)
}

func (m *Member) signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// Next returns the next message of the queues held, waiting until one is there or ctx ends. It
// marks the message it returned before as handled. A read the engine answers with an internal
// error (500: a damaged store, such as a record that fails its CRC check) makes Next return that
// error from then on.
func (m *Member) Next(ctx context.Context) (Record, error) {
	m.mu.Lock()
	m.handledLocked()
	for {
		switch {
		case m.closed:
			m.mu.Unlock()
			return Record{}, ErrMemberClosed
		case m.err != nil:
			err := m.err
			m.mu.Unlock()
			return Record{}, err
		}
		if m.head < len(m.buf) {
			d := &m.buf[m.head]
			dq, off, rec := d.q, d.off, d.rec
			if m.head++; m.head == len(m.buf) {
				// Cleared all at once (not one by one as handed out, a write barrier each
				// while the collector runs), so that the replies they point into can go.
				clear(m.buf)
				m.buf, m.head = m.buf[:0], 0
			}
			m.counted()
			dq.buffered--
			if q := m.queues[dq.id]; q != dq || q.revoking || q.fenced {
				continue // dropped or asked back since it was read
			}
			m.inFlight, m.flightOff = dq, off
			dq.handed = off + 1
			if m.bufferedLocked() < m.cfg.Buffer/2 {
				m.signal(dq.s.kick)
			}
			m.mu.Unlock()
			return rec, nil
		}
		m.mu.Unlock()
		select {
		case <-m.ready:
		case <-ctx.Done():
			return Record{}, ctx.Err()
		}
		m.mu.Lock()
	}
}

// handledLocked marks the message in flight as handled; a release it held back may go now.
func (m *Member) handledLocked() {
	q := m.inFlight
	if q == nil {
		return
	}
	m.inFlight = nil
	q.handled = max(q.handled, m.flightOff+1)
	if q.revoking {
		m.signal(m.control)
	}
}

// Commit marks the message in flight as handled and commits, in every queue held, the offset
// after the last message handled. A queue the member no longer holds is dropped (its commit is
// refused: it is someone else's now).
func (m *Member) Commit(ctx context.Context) error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return ErrMemberClosed
	}
	m.handledLocked()
	m.mu.Unlock()
	return m.commitHandled(ctx)
}

// commitHandled commits every queue whose handled offset moved since its last commit.
func (m *Member) commitHandled(ctx context.Context) error {
	type todo struct {
		q   *heldQueue
		api string
		off int64
	}
	m.mu.Lock()
	var work []todo
	for _, q := range m.queues {
		if pos := m.positionLocked(q); pos != q.commit {
			work = append(work, todo{q, q.s.api, pos})
		}
	}
	m.mu.Unlock()
	var errs []error
	for _, w := range work {
		var out CommitReply
		err := m.c.requestTo(ctx, w.api+"."+EndpointCommit, 0, CommitRequest{Group: m.cfg.Group, Topic: m.cfg.Topic,
			QueueID: w.q.id, Offset: w.off, MemberID: m.id, Epoch: w.q.epoch}, &out)
		m.mu.Lock()
		switch {
		case err == nil:
			w.q.commit = max(w.q.commit, w.off)
		case CodeOf(err) == CodeConflict && w.q.revoking:
			// Asked back: the member's own release (sent by its control loop meanwhile) let
			// the queue go first, committing every message handled. Nothing is lost, and the
			// release's answer drops the queue.
			err = nil
		case CodeOf(err) == CodeConflict:
			if m.queues[w.q.id] == w.q {
				m.dropLocked(w.q.id) // fenced: not ours any more
			}
		case CodeOf(err) == CodeNotFound:
			m.rejoin = true
			m.signal(m.control)
		}
		m.mu.Unlock()
		if err != nil {
			errs = append(errs, fmt.Errorf("commit of queue %d at %d: %w", w.q.id, w.off, err))
		}
	}
	return errors.Join(errs...)
}

// Close marks the message in flight as handled, commits what was handled and leaves every
// engine's group; the others get its queues at once. A ctx that is already done (the usual end
// of a loop over Next with `defer m.Close(ctx)`) still gets the client's timeout for that:
// otherwise the member would neither commit nor leave, and its queues would wait for its session
// to run out and hand out again what it handled.
func (m *Member) Close(ctx context.Context) error { return m.leave(ctx, true) }

// Abandon leaves every engine's group without committing anything more: what was handed out
// since the last commit is handed out again, to whoever reads its queue next (for a member that
// could not finish with what it was handed: its output failed, say).
func (m *Member) Abandon() {
	ctx, cancel := context.WithTimeout(context.Background(), m.c.timeout)
	defer cancel()
	_ = m.leave(ctx, false)
}

func (m *Member) leave(ctx context.Context, commit bool) error {
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), m.c.timeout)
		defer cancel()
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	if commit {
		m.handledLocked()
	}
	m.closed = true
	leaves := make(map[*session][]QueueOffset)
	for _, q := range m.queues {
		if commit {
			leaves[q.s] = append(leaves[q.s], QueueOffset{QueueID: q.id, Epoch: q.epoch, Offset: m.positionLocked(q)})
		}
	}
	sessions := make([]*session, 0, len(m.sessions))
	for _, s := range m.sessions {
		sessions = append(sessions, s)
		if s.cancelRead != nil {
			s.cancelRead()
		}
	}
	m.signal(m.ready)
	m.mu.Unlock()
	m.cancel()
	m.wg.Wait()
	var errs []error
	for _, s := range sessions {
		err := m.c.requestTo(ctx, s.api+"."+EndpointGroupLeave, 0, LeaveRequest{Group: m.cfg.Group, Topic: m.cfg.Topic,
			MemberID: m.id, Queues: leaves[s]}, &struct{}{})
		if err != nil && CodeOf(err) != CodeNotFound {
			errs = append(errs, fmt.Errorf("leave %s: %w", s.engine, err))
		}
	}
	errs = append(errs, m.notify.Unsubscribe())
	return errors.Join(errs...)
}

// gatherRaw sends data to subject (a fan-out endpoint) and hands each answer to each until it
// says it has enough, or ctx (or the client's timeout) ends; an answer each refuses ends it
// with that error.
func (c *Client) gatherRaw(ctx context.Context, subject string, data []byte, each func(*nats.Msg) (bool, error)) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	inbox := c.nc.NewInbox()
	sub, err := c.nc.SubscribeSync(inbox)
	if err != nil {
		return err
	}
	defer sub.Unsubscribe()
	if err := c.nc.PublishRequest(subject, inbox, data); err != nil {
		return err
	}
	for answers := 0; ; answers++ {
		msg, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			if answers == 0 {
				return fmt.Errorf("api: %s: no engine answered: %w", subject, err)
			}
			return nil // the deadline: the caller says what is missing
		}
		if msg.Header.Get("Status") == "503" && len(msg.Data) == 0 {
			return fmt.Errorf("api: %s: no engine answers: %w", subject, nats.ErrNoResponders)
		}
		if done, err := each(msg); err != nil || done {
			return err
		}
	}
}
