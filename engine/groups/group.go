package groups

import (
	"slices"
	"time"
)

// group is one group on one topic: its members and the state of each of its queues.
type group struct {
	key     Key
	subject string
	start   StartPolicy
	// generation is the coordinator's epoch at the group's last change of assignment: it
	// orders the assignments its members are sent. Every queue taken gets an epoch of its own
	// from the same counter, so an epoch names one owner's hold of one queue.
	generation int64
	members    map[string]*member
	queues     map[int32]*queueState
	// rebalance is the one under way (nil when the group is stable); history the last ones.
	rebalance   *Rebalance
	history     []Rebalance
	moved       int   // queues taken since the rebalance under way started
	redelivered int64 // messages redelivered, since the group was created here
}

func newGroup(key Key, subject string, start StartPolicy) *group {
	return &group{key: key, subject: subject, start: start, members: make(map[string]*member), queues: make(map[int32]*queueState)}
}

// member is one member of a group.
type member struct {
	id, client, notify string
	joined             time.Time
	// timer runs out SessionTimeout after the member was last heard of (its join, heartbeats,
	// commits, reads): it then expires.
	timer *time.Timer
}

// queueState is one queue of a group.
type queueState struct {
	id int32
	// owner holds the queue at epoch; "" when nobody does.
	owner string
	epoch int64
	// revoking: the owner was asked to release it, for next.
	revoking    bool
	next        string
	revokeTimer *time.Timer
	// served is the end of what the current owner was handed. When an owner ends without
	// releasing (its session, or its time to release, ran out), [redeliverFrom, redeliverTo) is
	// what it was handed past its last commit: the next owner's reads of it are redeliveries.
	served                     int64
	redeliverFrom, redeliverTo int64
}

// take gives the queue to member at epoch.
func (q *queueState) take(member string, epoch int64) {
	q.owner, q.epoch, q.revoking, q.next, q.served = member, epoch, false, "", 0
	q.stopRevokeTimer()
}

// free lets the queue go: nobody holds it until the next rebalance gives it away.
func (q *queueState) free() {
	q.owner, q.revoking = "", false
	q.stopRevokeTimer()
}

// lost records that the owner ended without releasing the queue, committed at committed.
func (q *queueState) lost(committed int64) {
	if q.redeliverTo > q.redeliverFrom { // an earlier loss not yet read again
		committed = min(committed, q.redeliverFrom)
	}
	q.redeliverFrom, q.redeliverTo = committed, max(q.redeliverTo, q.served)
}

func (q *queueState) stopRevokeTimer() {
	if q.revokeTimer != nil {
		q.revokeTimer.Stop()
		q.revokeTimer = nil
	}
}

// stable says every queue is held by its member and none is being revoked.
func (g *group) stable() bool {
	if len(g.members) == 0 {
		return true
	}
	for _, q := range g.queues {
		if q.owner == "" || q.revoking {
			return false
		}
	}
	return true
}

// Rebalance is one rebalance of a group: what started it, when, how long until every queue was
// held again by its member, how many queues moved and how many messages were delivered again
// because of it (counted as the new owners read them).
type Rebalance struct {
	Reason string // join, leave, session timeout, revoke timeout
	Member string // the member that joined or left
	Start  time.Time
	// Duration is 0 while it is under way.
	Duration    time.Duration
	Moved       int
	Redelivered int64
}

func (g *group) startRebalance(now time.Time, reason, member string) {
	if g.rebalance != nil {
		g.finishRebalance(now) // superseded: it ends here, the new one carries on
	}
	g.moved = 0
	g.rebalance = &Rebalance{Reason: reason, Member: member, Start: now}
}

// finishRebalance ends the rebalance under way, if any, and returns it.
func (g *group) finishRebalance(now time.Time) *Rebalance {
	r := g.rebalance
	if r == nil {
		return nil
	}
	r.Duration = max(now.Sub(r.Start), time.Nanosecond)
	r.Moved = g.moved
	g.rebalance = nil
	g.history = append(g.history, *r)
	if len(g.history) > rebalanceHistory {
		g.history = slices.Delete(g.history, 0, len(g.history)-rebalanceHistory)
	}
	return r
}

// lastRebalance is the rebalance under way, else the last one done.
func (g *group) lastRebalance() *Rebalance {
	if g.rebalance != nil {
		return g.rebalance
	}
	if n := len(g.history); n > 0 {
		return &g.history[n-1]
	}
	return nil
}

// Assignment is what a member may read and what it must give up.
type Assignment struct {
	Group, Topic, MemberID string
	// Generation orders a member's assignments: one older than the last it saw is stale.
	Generation int64
	// Queues are the queues the member holds and may read, each from Offset (where the group
	// committed, or where it starts) when it is new to the member.
	Queues []AssignedQueue
	// Revoke are queues the member holds and must release: stop reading, commit where it
	// stopped, and Release them.
	Revoke []AssignedQueue
	// HeartbeatInterval and SessionTimeout are the coordinator's.
	HeartbeatInterval, SessionTimeout time.Duration
}

// AssignedQueue is one queue of an Assignment.
type AssignedQueue struct {
	QueueID int32
	Epoch   int64
	Offset  int64
}

func (g *group) assignment(m *member, c *Coordinator) Assignment {
	a := Assignment{Group: g.key.Group, Topic: g.key.Topic, MemberID: m.id, Generation: g.generation,
		HeartbeatInterval: c.cfg.HeartbeatInterval, SessionTimeout: c.cfg.SessionTimeout}
	ids := make([]int32, 0, len(g.queues))
	for id, q := range g.queues {
		if q.owner == m.id {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		q := g.queues[id]
		aq := AssignedQueue{QueueID: id, Epoch: q.epoch, Offset: c.offsetLocked(g, id)}
		if q.revoking {
			a.Revoke = append(a.Revoke, aq)
		} else {
			a.Queues = append(a.Queues, aq)
		}
	}
	return a
}
