package console

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"strings"

	"github.com/rocketstore/engine/engine"
	"github.com/rocketstore/engine/engine/groups"
)

// Consumer groups: the list (paged, searchable), one group (members, assignment and epochs,
// each queue's committed offset and lag, rebalances), and the two actions, reset and delete,
// which the access rules guard (access.go) and the coordinator refuses while the group has
// members.

// GroupSummaryJSON is a group in the list.
type GroupSummaryJSON struct {
	Group       string `json:"group"`
	Topic       string `json:"topic"`
	Members     int    `json:"members"`
	LagMessages int64  `json:"lag_messages"`
	LagMs       int64  `json:"lag_ms"`
	Rebalancing bool   `json:"rebalancing"`
}

// GroupJSON is one group on this engine.
type GroupJSON struct {
	GroupSummaryJSON
	Subject     string           `json:"subject,omitempty"`
	MembersList []MemberJSON     `json:"members_list"`
	Queues      []GroupQueueJSON `json:"queues"`
	Rebalance   *RebalanceJSON   `json:"rebalance_under_way,omitempty"`
	Rebalances  []RebalanceJSON  `json:"rebalances"`
	Redelivered int64            `json:"redelivered"`
}

// MemberJSON is a member and the queues it holds.
type MemberJSON struct {
	ID       string  `json:"id"`
	Client   string  `json:"client"`
	JoinedMs int64   `json:"joined_ms"`
	Queues   []int32 `json:"queues"`
}

// GroupQueueJSON is one queue of a group: its owner and epoch, committed offset and lag.
type GroupQueueJSON struct {
	QueueID  int32  `json:"queue_id"`
	Owner    string `json:"owner,omitempty"`
	Epoch    int64  `json:"epoch"`
	Revoking bool   `json:"revoking,omitempty"`
	// Committed is -1 when the group has committed nothing in the queue.
	Committed    int64  `json:"committed"`
	CommitMember string `json:"commit_member,omitempty"`
	CommitMs     int64  `json:"commit_ms,omitempty"`
	Min          int64  `json:"min_offset"`
	Max          int64  `json:"max_offset"`
	LagMessages  int64  `json:"lag_messages"`
	LagMs        int64  `json:"lag_ms"`
}

// RebalanceJSON is one rebalance.
type RebalanceJSON struct {
	Reason      string `json:"reason"`
	Member      string `json:"member,omitempty"`
	StartMs     int64  `json:"start_ms"`
	DurationMs  int64  `json:"duration_ms"`
	Moved       int    `json:"moved"`
	Redelivered int64  `json:"redelivered"`
}

func groupJSON(st groups.GroupStatus) GroupJSON {
	out := GroupJSON{GroupSummaryJSON: summaryOf(st), Subject: st.Subject, MembersList: []MemberJSON{},
		Queues: []GroupQueueJSON{}, Rebalances: []RebalanceJSON{}, Redelivered: st.Redelivered}
	for _, m := range st.Members {
		out.MembersList = append(out.MembersList, MemberJSON{ID: m.ID, Client: m.Client, JoinedMs: m.Joined.UnixMilli(),
			Queues: append([]int32{}, m.Queues...)})
	}
	for _, q := range st.Queues {
		gq := GroupQueueJSON{QueueID: q.QueueID, Owner: q.Owner, Epoch: q.Epoch, Revoking: q.Revoking, Committed: -1,
			Min: q.MinOffset, Max: q.MaxOffset, LagMessages: q.LagMessages, LagMs: q.LagTime.Milliseconds()}
		if q.HasCommitted {
			gq.Committed, gq.CommitMember = q.Committed, q.CommitMember
			if !q.CommitTime.IsZero() {
				gq.CommitMs = q.CommitTime.UnixMilli()
			}
		}
		out.Queues = append(out.Queues, gq)
	}
	if r := st.Rebalancing; r != nil {
		rb := rebalanceJSON(*r)
		out.Rebalance = &rb
	}
	for i := len(st.Rebalances) - 1; i >= 0; i-- { // newest first
		out.Rebalances = append(out.Rebalances, rebalanceJSON(st.Rebalances[i]))
	}
	return out
}

func summaryOf(st groups.GroupStatus) GroupSummaryJSON {
	return GroupSummaryJSON{Group: st.Group, Topic: st.Topic, Members: len(st.Members), LagMessages: st.LagMessages,
		LagMs: st.LagTime.Milliseconds(), Rebalancing: st.Rebalancing != nil}
}

func rebalanceJSON(r groups.Rebalance) RebalanceJSON {
	return RebalanceJSON{Reason: r.Reason, Member: r.Member, StartMs: r.Start.UnixMilli(), DurationMs: r.Duration.Milliseconds(),
		Moved: r.Moved, Redelivered: r.Redelivered}
}

// groupCursor names a group in a list's cursor: base64url of topic NUL group (names may hold any
// character but NUL).
func groupCursor(k groups.Key) string {
	return base64.RawURLEncoding.EncodeToString([]byte(k.Topic + "\x00" + k.Group))
}

func parseGroupCursor(s string) (groups.Key, bool) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return groups.Key{}, false
	}
	topic, group, ok := strings.Cut(string(b), "\x00")
	return groups.Key{Topic: topic, Group: group}, ok
}

// afterKey orders keys as GroupKeys lists them: by topic, then group.
func afterKey(k, after groups.Key) bool {
	return k.Topic > after.Topic || k.Topic == after.Topic && k.Group > after.Group
}

// groupsOf is the attached engine's groups, or a 404 answered.
func (c *Console) groupsOf(w http.ResponseWriter) (Groups, bool) {
	t := c.attached()
	if t == nil {
		fail(w, http.StatusServiceUnavailable, errNotAttached.Error())
		return nil, false
	}
	if t.Groups == nil {
		fail(w, http.StatusNotFound, engine.ErrNoGroups.Error())
		return nil, false
	}
	return t.Groups, true
}

// groupList is GET /console/api/groups?q=TEXT&after=CURSOR&limit=N.
func (c *Console) groupList(w http.ResponseWriter, r *http.Request) {
	gs, ok := c.groupsOf(w)
	if !ok {
		return
	}
	q := strings.ToLower(r.URL.Query().Get("q"))
	limit := pageSize(r)
	var after groups.Key
	hasAfter := false
	if s := r.URL.Query().Get("after"); s != "" {
		if after, hasAfter = parseGroupCursor(s); !hasAfter {
			fail(w, http.StatusBadRequest, "after: not a cursor of this list")
			return
		}
	}
	out := struct {
		Total  int                `json:"total"`
		Groups []GroupSummaryJSON `json:"groups"`
		Next   string             `json:"next,omitempty"`
	}{Groups: []GroupSummaryJSON{}}
	var last groups.Key
	for _, k := range gs.GroupKeys() {
		if q != "" && !strings.Contains(strings.ToLower(k.Group), q) && !strings.Contains(strings.ToLower(k.Topic), q) {
			continue
		}
		out.Total++
		if hasAfter && !afterKey(k, after) || out.Next != "" {
			continue
		}
		if len(out.Groups) == limit {
			out.Next = groupCursor(last)
			continue
		}
		st, ok := gs.DescribeGroup(k)
		if !ok {
			continue // gone since the list
		}
		out.Groups = append(out.Groups, summaryOf(st))
		last = k
	}
	reply(w, out)
}

// group is GET /console/api/group?topic=T&group=G.
func (c *Console) group(w http.ResponseWriter, r *http.Request) {
	gs, ok := c.groupsOf(w)
	if !ok {
		return
	}
	key := groups.Key{Topic: r.URL.Query().Get("topic"), Group: r.URL.Query().Get("group")}
	st, ok := gs.DescribeGroup(key)
	if !ok {
		fail(w, http.StatusNotFound, "no group "+quote(key.Group)+" on topic "+quote(key.Topic)+" (no members, no offsets)")
		return
	}
	reply(w, groupJSON(st))
}

func quote(s string) string { b, _ := json.Marshal(s); return string(b) }

// groupAction is the body of a reset or a delete.
type groupAction struct {
	Topic string `json:"topic"`
	Group string `json:"group"`
	// To is where a reset goes: earliest, latest, offset (Offset) or time (Time, ms).
	To     string `json:"to"`
	Offset *int64 `json:"offset"`
	Time   *int64 `json:"time"`
}

func decodeAction(w http.ResponseWriter, r *http.Request) (groupAction, bool) {
	var a groupAction
	dec := json.NewDecoder(io.LimitReader(r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		fail(w, http.StatusBadRequest, "the body is not a group action: "+err.Error())
		return a, false
	}
	if a.Topic == "" || a.Group == "" {
		fail(w, http.StatusBadRequest, "a group action needs a topic and a group")
		return a, false
	}
	return a, true
}

// groupReset is POST /console/api/group/reset.
func (c *Console) groupReset(w http.ResponseWriter, r *http.Request) {
	gs, ok := c.groupsOf(w)
	if !ok {
		return
	}
	a, ok := decodeAction(w, r)
	if !ok {
		return
	}
	var to engine.GroupReset
	switch a.To {
	case "earliest":
		zero := int64(0) // below every queue's first offset: the group reads from it
		to.Offset = &zero
	case "latest":
		end := int64(math.MaxInt64) // after every message: each queue's end
		to.Time = &end
	case "offset":
		to.Offset = a.Offset
	case "time":
		to.Time = a.Time
	}
	if to.Offset == nil && to.Time == nil || to.Offset != nil && *to.Offset < 0 {
		fail(w, http.StatusBadRequest, `a reset goes "to": "earliest", "latest", "offset" (with "offset" >= 0) or "time" (with "time" in ms)`)
		return
	}
	qs, err := gs.ResetGroup(groups.Key{Topic: a.Topic, Group: a.Group}, to)
	if err != nil {
		groupError(w, err)
		return
	}
	c.opts.Logger.Info().Str("group", a.Group).Str("topic", a.Topic).Str("to", a.To).Str("user", c.access.userOf(r)).
		Msg("console: group offsets reset")
	type qo struct {
		QueueID int32 `json:"queue_id"`
		Offset  int64 `json:"offset"`
	}
	out := []qo{}
	for _, q := range qs {
		out = append(out, qo{q.QueueID, q.Offset})
	}
	reply(w, map[string]any{"queues": out})
}

// groupDelete is POST /console/api/group/delete.
func (c *Console) groupDelete(w http.ResponseWriter, r *http.Request) {
	gs, ok := c.groupsOf(w)
	if !ok {
		return
	}
	a, ok := decodeAction(w, r)
	if !ok {
		return
	}
	deleted, err := gs.DeleteGroup(groups.Key{Topic: a.Topic, Group: a.Group})
	if err != nil {
		groupError(w, err)
		return
	}
	c.opts.Logger.Info().Str("group", a.Group).Str("topic", a.Topic).Bool("deleted", deleted).Str("user", c.access.userOf(r)).
		Msg("console: group deleted")
	reply(w, map[string]any{"deleted": deleted})
}

func groupError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, groups.ErrConflict):
		fail(w, http.StatusConflict, err.Error())
	case errors.Is(err, groups.ErrUnknownTopic), errors.Is(err, engine.ErrNoGroups):
		fail(w, http.StatusNotFound, err.Error())
	case errors.Is(err, groups.ErrInvalid), errors.Is(err, engine.ErrInvalidGroup):
		fail(w, http.StatusBadRequest, err.Error())
	default:
		readError(w, err)
	}
}
