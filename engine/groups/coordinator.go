package groups

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nuid"
	"github.com/rs/zerolog"

	"github.com/rocketstore/engine/internal/store/offsets"
)

// Defaults of Config.
const (
	DefaultHeartbeatInterval = time.Second
	DefaultSessionTimeout    = 3 * time.Second
	DefaultRebalanceTimeout  = 30 * time.Second
	DefaultMaxMembers        = 50_000
	DefaultMaxGroupMembers   = 1_000
	// rebalanceHistory is how many rebalances each group keeps for Describe.
	rebalanceHistory = 16
)

// Errors of the coordinator, wrapped with detail; compare with errors.Is.
var (
	// ErrUnknownMember: no such member in the group (never joined, left, its session ran out,
	// or the engine restarted): the member joins again.
	ErrUnknownMember = errors.New("unknown member")
	// ErrFenced: the member does not own the queue at that epoch (any more).
	ErrFenced = errors.New("fenced")
	// ErrUnknownTopic: the topic has no queue on this engine.
	ErrUnknownTopic = errors.New("unknown topic")
	// ErrTooManyMembers: a join past MaxMembers or MaxGroupMembers.
	ErrTooManyMembers = errors.New("too many members")
	// ErrConflict: a join with another subject filter than the group's members have, or a reset
	// or delete of a group that has members.
	ErrConflict = errors.New("conflict")
	// ErrInvalid: a request field out of range.
	ErrInvalid = errors.New("invalid request")
	// ErrClosed: the coordinator is closed.
	ErrClosed = errors.New("groups: closed")
)

// Config configures a Coordinator. Zero values are the defaults.
type Config struct {
	// HeartbeatInterval is how often members are told to heartbeat; SessionTimeout how long a
	// member may go without one before it is taken out (at least twice the interval).
	HeartbeatInterval, SessionTimeout time.Duration
	// RebalanceTimeout bounds how long a member may take to release a queue it was asked to
	// give up; past it the queue is taken from it (its commits fenced) and moves on.
	RebalanceTimeout time.Duration
	// MaxMembers bounds the members of every group together, MaxGroupMembers those of one.
	MaxMembers, MaxGroupMembers int
	Logger                      zerolog.Logger
}

func (c Config) withDefaults() Config {
	c.HeartbeatInterval = cmp.Or(c.HeartbeatInterval, DefaultHeartbeatInterval)
	c.SessionTimeout = max(cmp.Or(c.SessionTimeout, DefaultSessionTimeout), 2*c.HeartbeatInterval)
	c.RebalanceTimeout = cmp.Or(c.RebalanceTimeout, DefaultRebalanceTimeout)
	c.MaxMembers = cmp.Or(c.MaxMembers, DefaultMaxMembers)
	c.MaxGroupMembers = cmp.Or(c.MaxGroupMembers, DefaultMaxGroupMembers)
	return c
}

// Store is what the coordinator needs of the engine's store.
type Store interface {
	// Queues returns the queue ids of topic this engine serves, ascending, and whether the
	// topic is known to it.
	Queues(topic string) (ids []int32, known bool)
	// Bounds returns the first readable offset of a queue and the offset its next message gets.
	Bounds(topic string, queueID int32) (minOffset, maxOffset int64)
}

// Table is the committed offsets (*offsets.Table).
type Table interface {
	Get(group, topic string, queueID int32) (offsets.Offset, bool)
	Apply(c offsets.Commit) (offsets.Ticket, error)
	Wait(offsets.Ticket) error
}

// Notify delivers an assignment to the subject a member named at its join. It is called
// outside the coordinator's lock, must not block for long, and may lose the message: members
// learn the same from their next heartbeat.
type Notify func(subject string, a Assignment)

// Key names a group on a topic: members of one group reading two topics are two groups here,
// as their offsets are two keys of RocketMQ's table.
type Key struct {
	Group, Topic string
}

func (k Key) String() string { return k.Topic + "@" + k.Group }

// StartPolicy says where a group starts reading a queue it has no committed offset in.
type StartPolicy int

const (
	// StartEarliest reads a queue from its first message still stored.
	StartEarliest StartPolicy = iota
	// StartLatest reads only what is stored after the group's first member joined: the
	// queue's end is committed for the group then.
	StartLatest
)

// Coordinator owns the groups of the queues this engine serves. Its methods are safe for
// concurrent use; each is an event, handled at once.
type Coordinator struct {
	cfg    Config
	store  Store
	table  Table
	notify Notify
	log    zerolog.Logger
	now    func() time.Time

	mu      sync.Mutex
	epoch   int64 // the last epoch handed out: every assignment change takes the next
	groups  map[Key]*group
	members int // of every group
	closed  bool

	stats stats
}

// stats are the coordinator's counters since its start (Stats).
type stats struct {
	joins, leaves, expired, rebalances, redelivered, fenced, commits atomic.Int64
}

// New returns a coordinator over store and table; notify may be nil (members then learn of
// changes at their heartbeats).
func New(cfg Config, store Store, table Table, notify Notify) *Coordinator {
	cfg = cfg.withDefaults()
	if notify == nil {
		notify = func(string, Assignment) {}
	}
	// Epochs start at the clock's microseconds, so that they grow across restarts of the
	// engine too: a member that rejoins with its old id after a restart can never hold a queue
	// at an epoch that one of its requests from before the restart names.
	return &Coordinator{cfg: cfg, store: store, table: table, notify: notify, log: cfg.Logger, now: time.Now,
		epoch: time.Now().UnixMicro(), groups: make(map[Key]*group)}
}

// Config returns the coordinator's configuration with its defaults filled in.
func (c *Coordinator) Config() Config { return c.cfg }

// Close stops every timer; later calls fail with ErrClosed. The members find out at their next
// request and join again, elsewhere or after a restart.
func (c *Coordinator) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for _, g := range c.groups {
		for _, m := range g.members {
			m.timer.Stop()
		}
		for _, q := range g.queues {
			q.stopRevokeTimer()
		}
	}
}

// JoinRequest is a member's join.
type JoinRequest struct {
	Key
	// Subject filters the messages the members read (a NATS subject or pattern, "" for all);
	// every member of a group has the same.
	Subject string
	// MemberID is the id the member had (a rejoin after ErrUnknownMember keeps it); "" for a
	// new one, which the coordinator names.
	MemberID string
	// ClientID names the member's process for people (its host and pid, say).
	ClientID string
	// Notify is the subject the coordinator pushes assignments to ("" for none).
	Notify string
	Start  StartPolicy
}

// Join adds a member to a group (or takes a rejoin of one it has) and rebalances the group at
// once. The reply's assignment holds the queues the member may read now; queues other members
// must release first come later, by push and heartbeat.
func (c *Coordinator) Join(req JoinRequest) (Assignment, error) {
	if len(req.MemberID) > offsets.MaxMemberLen || len(req.ClientID) > 256 {
		return Assignment{}, fmt.Errorf("%w: member id over %d bytes or client id over 256", ErrInvalid, offsets.MaxMemberLen)
	}
	queues, known := c.store.Queues(req.Topic)
	if !known {
		return Assignment{}, fmt.Errorf("%w: %q has no queue on this engine", ErrUnknownTopic, req.Topic)
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return Assignment{}, ErrClosed
	}
	g := c.groups[req.Key]
	if g == nil {
		g = newGroup(req.Key, req.Subject, req.Start)
	}
	if len(g.members) > 0 && g.subject != req.Subject {
		c.mu.Unlock()
		return Assignment{}, fmt.Errorf("%w: group %q reads %q with the subject filter %q, not %q", ErrConflict, req.Group, req.Topic, g.subject, req.Subject)
	}
	m := g.members[req.MemberID]
	if m == nil {
		switch {
		case c.members >= c.cfg.MaxMembers:
			c.mu.Unlock()
			return Assignment{}, fmt.Errorf("%w: the engine has %d members in all, its bound (group_max_members)", ErrTooManyMembers, c.members)
		case len(g.members) >= c.cfg.MaxGroupMembers:
			c.mu.Unlock()
			return Assignment{}, fmt.Errorf("%w: group %q has %d members on %q, its bound (group_max_group_members)", ErrTooManyMembers, req.Group, len(g.members), req.Topic)
		}
		id := req.MemberID
		if id == "" {
			id = nuid.Next()
		}
		m = &member{id: id, client: req.ClientID, notify: req.Notify, joined: c.now()}
		if len(g.members) == 0 {
			g.subject, g.start = req.Subject, req.Start
		}
		g.members[id] = m
		c.groups[req.Key] = g
		c.members++
		key, mid := req.Key, id
		m.timer = time.AfterFunc(c.cfg.SessionTimeout, func() { c.expire(key, mid) })
		c.stats.joins.Add(1)
		c.log.Info().Str("group", req.Group).Str("topic", req.Topic).Str("member", id).Str("client", req.ClientID).
			Int("members", len(g.members)).Msg("group: member joined")
		g.startRebalance(c.now(), "join", id)
		c.stats.rebalances.Add(1)
	} else {
		m.notify, m.client = cmp.Or(req.Notify, m.notify), cmp.Or(req.ClientID, m.client)
		m.timer.Reset(c.cfg.SessionTimeout)
	}
	out := c.rebalanceLocked(g, queues)
	a := g.assignment(m, c)
	c.mu.Unlock()
	c.send(out)
	return a, nil
}

// Heartbeat keeps a member's session and returns its assignment.
func (c *Coordinator) Heartbeat(key Key, memberID string) (Assignment, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g, m, err := c.memberLocked(key, memberID)
	if err != nil {
		return Assignment{}, err
	}
	m.timer.Reset(c.cfg.SessionTimeout)
	return g.assignment(m, c), nil
}

// QueueCommit is an offset a member commits in a queue it owns at Epoch.
type QueueCommit struct {
	QueueID int32
	Epoch   int64
	Offset  int64
}

// Commit records offset as the group's next offset in a queue, for a member that owns it at
// epoch (being revoked or not); otherwise ErrFenced and nothing changes. It returns once the
// offset is in the offsets journal.
func (c *Coordinator) Commit(key Key, memberID string, qc QueueCommit) error {
	c.mu.Lock()
	g, m, err := c.memberLocked(key, memberID)
	var tk offsets.Ticket
	if err == nil {
		m.timer.Reset(c.cfg.SessionTimeout) // a commit shows the member is alive
		tk, err = c.commitLocked(g, m, qc)
	}
	c.mu.Unlock()
	if err != nil {
		return err
	}
	return c.table.Wait(tk)
}

// commitLocked fences qc and applies it to the table.
func (c *Coordinator) commitLocked(g *group, m *member, qc QueueCommit) (offsets.Ticket, error) {
	q := g.queues[qc.QueueID]
	if q == nil || q.owner != m.id || q.epoch != qc.Epoch {
		c.stats.fenced.Add(1)
		return offsets.Ticket{}, fmt.Errorf("%w: member %s does not own queue %d of %s at epoch %d", ErrFenced, m.id, qc.QueueID, g.key, qc.Epoch)
	}
	if qc.Offset < 0 {
		return offsets.Ticket{}, fmt.Errorf("%w: offset %d", ErrInvalid, qc.Offset)
	}
	if cur, ok := c.table.Get(g.key.Group, g.key.Topic, qc.QueueID); ok && cur.Epoch == qc.Epoch && cur.Member == m.id && cur.Offset > qc.Offset {
		// An older commit of this hold, overtaken on its way by a newer one: a member's
		// commit and its own release or leave go to different endpoints, served at once, and
		// a commit abandoned by a member that is stopping still arrives. Within a hold the
		// offset never goes back (the queue's next owner would start before what was
		// handled). Answered once the newer one is written: a no-op of the table's.
		return c.table.Apply(offsets.Commit{Group: g.key.Group, Topic: g.key.Topic, QueueID: qc.QueueID, Offset: cur.Offset,
			Epoch: cur.Epoch, Member: cur.Member})
	}
	tk, err := c.table.Apply(offsets.Commit{Group: g.key.Group, Topic: g.key.Topic, QueueID: qc.QueueID, Offset: qc.Offset,
		Epoch: qc.Epoch, Member: m.id})
	if err == nil {
		c.stats.commits.Add(1)
	}
	return tk, err
}

// Release commits where a member stopped in queues it was asked to give up and lets them go:
// each moves at once to its next owner. Only the queues listed are let go, and only those being
// revoked; commits of queues it does not own at their epoch are fenced (the error names them),
// the others still happen.
func (c *Coordinator) Release(key Key, memberID string, commits []QueueCommit) (Assignment, error) {
	return c.letGo(key, memberID, commits, false)
}

// Leave commits where a member stopped, lets every queue it owns go and takes it out of the
// group, which rebalances at once.
func (c *Coordinator) Leave(key Key, memberID string, commits []QueueCommit) error {
	_, err := c.letGo(key, memberID, commits, true)
	return err
}

func (c *Coordinator) letGo(key Key, memberID string, commits []QueueCommit, leave bool) (Assignment, error) {
	c.mu.Lock()
	g, m, err := c.memberLocked(key, memberID)
	if err != nil {
		c.mu.Unlock()
		return Assignment{}, err
	}
	var errs []error
	var last offsets.Ticket
	for _, qc := range commits {
		tk, err := c.commitLocked(g, m, qc)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		last = tk
	}
	// Wait for the commits before the queues move: their next owners start where they say.
	// The table's order is already the order of these decisions, so only the answer waits.
	c.mu.Unlock()
	if err := c.table.Wait(last); err != nil {
		return Assignment{}, err // nothing let go: the member may try again
	}
	c.mu.Lock()
	if g2, m2, err := c.memberLocked(key, memberID); err != nil || g2 != g || m2 != m {
		c.mu.Unlock()
		return Assignment{}, cmp.Or(err, fmt.Errorf("%w: %s of %s", ErrUnknownMember, memberID, key))
	}
	for _, q := range g.queues {
		if q.owner == m.id && (leave || q.revoking && slices.ContainsFunc(commits, func(qc QueueCommit) bool {
			return qc.QueueID == q.id && qc.Epoch == q.epoch
		})) {
			q.free()
		}
	}
	var a Assignment
	if leave {
		c.removeLocked(g, m, "leave")
		c.stats.leaves.Add(1)
	} else {
		m.timer.Reset(c.cfg.SessionTimeout)
	}
	queues, _ := c.store.Queues(key.Topic)
	out := c.rebalanceLocked(g, queues)
	if !leave {
		a = g.assignment(m, c)
	}
	c.mu.Unlock()
	c.send(out)
	return a, errors.Join(errs...)
}

// expire takes out a member whose session ran out (its timer's function).
func (c *Coordinator) expire(key Key, memberID string) {
	c.mu.Lock()
	g, m, err := c.memberLocked(key, memberID)
	if err != nil || c.closed {
		c.mu.Unlock()
		return
	}
	for _, q := range g.queues {
		if q.owner == m.id {
			q.lost(c.offsetLocked(g, q.id))
			q.free()
		}
	}
	c.stats.expired.Add(1)
	c.removeLocked(g, m, "session timeout")
	queues, _ := c.store.Queues(key.Topic)
	out := c.rebalanceLocked(g, queues)
	c.mu.Unlock()
	c.send(out)
}

// revokeTimeout takes a queue from an owner that did not release it in time.
func (c *Coordinator) revokeTimeout(key Key, queueID int32, epoch int64) {
	c.mu.Lock()
	g := c.groups[key]
	if g == nil || c.closed {
		c.mu.Unlock()
		return
	}
	q := g.queues[queueID]
	if q == nil || !q.revoking || q.epoch != epoch {
		c.mu.Unlock()
		return
	}
	c.log.Warn().Str("group", key.Group).Str("topic", key.Topic).Int32("queue", queueID).Str("member", q.owner).
		Dur("rebalance_timeout", c.cfg.RebalanceTimeout).Msg("group: a member did not release a queue in time: taken from it")
	q.lost(c.offsetLocked(g, q.id))
	q.free()
	g.startRebalance(c.now(), "revoke timeout", "")
	c.stats.rebalances.Add(1)
	queues, _ := c.store.Queues(key.Topic)
	out := c.rebalanceLocked(g, queues)
	c.mu.Unlock()
	c.send(out)
}

// removeLocked takes m out of g (its queues already freed).
func (c *Coordinator) removeLocked(g *group, m *member, why string) {
	m.timer.Stop()
	delete(g.members, m.id)
	c.members--
	c.log.Info().Str("group", g.key.Group).Str("topic", g.key.Topic).Str("member", m.id).Str("why", why).
		Int("members", len(g.members)).Msg("group: member left")
	g.startRebalance(c.now(), why, m.id)
	c.stats.rebalances.Add(1)
	if len(g.members) == 0 {
		c.logRebalance(g, g.finishRebalance(c.now()))
	}
}

// logRebalance logs a rebalance that ended (r nil: none did).
func (c *Coordinator) logRebalance(g *group, r *Rebalance) {
	if r == nil {
		return
	}
	c.log.Info().Str("group", g.key.Group).Str("topic", g.key.Topic).Str("reason", r.Reason).Str("member", r.Member).
		Dur("took", r.Duration).Int("moved", r.Moved).Int("members", len(g.members)).Msg("group: rebalance done")
}

func (c *Coordinator) memberLocked(key Key, memberID string) (*group, *member, error) {
	if c.closed {
		return nil, nil, ErrClosed
	}
	g := c.groups[key]
	if g == nil {
		return nil, nil, fmt.Errorf("%w: %s has no member %s (join again)", ErrUnknownMember, key, memberID)
	}
	m := g.members[memberID]
	if m == nil {
		return nil, nil, fmt.Errorf("%w: %s has no member %s (join again)", ErrUnknownMember, key, memberID)
	}
	return g, m, nil
}

// notice is an assignment to push once the lock is released.
type notice struct {
	subject string
	a       Assignment
}

func (c *Coordinator) send(out []notice) {
	for _, n := range out {
		c.notify(n.subject, n.a)
	}
}

// rebalanceLocked brings g's queues toward the even, sticky spread over its members: a free
// queue goes to its target at once, with a new epoch; a queue owned by a member that must give
// it up is marked revoking (its owner is told); one revoking whose target is its owner again
// stays. It returns the pushes for the members whose assignment changed.
func (c *Coordinator) rebalanceLocked(g *group, queues []int32) []notice {
	for _, id := range queues {
		if g.queues[id] == nil {
			g.queues[id] = &queueState{id: id}
		}
	}
	memberIDs := make([]string, 0, len(g.members))
	for id := range g.members {
		memberIDs = append(memberIDs, id)
	}
	slices.Sort(memberIDs)
	cur := make(map[int32]string, len(g.queues))
	for id, q := range g.queues {
		cur[id] = cmp.Or(q.next, q.owner)
	}
	rotate := 0
	if len(queues) > 0 {
		rotate = int(queues[0])
	}
	target := assign(queues, memberIDs, cur, rotate)
	changed := make(map[string]bool)
	now := c.now()
	for _, id := range queues {
		q, to := g.queues[id], target[id]
		switch {
		case q.owner == "" && to != "":
			c.epoch++
			q.take(to, c.epoch)
			g.moved++
			changed[to] = true
			c.startOffsetLocked(g, q)
		case q.owner != "" && q.owner == to:
			if q.revoking { // wanted back by its owner
				q.revoking, q.next = false, ""
				q.stopRevokeTimer()
				changed[q.owner] = true
			}
		case q.owner != "" && q.owner != to:
			if !q.revoking {
				q.revoking = true
				changed[q.owner] = true
				key, qid, epoch := g.key, q.id, q.epoch
				q.revokeTimer = time.AfterFunc(c.cfg.RebalanceTimeout, func() { c.revokeTimeout(key, qid, epoch) })
			}
			q.next = to
		}
	}
	if len(changed) > 0 {
		c.epoch++
		g.generation = c.epoch // orders the assignments the members are sent
	}
	if g.stable() {
		c.logRebalance(g, g.finishRebalance(now))
	}
	var out []notice
	for id := range changed {
		if m := g.members[id]; m != nil && m.notify != "" {
			out = append(out, notice{m.notify, g.assignment(m, c)})
		}
	}
	if len(g.members) == 0 && g.rebalance == nil {
		delete(c.groups, g.key) // nothing of it is left but its offsets, in the table
	}
	return out
}

// startOffsetLocked commits the queue's end for a group that starts at the latest offset and
// has none there yet, so that every later owner starts at the same place.
func (c *Coordinator) startOffsetLocked(g *group, q *queueState) {
	if g.start != StartLatest {
		return
	}
	if _, ok := c.table.Get(g.key.Group, g.key.Topic, q.id); ok {
		return
	}
	_, end := c.store.Bounds(g.key.Topic, q.id)
	if _, err := c.table.Apply(offsets.Commit{Group: g.key.Group, Topic: g.key.Topic, QueueID: q.id, Offset: end}); err != nil {
		c.log.Warn().Err(err).Str("group", g.key.Group).Int32("queue", q.id).Msg("group: could not record where the group starts; it starts at the first message until it can")
	}
}

// offsetLocked is where the owner of q starts: the committed offset, else the queue's first.
func (c *Coordinator) offsetLocked(g *group, id int32) int64 {
	if o, ok := c.table.Get(g.key.Group, g.key.Topic, id); ok {
		return o.Offset
	}
	lo, _ := c.store.Bounds(g.key.Topic, id)
	return lo
}

// Subject is the subject filter of a group's members ("" for none, or no such group).
func (c *Coordinator) Subject(key Key) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if g := c.groups[key]; g != nil {
		return g.subject
	}
	return ""
}
