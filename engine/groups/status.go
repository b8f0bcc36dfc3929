package groups

import (
	"fmt"
	"slices"
	"time"

	"github.com/rocketstore/engine/internal/store/offsets"
)

// Stats are the coordinator's counters since its start and its gauges now.
type Stats struct {
	Groups, Members                             int   // groups with members; their members
	Joins, Leaves, Expired, Rebalances, Commits int64 // events
	Fenced                                      int64 // reads, commits and releases refused
	Redelivered                                 int64 // messages handed out again after an owner ended without committing them
	RebalancesUnderWay                          int
}

// Stats returns the counters and gauges.
func (c *Coordinator) Stats() Stats {
	c.mu.Lock()
	s := Stats{Groups: len(c.groups), Members: c.members}
	for _, g := range c.groups {
		if g.rebalance != nil {
			s.RebalancesUnderWay++
		}
	}
	c.mu.Unlock()
	s.Joins, s.Leaves, s.Expired = c.stats.joins.Load(), c.stats.leaves.Load(), c.stats.expired.Load()
	s.Rebalances, s.Commits = c.stats.rebalances.Load(), c.stats.commits.Load()
	s.Fenced, s.Redelivered = c.stats.fenced.Load(), c.stats.redelivered.Load()
	return s
}

// Active lists the groups that have members now, sorted by group, then topic.
func (c *Coordinator) Active() []Key {
	c.mu.Lock()
	out := make([]Key, 0, len(c.groups))
	for k, g := range c.groups {
		if len(g.members) > 0 {
			out = append(out, k)
		}
	}
	c.mu.Unlock()
	slices.SortFunc(out, compareKeys)
	return out
}

func compareKeys(a, b Key) int {
	if a.Group != b.Group {
		if a.Group < b.Group {
			return -1
		}
		return 1
	}
	switch {
	case a.Topic < b.Topic:
		return -1
	case a.Topic > b.Topic:
		return 1
	}
	return 0
}

// GroupStatus is a group's state on this engine: members, each queue's owner, committed offset
// and lag, and its rebalances.
type GroupStatus struct {
	Key
	Subject string
	Members []MemberStatus
	Queues  []QueueStatus
	// Rebalancing is the rebalance under way, nil when the group is stable.
	Rebalancing *Rebalance
	// Rebalances are the last ones done, oldest first.
	Rebalances  []Rebalance
	Redelivered int64
	// LagMessages sums the queues' lags; LagTime is the largest.
	LagMessages int64
	LagTime     time.Duration
}

// MemberStatus is one member of a group.
type MemberStatus struct {
	ID, Client string
	Joined     time.Time
	Queues     []int32
}

// QueueStatus is one queue of a group.
type QueueStatus struct {
	QueueID int32
	// Owner holds it at Epoch ("" when nobody does); Revoking says the owner was asked to give
	// it up, for Next.
	Owner    string
	Epoch    int64
	Revoking bool
	Next     string
	// Committed is the group's committed offset (HasCommitted false: none yet, the group starts
	// at MinOffset), with who committed it and when.
	Committed    int64
	HasCommitted bool
	CommitEpoch  int64
	CommitMember string
	CommitTime   time.Time
	// MinOffset and MaxOffset are the queue's bounds.
	MinOffset, MaxOffset int64
	// LagMessages = MaxOffset - the offset the group reads next; LagTime is how long ago that
	// message was stored (0 when there is none).
	LagMessages int64
	LagTime     time.Duration
}

// LagReader gives the store time of a queue's message, for the lag in time.
type LagReader interface {
	// StoreTime returns the store time of the message at offset, false when there is none.
	StoreTime(topic string, queueID int32, offset int64) (time.Time, bool)
}

// Describe returns the state of a group on this engine: its members and assignment if it has
// members, and for every queue of its topic the committed offset and lag (from the table, also
// for a group without members). ok is false when the group has neither members nor offsets.
func (c *Coordinator) Describe(key Key, offs map[int32]offsets.Offset, lag LagReader) (GroupStatus, bool) {
	queues, _ := c.store.Queues(key.Topic)
	c.mu.Lock()
	g := c.groups[key]
	st := GroupStatus{Key: key}
	if g != nil {
		st.Subject, st.Redelivered = g.subject, g.redelivered
		if g.rebalance != nil {
			r := *g.rebalance
			st.Rebalancing = &r
		}
		st.Rebalances = slices.Clone(g.history)
		for _, m := range g.members {
			st.Members = append(st.Members, MemberStatus{ID: m.id, Client: m.client, Joined: m.joined})
		}
	}
	ids := slices.Clone(queues)
	if g != nil {
		for id := range g.queues {
			if !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
	}
	for id := range offs {
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		qs := QueueStatus{QueueID: id}
		if g != nil {
			if q := g.queues[id]; q != nil {
				qs.Owner, qs.Epoch, qs.Revoking, qs.Next = q.owner, q.epoch, q.revoking, q.next
			}
		}
		st.Queues = append(st.Queues, qs)
	}
	c.mu.Unlock()
	if g == nil && len(offs) == 0 {
		return st, false
	}
	slices.SortFunc(st.Members, func(a, b MemberStatus) int {
		if a.ID < b.ID {
			return -1
		}
		return 1
	})
	for i := range st.Members {
		for _, q := range st.Queues {
			if q.Owner == st.Members[i].ID {
				st.Members[i].Queues = append(st.Members[i].Queues, q.QueueID)
			}
		}
	}
	now := time.Now()
	for i := range st.Queues {
		q := &st.Queues[i]
		q.MinOffset, q.MaxOffset = c.store.Bounds(key.Topic, q.QueueID)
		next := q.MinOffset
		if o, ok := offs[q.QueueID]; ok {
			q.Committed, q.HasCommitted, q.CommitEpoch, q.CommitMember = o.Offset, true, o.Epoch, o.Member
			if o.Time != 0 {
				q.CommitTime = time.UnixMilli(o.Time)
			}
			next = max(o.Offset, q.MinOffset)
		}
		q.LagMessages = max(q.MaxOffset-next, 0)
		if q.LagMessages > 0 && lag != nil {
			if t, ok := lag.StoreTime(key.Topic, q.QueueID, next); ok {
				q.LagTime = max(now.Sub(t), 0)
			}
		}
		st.LagMessages += q.LagMessages
		st.LagTime = max(st.LagTime, q.LagTime)
	}
	return st, true
}

// WhileIdle runs fn, which changes the group's offsets (a reset, a delete), only if the group
// has no members, and with no member able to join until fn returns; otherwise the error
// (ErrConflict) says how many members it has.
func (c *Coordinator) WhileIdle(key Key, fn func() error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	if g := c.groups[key]; g != nil && len(g.members) > 0 {
		return fmt.Errorf("%w: group %q has %d members on %q: stop them (they commit and leave) before its offsets are changed",
			ErrConflict, key.Group, len(g.members), key.Topic)
	}
	return fn()
}
