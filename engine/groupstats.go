package engine

import (
	"cmp"
	"slices"

	"github.com/rocketstore/engine/engine/monitor"
)

// Groups is the consumer groups' state for the monitor: the coordinator's counters and the lag
// of every group with members, the most lagging first (false when the engine serves no groups).
func (s *Server) Groups() (monitor.Groups, bool) {
	if s.api == nil || s.api.Groups() == nil {
		return monitor.Groups{}, false
	}
	c := s.api.Groups()
	st := c.Stats()
	out := monitor.Groups{Groups: st.Groups, Members: st.Members, RebalancesUnderWay: st.RebalancesUnderWay,
		Joins: st.Joins, Leaves: st.Leaves, Expired: st.Expired, Rebalances: st.Rebalances, Commits: st.Commits,
		Fenced: st.Fenced, Redelivered: st.Redelivered}
	for _, key := range c.Active() {
		d, ok := c.Describe(key, s.Engine.offsets.Queues(key.Group, key.Topic), s.groupStore)
		if !ok {
			continue
		}
		out.Lag = append(out.Lag, monitor.GroupLag{Group: key.Group, Topic: key.Topic, Members: len(d.Members),
			Messages: d.LagMessages, AgeSeconds: d.LagTime.Seconds()})
	}
	slices.SortFunc(out.Lag, func(a, b monitor.GroupLag) int {
		return cmp.Or(cmp.Compare(b.Messages, a.Messages), cmp.Compare(a.Group, b.Group), cmp.Compare(a.Topic, b.Topic))
	})
	return out, true
}
