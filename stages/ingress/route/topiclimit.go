package route

import (
	"slices"
	"sync"
	"sync/atomic"
)

// OverflowTopic holds the messages of subjects that would have made a topic past the topic
// limit, each with its subject in NATS_SUBJECT. No subject maps to it: a mapped topic starts with
// '_' only for a subject that starts with '.', which is not a NATS subject.
const OverflowTopic = "_overflow"

// DefaultMaxTopics is the default topic limit: with 4 queues, 4,096 ConsumeQueue files and
// their memory maps, well inside the default open-files and vm.max_map_count limits.
const DefaultMaxTopics = 1024

// topicLimit is the set of topics the rule has made, up to its limit. It only grows, so a
// subject that has its topic keeps it; its size is bounded by max.
type topicLimit struct {
	max        int // < 0: none
	mu         sync.Mutex
	topics     map[string]struct{}
	overflowed atomic.Int64 // routes sent to OverflowTopic
	first      func(subject string, max int)
}

// newTopicLimit makes m's limit, knowing the store's topics other than the declared ones and
// OverflowTopic (they are not the rule's).
func newTopicLimit(m Mapping) *topicLimit {
	l := &topicLimit{max: m.MaxTopics, topics: make(map[string]struct{})}
	if l.max == 0 {
		l.max = DefaultMaxTopics
	}
	if l.max < 0 {
		return l
	}
	for _, k := range m.KnownTopics {
		declared := slices.ContainsFunc(m.Patterns, func(p TopicPattern) bool { return p.Topic == k })
		if k != OverflowTopic && !declared {
			l.topics[k] = struct{}{}
		}
	}
	return l
}

// admit reports whether subject's topic may be used: it is known, or there is room and it is now
// known.
func (l *topicLimit) admit(subject, topic string) bool {
	if l.max < 0 {
		return true
	}
	l.mu.Lock()
	_, known := l.topics[topic]
	room := len(l.topics) < l.max
	if !known && room {
		l.topics[topic] = struct{}{}
	}
	l.mu.Unlock()
	if known || room {
		return true
	}
	if l.overflowed.Add(1) == 1 && l.first != nil {
		l.first(subject, l.max)
	}
	return false
}

// count is the number of topics known.
func (l *topicLimit) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.topics)
}
