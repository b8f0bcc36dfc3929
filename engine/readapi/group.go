package readapi

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/nats-io/nats.go/micro"
	"github.com/nats-io/nuid"

	"github.com/rocketstore/engine/engine/api"
	"github.com/rocketstore/engine/engine/groups"
	"github.com/rocketstore/engine/internal/reader"
)

// Consumer groups over NATS (docs/GROUPS.md): the coordinator (engine/groups) lives as long as
// the service, since its state is the members' sessions on this connection; the offsets are the
// store's (GroupOffsets).
//
// Members join on the shared subject (every engine of a partitioned deployment answers the
// fan-out one), then talk to the engine that answered on its own prefix, <prefix>.e.<engine id>,
// subscribed without a queue group: the engine that assigned a queue is the one that serves it.

// GroupStore is what consumer groups need of the store: the queues of a topic this engine serves,
// their bounds, and the store time of a message (for lag in time).
type GroupStore interface {
	groups.Store
	groups.LagReader
}

// Groups is the consumer group coordinator, nil when the service has none.
func (s *Service) Groups() *groups.Coordinator { return s.groups }

// EngineAPI is the prefix of this engine's own subjects (members' requests after their join).
func (s *Service) EngineAPI() string { return s.engineAPI }

// startGroups makes the coordinator and registers the group endpoints.
func (s *Service) startGroups(svc micro.Service) error {
	s.engineID = nuid.Next()
	s.engineAPI = s.prefix + ".e." + s.engineID
	s.groups = groups.New(s.cfg.Groups, s.cfg.GroupStore, s.e.GroupOffsets(), s.push)
	type ep struct {
		name, subject, doc string
		h                  micro.HandlerFunc
	}
	shared := []ep{
		{"group_join", api.EndpointGroupJoin, "join a consumer group", s.inline(s.join)},
		{"group_list", api.EndpointGroupList, "consumer groups, paged", s.inline(s.groupList)},
		{"group_describe", api.EndpointGroupDescribe, "a consumer group's members, queues, offsets and lag", s.inline(s.groupDescribe)},
		{"group_reset", api.EndpointGroupReset, "set a consumer group's offsets (no members)", s.inline(s.groupReset)},
		{"group_delete", api.EndpointGroupDelete, "delete a consumer group's offsets (no members)", s.inline(s.groupDelete)},
	}
	own := []ep{
		{"member_join", api.EndpointGroupJoin, "join again, on this engine", s.inline(s.join)},
		{"member_heartbeat", api.EndpointGroupHeartbeat, "a member's heartbeat", s.inline(s.heartbeat)},
		{"member_release", api.EndpointGroupRelease, "release queues asked back, committing", s.inline(s.release)},
		{"member_leave", api.EndpointGroupLeave, "commit and leave", s.inline(s.groupLeave)},
		{"member_commit", api.EndpointCommit, "a member's commit, fenced", s.inline(s.commit)},
		{"member_read", api.EndpointRead, "a member's batched read, fenced", s.handleRead},
	}
	add := func(g micro.Group, eps []ep) error {
		for _, e := range eps {
			if err := g.AddEndpoint(e.name, e.h, micro.WithEndpointSubject(e.subject),
				micro.WithEndpointMetadata(map[string]string{"description": e.doc})); err != nil {
				return fmt.Errorf("read API: endpoint %s: %w", e.subject, err)
			}
		}
		return nil
	}
	if err := add(svc.AddGroup(s.prefix), shared); err != nil {
		return err
	}
	if s.cfg.PartitionCount > 0 {
		// Every engine answers, saying which partitions its answer covers: each coordinates
		// the group on its own partitions.
		fan := make([]ep, len(shared))
		for i, e := range shared {
			if e.subject == api.EndpointGroupDescribe {
				e.h = s.inline(s.groupDescribeHere) // a group this engine has nothing of is an answer
			}
			e.h = s.coveredInline(e.h)
			fan[i] = e
		}
		if err := add(svc.AddGroup(s.prefix+"."+api.FanOutToken, micro.WithGroupQueueGroupDisabled()), fan); err != nil {
			return err
		}
	}
	return add(svc.AddGroup(s.engineAPI, micro.WithGroupQueueGroupDisabled()), own)
}

// coveredInline is h with the fan-out answer's headers: the partitions it covers.
func (s *Service) coveredInline(h micro.HandlerFunc) micro.HandlerFunc {
	return func(req micro.Request) { h(coveredRequest{req, s.covered()}) }
}

// coveredRequest adds headers to every answer of a request.
type coveredRequest struct {
	micro.Request
	h micro.Headers
}

func (r coveredRequest) Respond(data []byte, opts ...micro.RespondOpt) error {
	return r.Request.Respond(data, append(opts, micro.WithHeaders(r.h))...)
}

func (r coveredRequest) Error(code, desc string, data []byte, opts ...micro.RespondOpt) error {
	return r.Request.Error(code, desc, data, append(opts, micro.WithHeaders(r.h))...)
}

// assignment is a groups.Assignment on the wire, from this engine.
func (s *Service) assignment(a groups.Assignment) api.Assignment {
	out := api.Assignment{Engine: s.engineID, API: s.engineAPI, Group: a.Group, Topic: a.Topic, MemberID: a.MemberID,
		Generation: a.Generation, HeartbeatMs: a.HeartbeatInterval.Milliseconds(), SessionTimeoutMs: a.SessionTimeout.Milliseconds(),
		Queues: queuesOut(a.Queues), Revoke: queuesOut(a.Revoke)}
	if s.cfg.PartitionCount > 0 {
		for _, p := range s.cfg.Owned() {
			out.Partitions = append(out.Partitions, int32(p))
		}
	}
	return out
}

func queuesOut(qs []groups.AssignedQueue) []api.AssignedQueue {
	out := make([]api.AssignedQueue, len(qs))
	for i, q := range qs {
		out[i] = api.AssignedQueue{QueueID: q.QueueID, Epoch: q.Epoch, Offset: q.Offset}
	}
	return out
}

// push publishes an assignment to a member's notify subject (the coordinator's Notify). A push
// that fails is logged: the member learns the same at its next heartbeat.
func (s *Service) push(subject string, a groups.Assignment) {
	data, err := marshal(s.assignment(a))
	if err == nil {
		err = s.nc.Publish(subject, data)
	}
	if err != nil {
		s.log.Debug().Err(err).Str("subject", subject).Msg("group: could not push an assignment")
	}
}

func (s *Service) join(data []byte) ([]byte, error) {
	r, err := decodeJoin(data, s.prefix)
	if err != nil {
		return nil, err
	}
	a, err := s.groups.Join(r)
	if errors.Is(err, groups.ErrUnknownTopic) {
		// The coordinator knows a topic once dispatch has made its queues, a moment after the
		// ack of its first message. A read waits for dispatch to reach what was acked when it
		// arrived (internal/reader, "Read what was acked"), and so does a join, through one: a
		// get of the topic, which waits only while dispatch is behind the acks.
		_, _ = s.e.Get(s.ctx, reader.GetRequest{Topic: r.Topic, Max: 1, NoPropertyMap: true})
		a, err = s.groups.Join(r)
	}
	if err != nil {
		return nil, err
	}
	return marshal(s.assignment(a))
}

func (s *Service) heartbeat(data []byte) ([]byte, error) {
	key, member, err := decodeMember(data)
	if err != nil {
		return nil, err
	}
	a, err := s.groups.Heartbeat(key, member)
	if err != nil {
		return nil, err
	}
	return marshal(s.assignment(a))
}

func (s *Service) release(data []byte) ([]byte, error) {
	key, member, qc, err := decodeRelease(data)
	if err != nil {
		return nil, err
	}
	a, err := s.groups.Release(key, member, qc)
	if err != nil {
		return nil, err
	}
	return marshal(s.assignment(a))
}

func (s *Service) groupLeave(data []byte) ([]byte, error) {
	key, member, qc, err := decodeRelease(data)
	if err != nil {
		return nil, err
	}
	if err := s.groups.Leave(key, member, qc); err != nil {
		return nil, err
	}
	return []byte("{}"), nil
}

// commitGroup is a commit: a member's, fenced by the coordinator; or one from outside the
// membership, refused while the group has members (only they move a live group's offsets).
func (s *Service) commitGroup(r api.CommitRequest) error {
	key := groups.Key{Group: r.Group, Topic: r.Topic}
	if r.MemberID != "" {
		if err := checkMemberID(r.MemberID); err != nil {
			return err
		}
		return s.groups.Commit(key, r.MemberID, groups.QueueCommit{QueueID: r.QueueID, Epoch: r.Epoch, Offset: r.Offset})
	}
	return s.groups.WhileIdle(key, func() error { return s.e.CommitOffset(r.Group, r.Topic, r.QueueID, r.Offset) })
}

func (s *Service) groupDescribe(data []byte) ([]byte, error) {
	key, err := decodeGroup(data)
	if err != nil {
		return nil, err
	}
	st, ok := s.describe(key)
	if !ok {
		return nil, fmt.Errorf("%w: no group %q on topic %q (no members, no offsets)", errNoGroup, key.Group, key.Topic)
	}
	return marshal(st)
}

var errNoGroup = errors.New("unknown group")

// groupDescribeHere is describe on the fan-out subject: an engine that has nothing of the group
// answers an empty status (Group ""), which covers its partitions.
func (s *Service) groupDescribeHere(data []byte) ([]byte, error) {
	key, err := decodeGroup(data)
	if err != nil {
		return nil, err
	}
	st, ok := s.describe(key)
	if !ok {
		return marshal(api.GroupStatus{})
	}
	return marshal(st)
}

// describe is a group's state on the wire.
func (s *Service) describe(key groups.Key) (api.GroupStatus, bool) {
	st, ok := s.groups.Describe(key, s.e.GroupOffsets().Queues(key.Group, key.Topic), s.cfg.GroupStore)
	if !ok {
		return api.GroupStatus{}, false
	}
	out := api.GroupStatus{Group: key.Group, Topic: key.Topic, Subject: st.Subject, Members: []api.GroupMember{},
		Queues: []api.GroupQueue{}, Rebalances: []api.GroupRebalance{}, Redelivered: st.Redelivered,
		LagMessages: st.LagMessages, LagMs: st.LagTime.Milliseconds()}
	if s.cfg.PartitionCount > 0 {
		out.Engine = s.engineID
		for _, p := range s.cfg.Owned() {
			out.Partitions = append(out.Partitions, int32(p))
		}
	}
	for _, m := range st.Members {
		out.Members = append(out.Members, api.GroupMember{MemberID: m.ID, ClientID: m.Client, JoinedMs: m.Joined.UnixMilli(),
			Queues: append([]int32{}, m.Queues...)})
	}
	for _, q := range st.Queues {
		gq := api.GroupQueue{QueueID: q.QueueID, Owner: q.Owner, Epoch: q.Epoch, Revoking: q.Revoking, Next: q.Next,
			Committed: -1, MinOffset: q.MinOffset, MaxOffset: q.MaxOffset, LagMessages: q.LagMessages, LagMs: q.LagTime.Milliseconds()}
		if q.HasCommitted {
			gq.Committed, gq.CommitEpoch, gq.CommitMember = q.Committed, q.CommitEpoch, q.CommitMember
			if !q.CommitTime.IsZero() {
				gq.CommitMs = q.CommitTime.UnixMilli()
			}
		}
		out.Queues = append(out.Queues, gq)
	}
	if r := st.Rebalancing; r != nil {
		rb := rebalanceOut(*r)
		out.Rebalancing = &rb
	}
	for _, r := range st.Rebalances {
		out.Rebalances = append(out.Rebalances, rebalanceOut(r))
	}
	return out, true
}

func rebalanceOut(r groups.Rebalance) api.GroupRebalance {
	return api.GroupRebalance{Reason: r.Reason, MemberID: r.Member, StartMs: r.Start.UnixMilli(),
		DurationMs: r.Duration.Milliseconds(), Moved: r.Moved, Redelivered: r.Redelivered}
}

// groupList pages through every group this engine knows: those with members and those with
// offsets, by key (topic@group).
func (s *Service) groupList(data []byte) ([]byte, error) {
	r, err := decodeGroupList(data)
	if err != nil {
		return nil, err
	}
	keys := s.groups.Active()
	for _, k := range s.e.GroupOffsets().Keys() {
		keys = append(keys, groups.Key{Group: k.Group, Topic: k.Topic})
	}
	name := func(k groups.Key) string { return k.String() }
	slices.SortFunc(keys, func(a, b groups.Key) int { return strings.Compare(name(a), name(b)) })
	keys = slices.Compact(keys)
	out := api.GroupListReply{Groups: []api.GroupSummary{}}
	for _, k := range keys {
		if name(k) <= r.After || r.Match != "" && !strings.Contains(k.Group, r.Match) && !strings.Contains(k.Topic, r.Match) {
			continue
		}
		if len(out.Groups) == r.Max {
			out.Truncated = true
			break
		}
		st, ok := s.describe(k)
		if !ok {
			continue
		}
		out.Groups = append(out.Groups, api.GroupSummary{Key: name(k), Group: k.Group, Topic: k.Topic, Members: len(st.Members),
			LagMessages: st.LagMessages, LagMs: st.LagMs, Rebalancing: st.Rebalancing != nil})
	}
	return marshal(out)
}

// groupReset sets a group's offsets in the queues asked (every queue of the topic here by
// default) while it has no members.
func (s *Service) groupReset(data []byte) ([]byte, error) {
	key, r, err := decodeGroupReset(data)
	if err != nil {
		return nil, err
	}
	queues := r.Queues
	if len(queues) == 0 {
		if queues, _ = s.cfg.GroupStore.Queues(key.Topic); len(queues) == 0 {
			return nil, fmt.Errorf("%w: %q has no queue on this engine", groups.ErrUnknownTopic, key.Topic)
		}
	}
	out := api.GroupResetReply{Queues: []api.QueueOffset{}}
	err = s.groups.WhileIdle(key, func() error {
		for _, q := range queues {
			var off int64
			if r.Offset != nil {
				off = *r.Offset
			} else if off, err = s.e.OffsetForTime(key.Topic, q, *r.Timestamp); errors.Is(err, reader.ErrUnknownQueue) {
				off = 0 // a queue with no message yet (a partition's): it starts at 0
			} else if err != nil {
				return err
			}
			if err := s.e.CommitOffset(key.Group, key.Topic, q, off); err != nil {
				return err
			}
			out.Queues = append(out.Queues, api.QueueOffset{QueueID: q, Offset: off})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	s.log.Info().Str("group", key.Group).Str("topic", key.Topic).Any("offsets", out.Queues).Msg("group: offsets reset")
	return marshal(out)
}

func (s *Service) groupDelete(data []byte) ([]byte, error) {
	key, err := decodeGroup(data)
	if err != nil {
		return nil, err
	}
	var deleted bool
	err = s.groups.WhileIdle(key, func() (err error) {
		deleted, err = s.e.GroupOffsets().Delete(key.Group, key.Topic)
		return err
	})
	if err != nil {
		return nil, err
	}
	if deleted {
		s.log.Info().Str("group", key.Group).Str("topic", key.Topic).Msg("group: deleted")
	}
	return marshal(api.GroupDeleteReply{Deleted: deleted})
}
