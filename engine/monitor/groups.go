package monitor

import "github.com/prometheus/client_golang/prometheus"

// Consumer groups (docs/GROUPS.md) as the monitor shows them: counters of the coordinator's
// events, and the lag of the groups with members. The lag gauges carry the group and topic as
// labels, for at most MaxLagGroups groups (the most lagging), so that the label set stays
// bounded however many groups there are; every group is in `engine groups list`.

// MaxLagGroups bounds the groups whose lag /metrics labels.
const MaxLagGroups = 100

// Groups is the consumer groups' state.
type Groups struct {
	// Groups have members now; Members in all.
	Groups, Members, RebalancesUnderWay int
	// Counters since the engine started.
	Joins, Leaves, Expired, Rebalances, Commits, Fenced, Redelivered int64
	// Lag lists groups with members, the most lagging first, at most MaxLagGroups.
	Lag []GroupLag
}

// GroupLag is one group's lag: messages not yet committed, and how long ago the first of them
// was stored.
type GroupLag struct {
	Group      string  `json:"group"`
	Topic      string  `json:"topic"`
	Members    int     `json:"members"`
	Messages   int64   `json:"lag_messages"`
	AgeSeconds float64 `json:"lag_seconds"`
}

// GroupServer is a Server that serves consumer groups (engine.Server is one).
type GroupServer interface {
	// Groups is false when the engine serves none (no read API).
	Groups() (Groups, bool)
}

var (
	descGroups      = newDesc("groups", "Consumer groups with members now.")
	descGroupMems   = newDesc("group_members", "Members of every consumer group.")
	descGroupEvents = newDesc("group_events_total", "Consumer group events: join, leave (clean), expire (session ran out), rebalance, commit, fenced (a read, commit or release refused: the member no longer holds the queue at that epoch).", "event")
	descGroupRedel  = newDesc("group_redelivered_messages_total", "Messages handed out again after a member ended without committing them (kill -9, a session run out).")
	descGroupRebal  = newDesc("group_rebalances_under_way", "Groups whose rebalance is under way: a queue being released or not yet taken.")
	descGroupLag    = newDesc("group_lag_messages", "Messages of a group's topic not yet committed by it (the most lagging groups with members, at most 100).", "group", "topic")
	descGroupLagAge = newDesc("group_lag_seconds", "How long ago the first message a group has not committed was stored (as group_lag_messages).", "group", "topic")
	groupDescs      = []*prometheus.Desc{descGroups, descGroupMems, descGroupEvents, descGroupRedel, descGroupRebal, descGroupLag, descGroupLagAge}
)

// collectGroups reports the groups of srv, if it serves any.
func collectGroups(srv Server, ch chan<- prometheus.Metric) {
	gs, ok := srv.(GroupServer)
	if !ok {
		return
	}
	g, ok := gs.Groups()
	if !ok {
		return
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(event string, v int64) {
		ch <- prometheus.MustNewConstMetric(descGroupEvents, prometheus.CounterValue, float64(v), event)
	}
	gauge(descGroups, float64(g.Groups))
	gauge(descGroupMems, float64(g.Members))
	gauge(descGroupRebal, float64(g.RebalancesUnderWay))
	counter("join", g.Joins)
	counter("leave", g.Leaves)
	counter("expire", g.Expired)
	counter("rebalance", g.Rebalances)
	counter("commit", g.Commits)
	counter("fenced", g.Fenced)
	ch <- prometheus.MustNewConstMetric(descGroupRedel, prometheus.CounterValue, float64(g.Redelivered))
	for _, l := range g.Lag[:min(len(g.Lag), MaxLagGroups)] {
		gauge(descGroupLag, float64(l.Messages), l.Group, l.Topic)
		gauge(descGroupLagAge, l.AgeSeconds, l.Group, l.Topic)
	}
}

// StatusGroups is /status's "groups".
type StatusGroups struct {
	Groups             int        `json:"groups"`
	Members            int        `json:"members"`
	RebalancesUnderWay int        `json:"rebalances_under_way"`
	Joins              int64      `json:"joins"`
	Leaves             int64      `json:"leaves"`
	Expired            int64      `json:"expired"`
	Rebalances         int64      `json:"rebalances"`
	Commits            int64      `json:"commits"`
	Fenced             int64      `json:"fenced"`
	Redelivered        int64      `json:"redelivered"`
	Lag                []GroupLag `json:"lag"`
}

func statusGroups(srv Server) *StatusGroups {
	gs, ok := srv.(GroupServer)
	if !ok {
		return nil
	}
	g, ok := gs.Groups()
	if !ok {
		return nil
	}
	lag := g.Lag
	if lag == nil {
		lag = []GroupLag{}
	}
	return &StatusGroups{Groups: g.Groups, Members: g.Members, RebalancesUnderWay: g.RebalancesUnderWay, Joins: g.Joins,
		Leaves: g.Leaves, Expired: g.Expired, Rebalances: g.Rebalances, Commits: g.Commits, Fenced: g.Fenced,
		Redelivered: g.Redelivered, Lag: lag[:min(len(lag), MaxLagGroups)]}
}
