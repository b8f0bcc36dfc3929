package appender

import "time"

// dedupeKey scopes a publisher's message id to its topic, as JetStream scopes it to a stream.
type dedupeKey struct {
	topic, id string
}

// dedupeEntry is where the first copy of a message went.
type dedupeEntry struct {
	phys, queueOffset, storeTimestamp int64
	size, queueID                     int32
}

// dedupe remembers the message ids of the last Window (at most Max of them), oldest first in a
// ring, so that memory is bounded by Max whatever the traffic. Owned by the appender goroutine.
type dedupe struct {
	window time.Duration
	m      map[dedupeKey]dedupeEntry
	ring   []dedupeSlot
	head   int // oldest slot
	n      int
}

type dedupeSlot struct {
	key dedupeKey
	at  time.Time
}

func newDedupe(window time.Duration, max int) *dedupe {
	if window <= 0 || max <= 0 {
		return nil
	}
	return &dedupe{window: window, m: make(map[dedupeKey]dedupeEntry), ring: make([]dedupeSlot, max)}
}

// expire forgets ids older than the window.
func (d *dedupe) expire(now time.Time) {
	for d.n > 0 && now.Sub(d.ring[d.head].at) > d.window {
		d.pop()
	}
}

func (d *dedupe) pop() {
	s := &d.ring[d.head]
	delete(d.m, s.key)
	*s = dedupeSlot{}
	d.head = (d.head + 1) % len(d.ring)
	d.n--
}

func (d *dedupe) get(k dedupeKey) (dedupeEntry, bool) {
	e, ok := d.m[k]
	return e, ok
}

func (d *dedupe) put(k dedupeKey, e dedupeEntry, now time.Time) {
	if d.n == len(d.ring) {
		d.pop()
	}
	d.ring[(d.head+d.n)%len(d.ring)] = dedupeSlot{key: k, at: now}
	d.n++
	d.m[k] = e
}

// Len is how many ids are remembered.
func (d *dedupe) Len() int {
	if d == nil {
		return 0
	}
	return d.n
}
