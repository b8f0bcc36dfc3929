package ingress

import (
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/nats-io/nats.go"

	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/internal/store/indexfile"
	"github.com/rocketstore/engine/internal/store/javahash"
)

// route is what the callback needs to know about a subject, computed once per subject and
// cached: where its messages go, and whether they can go anywhere at all. Immutable once made
// (the round-robin counter lives in topicState, which is shared by every subject of the topic).
type route struct {
	topic string
	// tags is the token rule's TAGS, "" for none. It needs no check of its own: it is a
	// non-empty piece of the subject cut at a '.', and the subject passed CheckProperty.
	tags string
	// err is set when the subject cannot be stored at all (topic too long, subject not valid as
	// the NATS_SUBJECT property, or not a literal NATS subject: an empty or a wildcard token,
	// whitespace); every message of the subject then gets an error reply.
	err   error
	state *topicState
	// partition is the message's partition, its queue, under partitioned ingest; -1 otherwise
	// (whether it is owned is checked for every message: ownership moves). stored is then the subject the publisher used, stored as NATS_SUBJECT ("" means the
	// message's own subject).
	partition int32
	stored    string
	// shard is the base of the worker choice: the FNV-1a hash of the topic (of the subject when
	// err is set, so that rejects spread over the workers too).
	shard uint32
	// indexPrefix is the IndexFile hash state after "topic#" (recordindex.go).
	indexPrefix int32
}

// topicState is shared by every subject of one topic.
type topicState struct {
	// next is the round-robin position for messages without a queue key. Atomic: subscriptions
	// run their callbacks on separate goroutines. 64 bits and reduced unsigned: a 32-bit position
	// would turn negative as an int32 after 2^31 messages and, as a uint32, skip queues at 2^32
	// whenever the queue count does not divide it; 2^64 is never reached.
	next atomic.Uint64
}

// router maps subjects to routes and messages to queues and workers. Safe for concurrent use.
type router struct {
	parts    *Partitions // nil: not partitioned
	mapping  Mapping
	queues   int32
	keyHdr   string
	subjects *boundedCache[string, *route]
	topics   *boundedCache[string, *topicState]
}

func newRouter(m Mapping, queues int, keyHdr string, cacheSize int, parts *Partitions) *router {
	return &router{
		parts:    parts,
		mapping:  m,
		queues:   int32(queues),
		keyHdr:   keyHdr,
		subjects: newBoundedCache[string, *route](cacheSize),
		topics:   newBoundedCache[string, *topicState](cacheSize),
	}
}

// route returns the cached route of subject.
func (r *router) route(subject string) *route { return r.subjects.getOrMake(subject, r.makeRoute) }

func (r *router) makeRoute(subject string) *route {
	rt := &route{partition: -1}
	mapped := subject
	if r.parts != nil {
		part, rest, ok := r.parts.split(subject)
		switch {
		case !ok:
			rt.err = fmt.Errorf("%w: %.200q is not a partition subject (%s.<partition>.<subject>)", ErrInvalidSubject,
				subject, r.parts.Prefix)
		default:
			rt.partition, rt.stored, mapped = int32(part), rest, rest
		}
	}
	if rt.err == nil {
		if err := commitlog.CheckProperty(PropNatsSubject, mapped); err != nil {
			rt.err = fmt.Errorf("%w: %w", ErrInvalidSubject, err)
		} else if rt.err = checkPublishedSubject(mapped); rt.err == nil {
			rt.topic, rt.tags, rt.err = r.mapping.Map(mapped)
		}
	}
	if rt.err != nil {
		rt.shard = fnv32(subject)
		return rt
	}
	rt.shard = fnv32(rt.topic)
	rt.indexPrefix = indexfile.TopicPrefixHash(rt.topic)
	// A topic's state may be evicted while routes still point at it; they keep their pointer and
	// a new route gets a fresh counter. Either way the queues are still spread.
	rt.state = r.topics.getOrMake(rt.topic, func(string) *topicState { return new(topicState) })
	return rt
}

// queue picks the queue id of m: by its queue key when it has one, else round-robin per topic.
func (r *router) queue(m *nats.Msg, rt *route) int32 {
	if q, ok := r.keyedQueue(m, rt); ok {
		return q
	}
	return r.nextQueue(rt)
}

// keyedQueue is the queue that m's route or queue key decides, if they decide one.
func (r *router) keyedQueue(m *nats.Msg, rt *route) (int32, bool) {
	if rt.err != nil {
		return 0, true
	}
	if rt.partition >= 0 {
		return rt.partition, true // the server chose it: the mapping hashed the key tokens
	}
	if vals := m.Header[r.keyHdr]; len(vals) > 0 {
		if key := firstKey(vals[0]); key != "" {
			return HashQueue(key, int(r.queues)), true
		}
	}
	return 0, false
}

// nextQueue is the topic's next queue, round-robin: always in [0, queues).
func (r *router) nextQueue(rt *route) int32 {
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

// worker picks the worker that owns (topic, queue). Consecutive queues of a topic go to
// consecutive workers, so a busy topic spreads over min(QueuesPerTopic, Workers) workers.
// Round-robin over the workers would spread better but would let two messages of one queue be
// encoded by two workers at once and reach Out in either order: the per-queue order guarantee
// rests on this function being a function of (topic, queue) alone.
func (rt *route) worker(queue int32, workers int) int {
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
