package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/rocketstore/engine/engine/groups"
	"github.com/rocketstore/engine/internal/reader"
	"github.com/rocketstore/engine/stages/ingress"
	"github.com/rocketstore/engine/stages/ingress/route"
)

// What the console (engine/console) reads of a served engine beyond the read API: a key search
// without a cap, the subject-to-topic rule in force, the read API's request count, and the
// consumer groups of this engine without a NATS round trip.

type (
	// KeySearchRequest asks for a page of the messages of a topic with a key (SearchKey).
	KeySearchRequest = reader.KeySearchRequest
	// KeyPage is a page of a key search, with the cursor of the next one.
	KeyPage = reader.KeyPage
	// KeyCursor is where a key search stands.
	KeyCursor = reader.KeyCursor
)

// SearchKey pages through the messages of a topic with a key, every one of them, newest first
// (reader.SearchKey: the index walked from where the last page stopped; no cap).
func (e *Engine) SearchKey(ctx context.Context, req KeySearchRequest) (KeyPage, error) {
	release, err := e.readStart()
	if err != nil {
		return KeyPage{}, err
	}
	defer release()
	return e.reader.SearchKey(ctx, req)
}

// Routing is how subjects become topics on a served engine: the declared patterns, the rule and
// its topic limit, and what went to the overflow topic.
type Routing struct {
	// Subjects are the subjects stored; TopicTokens the token rule's N (0: the whole subject).
	Subjects    []string
	TopicTokens int
	// Patterns are the declared topics, matched first and never limited.
	Patterns []route.TopicPattern
	// MaxTopics bounds the topics the rule makes (-1: no bound); RuleTopics is how many it has
	// made or found in the store; Overflowed counts the routes sent to OverflowTopic.
	MaxTopics, RuleTopics int
	Overflowed            int64
	OverflowTopic         string
	// QueuesPerTopic is how many queues a new topic gets (the partitions, when partitioned).
	QueuesPerTopic int
	// KeysHeader and TagsHeader are the headers that become KEYS and TAGS.
	KeysHeader, TagsHeader string
}

// Routing returns the subject-to-topic rule in force.
func (s *Server) Routing() Routing {
	r := Routing{Subjects: s.subjects(), TopicTokens: s.opts.TopicTokens, Patterns: slices.Clone(s.opts.Topics),
		OverflowTopic: route.OverflowTopic, QueuesPerTopic: cmp.Or(s.opts.QueuesPerTopic, ingress.DefaultQueuesPerTopic),
		KeysHeader: cmp.Or(s.opts.KeysHeader, ingress.DefaultKeysHeader), TagsHeader: cmp.Or(s.opts.TagsHeader, ingress.DefaultTagsHeader)}
	if p := s.opts.Partitions; p != nil {
		r.QueuesPerTopic = p.Count
	}
	if s.ing != nil {
		st := s.ing.Stats().Routes
		r.MaxTopics, r.RuleTopics, r.Overflowed = st.MaxTopics, st.RuleTopics, st.Overflowed
	}
	return r
}

// ReadRequests is how many requests the read API has answered since it started (every endpoint
// together; 0 without a read API).
func (s *Server) ReadRequests() int64 {
	if s.api == nil {
		return 0
	}
	var n int64
	for _, ep := range s.api.Stats().Endpoints {
		n += int64(ep.NumRequests)
	}
	return n
}

// ErrNoGroups: the engine serves no consumer groups (no read API).
var ErrNoGroups = errors.New("engine: no consumer groups (the read API is off)")

// GroupKeys lists every consumer group this engine knows, sorted by topic, then group: those with
// members and those with committed offsets.
func (s *Server) GroupKeys() []groups.Key {
	var keys []groups.Key
	if s.api != nil && s.api.Groups() != nil {
		keys = s.api.Groups().Active()
	}
	for _, k := range s.Engine.offsets.Keys() {
		keys = append(keys, groups.Key{Group: k.Group, Topic: k.Topic})
	}
	slices.SortFunc(keys, func(a, b groups.Key) int { return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Group, b.Group)) })
	return slices.Compact(keys)
}

// DescribeGroup is a group's state on this engine: members, assignment, each queue's committed
// offset and lag, recent rebalances; false when it has neither members nor offsets.
func (s *Server) DescribeGroup(key groups.Key) (groups.GroupStatus, bool) {
	if s.api == nil || s.api.Groups() == nil {
		return groups.GroupStatus{}, false
	}
	return s.api.Groups().Describe(key, s.Engine.offsets.Queues(key.Group, key.Topic), s.groupStore)
}

// GroupReset says where a reset sets a group's offsets: Offset in every queue, or, when Time is
// set instead, each queue's first offset stored at or after Time (ms).
type GroupReset struct {
	Offset *int64
	Time   *int64
}

// QueueOffset is a queue's offset after a reset.
type QueueOffset struct {
	QueueID int32
	Offset  int64
}

// ResetGroup sets a group's offsets in every queue of its topic on this engine, as `engine
// groups reset` does: refused (groups.ErrConflict) while the group has members.
func (s *Server) ResetGroup(key groups.Key, to GroupReset) ([]QueueOffset, error) {
	if s.api == nil || s.api.Groups() == nil {
		return nil, ErrNoGroups
	}
	if (to.Offset == nil) == (to.Time == nil) {
		return nil, fmt.Errorf("%w: a reset needs an offset or a time", groups.ErrInvalid)
	}
	queues, _ := s.groupStore.Queues(key.Topic)
	if len(queues) == 0 {
		return nil, fmt.Errorf("%w: %q has no queue on this engine", groups.ErrUnknownTopic, key.Topic)
	}
	var out []QueueOffset
	err := s.api.Groups().WhileIdle(key, func() error {
		for _, q := range queues {
			var off int64
			if to.Offset != nil {
				off = *to.Offset
			} else if o, err := s.Engine.OffsetForTime(key.Topic, q, *to.Time); errors.Is(err, reader.ErrUnknownQueue) {
				off = 0 // a queue with no message yet starts at 0
			} else if err != nil {
				return err
			} else {
				off = o
			}
			if err := s.Engine.CommitOffset(key.Group, key.Topic, q, off); err != nil {
				return err
			}
			out = append(out, QueueOffset{QueueID: q, Offset: off})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	s.Engine.opts.Logger.Info().Str("group", key.Group).Str("topic", key.Topic).Any("offsets", out).Msg("group: offsets reset")
	return out, nil
}

// DeleteGroup deletes a group's offsets on this engine: refused (groups.ErrConflict) while it has
// members; false when it had none.
func (s *Server) DeleteGroup(key groups.Key) (bool, error) {
	if s.api == nil || s.api.Groups() == nil {
		return false, ErrNoGroups
	}
	var deleted bool
	err := s.api.Groups().WhileIdle(key, func() (err error) {
		deleted, err = s.Engine.offsets.Delete(key.Group, key.Topic)
		return err
	})
	if err == nil && deleted {
		s.Engine.opts.Logger.Info().Str("group", key.Group).Str("topic", key.Topic).Msg("group: deleted")
	}
	return deleted, err
}
