package api

import (
	"cmp"
	"context"
	"slices"
)

// Looking at consumer groups, resetting and deleting them (docs/GROUPS.md). With WithPartitions
// every engine answers for its own partitions and the answers are merged; one that does not
// answer makes the result partial (*PartialError), never silently short.

// GroupList lists groups, paged (GroupListRequest).
func (c *Client) GroupList(ctx context.Context, req GroupListRequest) (*GroupListReply, error) {
	if c.partitions == 0 {
		var out GroupListReply
		return &out, c.requestTo(ctx, Subject(c.prefix, EndpointGroupList), 0, req, &out)
	}
	byKey := map[string]*GroupSummary{}
	truncated := false
	err := gather(ctx, c, EndpointGroupList, req, func(r *GroupListReply) {
		truncated = truncated || r.Truncated
		for _, g := range r.Groups {
			if m := byKey[g.Key]; m != nil {
				m.Members = max(m.Members, g.Members) // a member joins every engine
				m.LagMessages += g.LagMessages
				m.LagMs = max(m.LagMs, g.LagMs)
				m.Rebalancing = m.Rebalancing || g.Rebalancing
				continue
			}
			byKey[g.Key] = &g
		}
	})
	out := &GroupListReply{Groups: []GroupSummary{}, Truncated: truncated}
	for _, g := range byKey {
		out.Groups = append(out.Groups, *g)
	}
	slices.SortFunc(out.Groups, func(a, b GroupSummary) int { return cmp.Compare(a.Key, b.Key) })
	if max := cmp.Or(req.Max, DefaultGroupListMax); len(out.Groups) > max {
		out.Groups, out.Truncated = out.Groups[:max], true
	}
	return out, err
}

// GroupDescribe returns a group's members, queues, offsets, lag and rebalances; 404 when no
// engine has the group (no members, no offsets).
func (c *Client) GroupDescribe(ctx context.Context, group, topic string) (*GroupStatus, error) {
	req := GroupRequest{Group: group, Topic: topic}
	if c.partitions == 0 {
		var out GroupStatus
		return &out, c.requestTo(ctx, Subject(c.prefix, EndpointGroupDescribe), 0, req, &out)
	}
	out := &GroupStatus{Group: group, Topic: topic, Members: []GroupMember{}, Queues: []GroupQueue{}, Rebalances: []GroupRebalance{}}
	found := false
	err := gather(ctx, c, EndpointGroupDescribe, req, func(st *GroupStatus) {
		if st.Group == "" {
			return // an engine without the group: its partitions hold nothing of it
		}
		found = true
		out.Subject = cmp.Or(out.Subject, st.Subject)
		for _, m := range st.Members {
			i := slices.IndexFunc(out.Members, func(x GroupMember) bool { return x.MemberID == m.MemberID })
			if i < 0 {
				out.Members = append(out.Members, m)
				continue
			}
			out.Members[i].Queues = append(out.Members[i].Queues, m.Queues...)
			slices.Sort(out.Members[i].Queues)
		}
		out.Queues = append(out.Queues, st.Queues...)
		out.Rebalances = append(out.Rebalances, st.Rebalances...)
		if st.Rebalancing != nil {
			out.Rebalancing = st.Rebalancing
		}
		out.Redelivered += st.Redelivered
		out.LagMessages += st.LagMessages
		out.LagMs = max(out.LagMs, st.LagMs)
	})
	slices.SortFunc(out.Queues, func(a, b GroupQueue) int { return cmp.Compare(a.QueueID, b.QueueID) })
	slices.SortFunc(out.Rebalances, func(a, b GroupRebalance) int { return cmp.Compare(a.StartMs, b.StartMs) })
	if err == nil && !found {
		return nil, &Error{Code: CodeNotFound, Description: "no engine has group " + group + " on topic " + topic}
	}
	return out, err
}

// GroupReset sets a group's offsets (GroupResetRequest); refused (409) while it has members.
func (c *Client) GroupReset(ctx context.Context, req GroupResetRequest) (*GroupResetReply, error) {
	if c.partitions == 0 {
		var out GroupResetReply
		return &out, c.requestTo(ctx, Subject(c.prefix, EndpointGroupReset), 0, req, &out)
	}
	out := &GroupResetReply{Queues: []QueueOffset{}}
	err := gather(ctx, c, EndpointGroupReset, req, func(r *GroupResetReply) { out.Queues = append(out.Queues, r.Queues...) })
	slices.SortFunc(out.Queues, func(a, b QueueOffset) int { return cmp.Compare(a.QueueID, b.QueueID) })
	return out, err
}

// GroupDelete deletes a group's offsets; refused (409) while it has members.
func (c *Client) GroupDelete(ctx context.Context, group, topic string) (*GroupDeleteReply, error) {
	req := GroupRequest{Group: group, Topic: topic}
	if c.partitions == 0 {
		var out GroupDeleteReply
		return &out, c.requestTo(ctx, Subject(c.prefix, EndpointGroupDelete), 0, req, &out)
	}
	out := &GroupDeleteReply{}
	err := gather(ctx, c, EndpointGroupDelete, req, func(r *GroupDeleteReply) { out.Deleted = out.Deleted || r.Deleted })
	return out, err
}
