// Package route is ingress's routing: a subject to its topic (Mapping: the default rule and the
// token rule, and the inverse), a message to its queue (by its queue key's hash, as RocketMQ's
// SelectMessageQueueByHash, else round-robin per topic) and to the worker that owns that
// (topic, queue), partitioned ingest's subjects and ownership (Partitions), and the bounded
// cache of routes. It knows nothing of the pipeline: ingress asks it, per message, where the
// message goes.
//
// # Subject -> topic
//
// RocketMQ topics allow only [%|a-zA-Z0-9_-], at most 127 bytes, and become directory names. The
// default rule maps every byte of the subject: [a-zA-Z0-9-] stays, '.' becomes '_', and every other
// byte becomes '%' and two uppercase hex digits, so '_' is "%5F" and '%' is "%25". Decoding is
// therefore unambiguous ('_' only ever stands for '.', '%' only ever starts an escape) and the
// rule is injective: two subjects never share a topic. TopicToSubject is the inverse; it accepts
// only canonical topics, so the two functions are a bijection between subjects and the topics
// this package makes. A side effect worth knowing: a mapped topic never contains a literal '_'
// and never starts with %RETRY% or %DLQ%, so it cannot collide with RocketMQ's system topics
// (SCHEDULE_TOPIC_XXXX, RMQ_SYS_*, retry and dead-letter topics). A subject whose topic would
// be longer than 127 bytes is rejected (400): use a shorter subject or the token rule. So is a
// subject that is not a literal NATS subject (an empty token, a '*' or '>' token, whitespace),
// which a server without pedantic checks may still deliver. Bytes that are path separators
// elsewhere ('/', '\', NUL) are ordinary subject bytes: escaped like any other, so no topic, and
// no queue directory, can name anything outside its parent.
//
// The token rule (TopicTokens = N > 0) makes the first N tokens of the subject the topic,
// mapped as above, and the remaining tokens, joined by '.', the TAGS property (unless the tags
// header is present, which wins). A subject with N tokens or fewer is all topic and has no TAGS.
// N = 0 is the default rule.
//
// Declared topics (Mapping.Patterns, TopicPattern) match before either rule: every subject a
// pattern matches goes to its topic, with no TAGS from the subject. A topic under the
// subject-tag rule (Mapping.SubjectTags: the engine puts new declared topics under it), whichever
// rule chose it, takes the whole subject as TAGS, and its tags header is an ordinary header. The
// rule makes at most Mapping.MaxTopics topics (the store's count at start); a subject whose topic
// would be a new one past that goes to OverflowTopic. A topic counts once a message of it is
// stored (Router.Admit, Settle): a subject whose messages are all refused takes no slot. A
// subject that has its topic keeps it: the set of the rule's topics only grows, and is bounded
// by the limit. The route of each subject is cached in a bounded cache
// (ingress's Config.SubjectCache entries, evictions counted) because it is on the hot path and
// subjects can be unbounded in number.
//
// # Queue id
//
// When the queue key header (by default the keys header "Rmq-Keys") is present, the queue is
// chosen from its first key (the first space-separated token of its first value) as RocketMQ's
// SelectMessageQueueByHash does: Java String.hashCode(key) % queues, negated when negative. A
// RocketMQ producer that sends the same key with that selector therefore picks the same queue.
// Without the header, queues are taken round-robin per topic so that a topic spreads evenly.
// Under partitioned ingest the queue is the partition, which NATS's subject mapping chose.
package route

import (
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/nats-io/nats.go"

	"github.com/rocketstore/engine/internal/natssubject"
	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/internal/store/indexfile"
	"github.com/rocketstore/engine/internal/store/javahash"
	"github.com/rocketstore/engine/stages/ingress/internal/bounded"
)

// Route is what the callback needs to know about a subject, computed once per subject and
// cached: where its messages go, and whether they can go anywhere at all. Immutable once made
// (the round-robin counter lives in topicState, which is shared by every subject of the topic),
// but for overflowed. A route of a topic under the topic limit goes through Router.Admit with
// each message: its topic, or its overflow route when the limit has no room for it.
type Route struct {
	Topic string
	// Tags is the token rule's TAGS, or the subject under the subject-tag rule; "" for none. It
	// needs no check of its own: it is the subject or a non-empty piece of it cut at a '.', and
	// the subject passed CheckProperty.
	Tags string
	// SubjectTags says the topic is under the subject-tag rule: Tags is the subject, and the
	// tags header is an ordinary header.
	SubjectTags bool
	// Err is set when the subject cannot be stored at all (topic too long, subject not valid as
	// the NATS_SUBJECT property, or not a literal NATS subject: an empty or a wildcard token,
	// whitespace); every message of the subject then gets an error reply.
	Err   error
	state *topicState
	// Partition is the message's partition, its queue, under partitioned ingest; -1 otherwise
	// (whether it is owned is checked for every message: ownership moves). Stored is then the
	// subject the publisher used, stored as NATS_SUBJECT ("" means the message's own subject).
	Partition int32
	Stored    string
	// shard is the base of the worker choice: the FNV-1a hash of the topic (of the subject when
	// Err is set, so that rejects spread over the workers too).
	shard uint32
	// IndexPrefix is the IndexFile hash state after "topic#" (ingress's recordindex.go).
	IndexPrefix int32
	// over is the subject's route to OverflowTopic when Topic is the rule's under a limit (nil
	// otherwise); overflowed is set once the limit had no room for a message of the route: from
	// then on (while the route is cached) every message of the subject takes over, so that the
	// subject does not go back and forth, and a subject sent to OverflowTopic costs no lock.
	over       *Route
	overflowed atomic.Bool
	subject    string // the subject the route was made for (the first overflow is logged with it)
}

// topicState is shared by every subject of one topic.
type topicState struct {
	// next is the round-robin position for messages without a queue key. Atomic: subscriptions
	// run their callbacks on separate goroutines. 64 bits and reduced unsigned: a 32-bit position
	// would turn negative as an int32 after 2^31 messages and, as a uint32, skip queues at 2^32
	// whenever the queue count does not divide it; 2^64 is never reached.
	next atomic.Uint64
	// slotted says the topic has its slot of the topic limit (topicLimit): Admit needs no lock.
	slotted atomic.Bool
}

// Router maps subjects to routes and messages to queues and workers. Safe for concurrent use.
type Router struct {
	parts    *Partitions // nil: not partitioned
	mapping  Mapping
	queues   int32
	keyHdr   string
	subjects *bounded.Cache[string, *Route]
	topics   *bounded.Cache[string, *topicState]
	limit    *topicLimit
}

// NewRouter makes a router for queues queues per topic, choosing by the queue key header keyHdr,
// with caches of cacheSize entries; parts is partitioned ingest's configuration (nil: none).
func NewRouter(m Mapping, queues int, keyHdr string, cacheSize int, parts *Partitions) *Router {
	return &Router{
		parts:    parts,
		mapping:  m,
		queues:   int32(queues),
		keyHdr:   keyHdr,
		subjects: bounded.NewCache[string, *Route](cacheSize),
		topics:   bounded.NewCache[string, *topicState](cacheSize),
		limit:    newTopicLimit(m),
	}
}

// Route returns the cached route of subject.
func (r *Router) Route(subject string) *Route { return r.subjects.GetOrMake(subject, r.makeRoute) }

// Stats are a Router's counters.
type Stats struct {
	// Cached is the number of routes cached; Evictions the routes dropped from the cache so far.
	Cached    int
	Evictions int64
	// RuleTopics is the number of topics the rule has made (a message of theirs was stored) or
	// found in the store (0 without a limit: they are then not tracked), MaxTopics the limit (-1:
	// none); ReservedTopics the new topics whose first messages are on their way (they count
	// against the limit until one is stored, or all are refused); Overflowed the routes sent to
	// OverflowTopic so far (a subject again after its route left the cache counts again).
	RuleTopics, MaxTopics, ReservedTopics int
	Overflowed                            int64
}

// OnFirstOverflow makes f called with the first subject sent to OverflowTopic and the limit (to
// log it). Call it before the first Route. f runs while the route is made: it must not call
// the Router.
func (r *Router) OnFirstOverflow(f func(subject string, max int)) { r.limit.first = f }

// Stats returns the router's counters.
func (r *Router) Stats() Stats {
	slots, reserved := r.limit.counts()
	return Stats{Cached: r.subjects.Len(), Evictions: r.subjects.Evictions(),
		RuleTopics: slots, MaxTopics: r.limit.max, ReservedTopics: reserved, Overflowed: r.limit.overflowed.Load()}
}

// Admit is the route n messages of rt (the subject's, from Route) are stored by: rt, unless its
// topic is the rule's under the topic limit, has no slot yet and there is no room to reserve
// one, in which case they go to OverflowTopic. While rt's topic is reserved (no message of it
// stored yet), each admitted message must be settled once its outcome is known: Settle with its
// topic, stored or not (a message sent to OverflowTopic, or of a topic with its slot, needs
// nothing, but settling it is harmless). Safe for concurrent use; a lock is taken only for the
// messages of a topic without its slot.
func (r *Router) Admit(rt *Route, n int) *Route {
	if rt.over == nil || rt.state.slotted.Load() {
		return rt
	}
	if rt.overflowed.Load() {
		return rt.over
	}
	switch r.limit.take(rt.Topic, n) {
	case slotted:
		rt.state.slotted.Store(true)
		return rt
	case reserved:
		return rt
	}
	if !rt.overflowed.Swap(true) && r.limit.overflowed.Add(1) == 1 && r.limit.first != nil {
		subject := rt.Stored
		if subject == "" {
			subject = rt.subject
		}
		r.limit.first(subject, r.limit.max)
	}
	return rt.over
}

// Settle reports the outcome of n messages of topic admitted by Admit: stored (the topic then
// has its slot for good) or not (refused, dropped, answered otherwise: their reservation goes).
// Every message admitted while its topic was reserved must be settled exactly once; others may
// be. It costs an atomic load while no topic is reserved.
func (r *Router) Settle(topic string, n int, stored bool) { r.limit.settle(topic, n, stored) }

// Reserving says some topic is reserved: Settle has something to do.
func (r *Router) Reserving() bool { return r.limit.nReserved.Load() > 0 }

// StoredTopic is the topic an already stored message of rt's subject is in: rt's own when it
// has its slot or is not under the limit, else OverflowTopic (no message of the topic was
// stored, here or before the start).
func (r *Router) StoredTopic(rt *Route) string {
	if rt.over == nil || rt.state.slotted.Load() {
		return rt.Topic
	}
	if rt.overflowed.Load() {
		return rt.over.Topic
	}
	if r.limit.has(rt.Topic) {
		rt.state.slotted.Store(true)
		return rt.Topic
	}
	return rt.over.Topic
}

func (r *Router) makeRoute(subject string) *Route {
	rt := &Route{Partition: -1, subject: subject}
	mapped := subject
	if r.parts != nil {
		part, rest, ok := r.parts.split(subject)
		switch {
		case !ok:
			rt.Err = fmt.Errorf("%w: %.200q is not a partition subject (%s.<partition>.<subject>)", ErrInvalidSubject,
				subject, r.parts.Prefix)
		default:
			rt.Partition, rt.Stored, mapped = int32(part), rest, rest
		}
	}
	if rt.Err == nil {
		if err := commitlog.CheckProperty(natssubject.Property, mapped); err != nil {
			rt.Err = fmt.Errorf("%w: %w", ErrInvalidSubject, err)
		} else if rt.Err = CheckPublishedSubject(mapped); rt.Err == nil {
			var declared bool
			rt.Topic, rt.Tags, declared, rt.Err = r.mapping.mapDeclared(mapped)
			if rt.Err == nil && !declared && r.limit.max >= 0 {
				// Which of the two a message takes is decided with each message (Admit).
				over := &Route{Topic: OverflowTopic, Tags: rt.Tags, Partition: rt.Partition, Stored: rt.Stored, subject: subject}
				r.finish(over, mapped)
				rt.over = over
			}
		}
	}
	if rt.Err != nil {
		rt.shard = fnv32(subject)
		return rt
	}
	r.finish(rt, mapped)
	return rt
}

// finish fills in what follows from rt's topic: the subject-tag rule, the worker shard, the
// index prefix and the topic's state.
func (r *Router) finish(rt *Route, mapped string) {
	if r.mapping.SubjectTags.Has(rt.Topic) {
		rt.Tags, rt.SubjectTags = mapped, true
	}
	rt.shard = fnv32(rt.Topic)
	rt.IndexPrefix = indexfile.TopicPrefixHash(rt.Topic)
	// A topic's state may be evicted while routes still point at it; they keep their pointer and
	// a new route gets a fresh counter. Either way the queues are still spread.
	rt.state = r.topics.GetOrMake(rt.Topic, func(string) *topicState { return new(topicState) })
}

// Queue picks the queue id of m: by its queue key when it has one, else round-robin per topic.
func (r *Router) Queue(m *nats.Msg, rt *Route) int32 {
	if q, ok := r.KeyedQueue(m, rt); ok {
		return q
	}
	return r.NextQueue(rt)
}

// KeyedQueue is the queue that m's route or queue key decides, if they decide one.
func (r *Router) KeyedQueue(m *nats.Msg, rt *Route) (int32, bool) {
	if rt.Err != nil {
		return 0, true
	}
	if rt.Partition >= 0 {
		return rt.Partition, true // the server chose it: the mapping hashed the key tokens
	}
	if vals := m.Header[r.keyHdr]; len(vals) > 0 {
		if key := firstKey(vals[0]); key != "" {
			return HashQueue(key, int(r.queues)), true
		}
	}
	return 0, false
}

// NextQueue is the topic's next queue, round-robin: always in [0, queues).
func (r *Router) NextQueue(rt *Route) int32 {
	return int32((rt.state.next.Add(1) - 1) % uint64(r.queues))
}

// HashQueue is the queue id for a key: Java String.hashCode(key) % queues, negated when negative,
// which is what RocketMQ's SelectMessageQueueByHash computes, so a RocketMQ producer using that
// selector with the same key lands on the same queue.
func HashQueue(key string, queues int) int32 {
	v := javahash.String(key) % int32(queues)
	if v < 0 {
		v = -v
	}
	return v
}

// firstKey is the first non-empty space-separated token of a keys value.
func firstKey(v string) string {
	v = strings.TrimLeft(v, " ")
	if i := strings.IndexByte(v, ' '); i >= 0 {
		return v[:i]
	}
	return v
}

// Worker picks the worker that owns (topic, queue). Consecutive queues of a topic go to
// consecutive workers, so a busy topic spreads over min(QueuesPerTopic, Workers) workers.
// Round-robin over the workers would spread better but would let two messages of one queue be
// encoded by two workers at once and reach Out in either order: the per-queue order guarantee
// rests on this function being a function of (topic, queue) alone.
func (rt *Route) Worker(queue int32, workers int) int {
	return int((rt.shard + uint32(queue)) % uint32(workers))
}

// fnv32 is FNV-1a, 32 bits.
func fnv32(s string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= 16777619
	}
	return h
}

// SetRoundRobin sets the round-robin position of subject's topic: the seam through which tests
// start the counter at its limits instead of running 2^31 messages to get there.
func (r *Router) SetRoundRobin(subject string, pos uint64) {
	r.Route(subject).state.next.Store(pos)
}
