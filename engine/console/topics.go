package console

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rocketstore/engine/engine"
	"github.com/rocketstore/engine/stages/ingress/route"
)

// Topics, paged and searchable: a page reads the bounds of its own topics only (a store may
// have thousands), and the list is never rendered whole.

// Page sizes of the lists.
const (
	defaultPage = 50
	maxPage     = 500
)

// pageSize is the limit parameter, within [1, maxPage].
func pageSize(r *http.Request) int {
	n, err := strconv.Atoi(r.URL.Query().Get("limit"))
	if err != nil || n <= 0 {
		return defaultPage
	}
	return min(n, maxPage)
}

// QueueJSON is one queue of a topic.
type QueueJSON struct {
	QueueID int32 `json:"queue_id"`
	Min     int64 `json:"min_offset"`
	Max     int64 `json:"max_offset"`
	// MinTime and MaxTime are the store times (ms) of the first and last messages kept: the
	// retained time span (0 when the queue is empty or the record is gone).
	MinTime int64 `json:"min_time"`
	MaxTime int64 `json:"max_time"`
	// LastMinute is how many of its messages were stored in the last minute.
	LastMinute int64 `json:"last_minute"`
}

// TopicJSON is a topic as the console lists it.
type TopicJSON struct {
	Name string `json:"name"`
	// Subject is the subject the default rule maps to it ("" when it is not one: a declared
	// topic, the token rule, _overflow).
	Subject string `json:"subject,omitempty"`
	// Declared names the patterns that store into it; Overflow says it is _overflow.
	Declared []string    `json:"declared,omitempty"`
	Overflow bool        `json:"overflow,omitempty"`
	Queues   []QueueJSON `json:"queues"`
	// Messages are the messages kept (sum of max - min); MinTime and MaxTime the span kept.
	Messages   int64 `json:"messages"`
	MinTime    int64 `json:"min_time"`
	MaxTime    int64 `json:"max_time"`
	LastMinute int64 `json:"last_minute"`
}

// RoutingJSON is the subject-to-topic rule.
type RoutingJSON struct {
	Subjects    []string      `json:"subjects"`
	TopicTokens int           `json:"topic_tokens"`
	Patterns    []PatternJSON `json:"patterns"`
	MaxTopics   int           `json:"max_topics"` // -1: no limit
	RuleTopics  int           `json:"rule_topics"`
	Overflowed  int64         `json:"overflowed"`
	Overflow    string        `json:"overflow_topic"`
	Queues      int           `json:"queues_per_topic"`
}

// PatternJSON is a declared topic.
type PatternJSON struct {
	Subjects string `json:"subjects"`
	Topic    string `json:"topic"`
}

func (c *Console) routing() (engine.Routing, bool) {
	if t := c.attached(); t != nil && t.Routing != nil {
		return t.Routing(), true
	}
	return engine.Routing{}, false
}

func routingJSON(r engine.Routing) RoutingJSON {
	out := RoutingJSON{Subjects: r.Subjects, TopicTokens: r.TopicTokens, Patterns: []PatternJSON{}, MaxTopics: r.MaxTopics,
		RuleTopics: r.RuleTopics, Overflowed: r.Overflowed, Overflow: r.OverflowTopic, Queues: r.QueuesPerTopic}
	for _, p := range r.Patterns {
		out.Patterns = append(out.Patterns, PatternJSON{Subjects: p.Subjects, Topic: p.Topic})
	}
	return out
}

// describeTopic reads a topic's queues: bounds, retained span, last minute.
func describeTopic(st Store, name string, r engine.Routing, now time.Time) (TopicJSON, error) {
	t := TopicJSON{Name: name, Queues: []QueueJSON{}, Overflow: name == route.OverflowTopic}
	for _, p := range r.Patterns {
		if p.Topic == name {
			t.Declared = append(t.Declared, p.Subjects)
		}
	}
	if !t.Overflow && len(t.Declared) == 0 && r.TopicTokens == 0 {
		if s, err := route.TopicToSubject(name); err == nil {
			t.Subject = s
		}
	}
	qos, err := st.QueueOffsets(name)
	if err != nil {
		return t, err
	}
	minute := now.Add(-time.Minute).UnixMilli()
	for _, qo := range qos {
		q := QueueJSON{QueueID: qo.QueueID, Min: qo.Min, Max: qo.Max, MinTime: qo.MinStoreTime, MaxTime: qo.MaxStoreTime}
		if qo.Max > qo.Min && qo.MaxStoreTime >= minute {
			if off, err := st.OffsetForTime(name, qo.QueueID, minute); err == nil {
				q.LastMinute = max(qo.Max-off, 0)
			}
		}
		t.Queues = append(t.Queues, q)
		t.Messages += max(qo.Max-qo.Min, 0)
		t.LastMinute += q.LastMinute
		if q.MinTime > 0 && (t.MinTime == 0 || q.MinTime < t.MinTime) {
			t.MinTime = q.MinTime
		}
		t.MaxTime = max(t.MaxTime, q.MaxTime)
	}
	return t, nil
}

// matches says whether a topic (or the subject it stands for) contains q, ignoring case.
func matches(name, q string) bool {
	if q == "" {
		return true
	}
	q = strings.ToLower(q)
	if strings.Contains(strings.ToLower(name), q) {
		return true
	}
	s, err := route.TopicToSubject(name)
	return err == nil && strings.Contains(strings.ToLower(s), q)
}

// topics is GET /console/api/topics?q=TEXT&after=TOPIC&limit=N: a page of the topics whose name
// (or subject) contains q, after the topic named, with the count of all that match.
func (c *Console) topics(w http.ResponseWriter, r *http.Request) {
	st, ok := c.store(w)
	if !ok {
		return
	}
	q, after, limit := r.URL.Query().Get("q"), r.URL.Query().Get("after"), pageSize(r)
	rt, _ := c.routing()
	all := st.Topics() // sorted by name
	out := struct {
		Total   int          `json:"total"`
		Topics  []TopicJSON  `json:"topics"`
		Next    string       `json:"next,omitempty"`
		Routing *RoutingJSON `json:"routing,omitempty"`
	}{Topics: []TopicJSON{}}
	if _, ok := c.routing(); ok {
		rj := routingJSON(rt)
		out.Routing = &rj
	}
	now := time.Now()
	for _, ti := range all {
		if !matches(ti.Name, q) {
			continue
		}
		out.Total++
		if ti.Name <= after || out.Next != "" {
			continue
		}
		if len(out.Topics) == limit {
			out.Next = out.Topics[limit-1].Name
			continue
		}
		t, err := describeTopic(st, ti.Name, rt, now)
		if err != nil {
			continue // gone since the list (retention, a restart): not an error of the page
		}
		out.Topics = append(out.Topics, t)
	}
	reply(w, out)
}

// topic is GET /console/api/topic?topic=NAME: one topic, its queues, and its groups.
func (c *Console) topic(w http.ResponseWriter, r *http.Request) {
	st, ok := c.store(w)
	if !ok {
		return
	}
	name := r.URL.Query().Get("topic")
	rt, _ := c.routing()
	t, err := describeTopic(st, name, rt, time.Now())
	if err != nil {
		readError(w, err)
		return
	}
	groups := []string{}
	if g := c.attached().Groups; g != nil {
		for _, k := range g.GroupKeys() {
			if k.Topic == name && !slices.Contains(groups, k.Group) {
				groups = append(groups, k.Group)
			}
		}
	}
	reply(w, map[string]any{"topic": t, "groups": groups})
}
