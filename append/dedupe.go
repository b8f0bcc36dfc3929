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

// dedupe remembers the message ids of the last window, oldest first in a ring, each with its
// sequence (the n-th id remembered has sequence n) and where its record ends in the log. Owned by
// the appender goroutine.
//
// Memory is bounded by max ids (one round more may be held until the round ends, if a round has
// more ids than max). Past the bound an id is dropped from memory before its window ends. That
// must not shorten the window: at a high rate of new ids (256 k/s fills 500,000 in 2 s) a retry
// after that would be stored again. So with a store to look ids up in (lookups: the IndexFile):
//
//   - An id leaves memory only once dispatch has passed its record (trim: the appender waits
//     for that before a round that needs it, need), so that it can be found in the IndexFile.
//   - Ids that pass the soft bound (soft newer ids are held, three quarters of max) and are
//     dispatched are "checked": while any of them is within its window (checkedUntil), ingress
//     looks each message id up in the store before encoding it (and answers a duplicate
//     there), and stamps the record with the sequence it saw (Record.DedupeChecked): every id
//     up to it was looked up.
//   - When the appender meets a record whose id is not in memory, and ids after the record's
//     stamp were dropped while within their window (forgot, forgotUntil: a record that waited
//     longer in the pipeline than a quarter of max ids took to pass, or a producer that does
//     not look up), it looks the id up itself (Config.Lookup). Rare by design: ingress's lookups
//     run on its workers, in parallel, not on the writer.
//
// Without a store to look in, an id past the bound is forgotten, as before, and counted (early).
type dedupe struct {
	window  time.Duration
	max     int
	soft    int  // ids newer than the soft newest are never checked (max - max/4)
	lookups bool // ids past the bound can be looked up in the store
	m       map[dedupeKey]dedupeEntry
	ring    []dedupeSlot // grows up to the bound (and a round past it)
	head    int          // oldest slot
	n       int
	seq     int64 // the sequence of the last id remembered
	// checked: ids up to this sequence are looked up by ingress while checkedUntil (Unix ns, the
	// window's end of the newest of them) is ahead.
	checked, checkedUntil int64
	// forgot is the newest sequence dropped from memory within its window, forgotUntil (Unix ns)
	// the end of its window; early counts the ids dropped so.
	forgot, forgotUntil int64
	early               int64
}

type dedupeSlot struct {
	key      dedupeKey
	at       int64 // Unix ns, the store time
	seq, end int64 // the id's sequence; the offset just past its record
}

// newDedupe makes a window of window and max ids (nil: dedupe off). lookups says ids past the
// bound can be looked up in the store.
func newDedupe(window time.Duration, max int, lookups bool) *dedupe {
	if window <= 0 || max <= 0 {
		return nil
	}
	return &dedupe{window: window, max: max, soft: max - max/4, lookups: lookups,
		m: make(map[dedupeKey]dedupeEntry), ring: make([]dedupeSlot, min(max, 1024))}
}

// expire forgets ids older than the window.
func (d *dedupe) expire(now time.Time) {
	ns := now.UnixNano()
	for d.n > 0 && ns-d.ring[d.head].at > int64(d.window) {
		d.pop()
	}
}

// pop forgets the oldest id and returns its slot.
func (d *dedupe) pop() dedupeSlot {
	s := &d.ring[d.head]
	out := *s
	delete(d.m, s.key)
	*s = dedupeSlot{}
	d.head = (d.head + 1) % len(d.ring)
	d.n--
	return out
}

func (d *dedupe) get(k dedupeKey) (dedupeEntry, bool) {
	e, ok := d.m[k]
	return e, ok
}

// put remembers id k, stored at now, whose record ends at end. The ring grows when full; trim
// brings it back to the bound.
func (d *dedupe) put(k dedupeKey, e dedupeEntry, now time.Time, end int64) {
	if d.n == len(d.ring) {
		grown := make([]dedupeSlot, max(2*len(d.ring), 16))
		for i := range d.n {
			grown[i] = d.ring[(d.head+i)%len(d.ring)]
		}
		d.ring, d.head = grown, 0
	}
	d.seq++
	d.ring[(d.head+d.n)%len(d.ring)] = dedupeSlot{key: k, at: now.UnixNano(), seq: d.seq, end: end}
	d.n++
	d.m[k] = e
}

// slot is the i-th oldest id held.
func (d *dedupe) slot(i int) *dedupeSlot { return &d.ring[(d.head+i)%len(d.ring)] }

// need is the offset dispatch must have passed before a round that may remember ids more ids,
// so that trim can bring the ring back to the bound after it (0: none).
func (d *dedupe) need(ids int) int64 {
	if !d.lookups {
		return 0
	}
	excess := min(d.n+ids-d.max, d.n)
	if excess <= 0 {
		return 0
	}
	return d.slot(excess - 1).end
}

// trim brings the ring back to its bound after a round, dropping the oldest ids, and moves the
// checked mark over the ids past the soft bound. With lookups, only ids below dispatched leave
// memory or are checked: one not yet in the IndexFile could not be found there.
func (d *dedupe) trim(now time.Time, dispatched int64) {
	ns := now.UnixNano()
	for d.n > d.max && (!d.lookups || d.slot(0).end <= dispatched) {
		s := d.pop()
		if ns-s.at <= int64(d.window) { // dropped within its window
			d.early++
			d.forgot, d.forgotUntil = s.seq, s.at+int64(d.window)
			d.check(&s)
		}
	}
	if !d.lookups {
		return
	}
	// The ids past the soft bound, oldest first: the first one not yet checked, on.
	for i := max(int(d.checked-d.seq)+d.n, 0); i < d.n-d.soft; i++ {
		s := d.slot(i)
		if s.end > dispatched {
			break
		}
		d.check(s)
	}
}

// check marks the ids up to s checked: ingress looks them up while s is within its window.
func (d *dedupe) check(s *dedupeSlot) {
	if s.seq > d.checked {
		d.checked = s.seq
		d.checkedUntil = max(d.checkedUntil, s.at+int64(d.window))
	}
}

// mustLookUp says that an id not in memory, of a record whose producer looked ids up to
// stamp in the store (Record.DedupeChecked), may still have a first copy within the window
// that only the store knows: an id after stamp was dropped from memory within its window.
func (d *dedupe) mustLookUp(stamp int64, now time.Time) bool {
	return d.lookups && d.forgot > stamp && now.UnixNano() <= d.forgotUntil
}

// Len is how many ids are remembered.
func (d *dedupe) Len() int {
	if d == nil {
		return 0
	}
	return d.n
}
