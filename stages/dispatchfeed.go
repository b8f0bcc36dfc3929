package stages

import (
	"sync"
	"sync/atomic"
)

// RecordIndex is what dispatch needs of a record beyond the appender's fields, worked out by the
// encoder while it builds the properties (derive.Ahead, in internal/store/derive), so that
// dispatch can build the ConsumeQueue unit and the IndexFile entries without reading the record
// back from the log. Known is false when the encoder did not work it out (more keys than Hashes
// holds, a tag code that may be a delivery time, a producer other than ingress): dispatch then
// reads the record. It has derive.Index's fields, so that each converts to the other (the
// compiler checks that they stay the same), and stages keeps to the standard library.
type RecordIndex struct {
	Known    bool
	NHashes  int8
	TagsCode int64
	// Hashes are the IndexFile key hashes of the record's keys (topic#key), unique key first.
	Hashes [2]int32
}

// Dispatched is one appended record as the appender hands it to dispatch (DispatchFeed).
type Dispatched struct {
	Phys           int64
	Size           int32
	QueueID        int32
	QueueOffset    int64
	StoreTimestamp int64
	Topic          string
	Index          RecordIndex
}

// End is the CommitLog offset just past the record.
func (d *Dispatched) End() int64 { return d.Phys + int64(d.Size) }

// DispatchFeed carries the records of each append round from the appender to the dispatcher, in
// log order, so that dispatch need not read back what the appender just wrote. It is only a
// shortcut: the log stays the truth. The appender never waits for it (a full feed drops the
// round), and dispatch reads from the log whatever the feed does not hold (a dropped round, a
// record whose RecordIndex is not known, the blank filler of a roll, everything after a
// restart). Slices are recycled through the feed's pool.
type DispatchFeed struct {
	ch   chan []Dispatched
	pool sync.Pool
	// held counts the records in ch, bounded by max: what the feed holds is memory (about 64
	// bytes a record), and a dispatch that falls far behind reads the log anyway.
	held atomic.Int64
	max  int64
}

// NewDispatchFeed makes a feed that holds up to maxRecords records.
func NewDispatchFeed(maxRecords int) *DispatchFeed {
	return &DispatchFeed{ch: make(chan []Dispatched, 1024), max: int64(maxRecords)}
}

// Buffer returns an empty slice to fill with a round's records.
func (f *DispatchFeed) Buffer() []Dispatched {
	if b, ok := f.pool.Get().(*[]Dispatched); ok {
		return (*b)[:0]
	}
	return make([]Dispatched, 0, 4096) // an append round of small records: no growing on the way
}

// Offer hands a round's records to dispatch, or drops them when the feed is full; it never
// blocks. The feed owns round afterwards.
func (f *DispatchFeed) Offer(round []Dispatched) {
	if len(round) == 0 {
		f.Recycle(round)
		return
	}
	n := int64(len(round))
	if f.held.Add(n) > f.max {
		f.held.Add(-n)
		f.Recycle(round)
		return
	}
	select {
	case f.ch <- round:
	default:
		f.held.Add(-n)
		f.Recycle(round)
	}
}

// Recycle returns a slice taken from the feed (or Buffer) to the pool.
func (f *DispatchFeed) Recycle(round []Dispatched) {
	clear(round) // the topics
	round = round[:0]
	f.pool.Put(&round)
}

// Poll returns the next round if one is waiting, without blocking.
func (f *DispatchFeed) Poll() ([]Dispatched, bool) {
	select {
	case r := <-f.ch:
		f.held.Add(-int64(len(r)))
		return r, true
	default:
		return nil, false
	}
}
