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

// topicLimit is the set of topics the rule has made, up to its limit. A topic takes its slot
// when a message of it is stored, not when its subject is first seen: a subject whose messages
// are all refused (invalid, too large, the disk full) must not hold a slot, or a burst of bad
// messages on new subjects would send every later subject to OverflowTopic. Until then, the
// topic's messages on their way hold a reservation: the reserved topics count against the
// limit (so that however many new topics are in flight at once, the stored ones stay within
// it), and a reservation goes when its last message is answered without being stored. The set
// of topics that have a slot only grows, so a subject that has its topic keeps it; its size is
// bounded by max.
type topicLimit struct {
	max int // < 0: none
	mu  sync.Mutex
	// topics have a slot: the store's at start, and each topic of which a message was stored.
	topics map[string]struct{}
	// reserved are the topics without a slot whose messages are on their way, with their count.
	reserved map[string]int
	// nReserved is len(reserved), read without the lock by settle's fast path.
	nReserved  atomic.Int64
	overflowed atomic.Int64 // routes sent to OverflowTopic
	first      func(subject string, max int)
}

// newTopicLimit makes m's limit, knowing the store's topics other than the declared ones and
// OverflowTopic (they are not the rule's).
func newTopicLimit(m Mapping) *topicLimit {
	l := &topicLimit{max: m.MaxTopics, topics: make(map[string]struct{}), reserved: make(map[string]int)}
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

// admission is what take decided for a message.
type admission int

const (
	slotted  admission = iota // the topic has its slot
	reserved                  // the topic is reserved for the message, until settle
	full                      // no room: the message goes to OverflowTopic
)

// take admits n messages of topic: the topic has a slot, or it is reserved for them (it was
// already, or there is room), or there is no room.
func (l *topicLimit) take(topic string, n int) admission {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.topics[topic]; ok {
		return slotted
	}
	if c, ok := l.reserved[topic]; ok {
		l.reserved[topic] = c + n
		return reserved
	}
	if len(l.topics)+len(l.reserved) < l.max {
		l.reserved[topic] = n
		l.nReserved.Store(int64(len(l.reserved)))
		return reserved
	}
	return full
}

// settle answers for n messages of topic: stored, the topic takes its slot (for good); not
// stored, they no longer hold its reservation, which goes with the last of them. A topic that
// is not reserved (it has a slot, or is not the rule's) is left as it is.
func (l *topicLimit) settle(topic string, n int, stored bool) {
	if l.nReserved.Load() == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	c, ok := l.reserved[topic]
	if !ok {
		return
	}
	switch {
	case stored:
		delete(l.reserved, topic)
		l.topics[topic] = struct{}{}
	case c > n:
		l.reserved[topic] = c - n
	default:
		delete(l.reserved, topic)
	}
	l.nReserved.Store(int64(len(l.reserved)))
}

// has reports whether topic has its slot.
func (l *topicLimit) has(topic string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.topics[topic]
	return ok
}

// counts are the number of topics with a slot, and of topics reserved.
func (l *topicLimit) counts() (slots, reservedTopics int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.topics), len(l.reserved)
}
