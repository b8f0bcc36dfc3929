package batched

import (
	"sync"

	"github.com/rocketstore/engine/stages/ingress/internal/bounded"
)

// received is, per batched-ack stream, the set of sequences a copy of which has entered the
// pipeline (and was not refused since): the stream's dedupe, in place of the appender's window of
// message ids. A sequence is a small integer, so a stream's set is a bitmap above the publisher's
// floor, not a map of strings: claiming a sequence costs a map lookup by stream and a bit, where
// the appender's window costs a map insert of two strings per message and keeps 500,000 of them
// alive for the garbage collector (measured: it made batched ingest 30 to 50% slower).
//
// The first copy of a sequence to claim it goes on; a later copy is dropped at ingress, because
// the first one's outcome answers the sequence (a resend first looks in the store: a copy stored
// and acked already, whose ack was lost, is answered from there). A refusal releases the
// sequence (tracker.go), so that a retry of a message the store could not take is stored.
//
// Bounds: the table holds at most MaxStreams streams (two generations, like the subject cache: a
// stream idle for MaxStreams/2 new streams goes); a set spans at most MaxAhead sequences above its
// floor, and a sequence beyond that is not claimed: it falls back to the appender's window (its
// record keeps its id as Record.MsgID). A stream dropped from the table loses its claims: a resend
// that then overtakes its own original (still on its way, not yet in the IndexFile) could be
// stored twice; that takes more than MaxStreams streams active at once.
type received struct {
	table *bounded.Cache[string, *Claims]
	ahead int
}

// Claims is one stream's claimed sequences. Workers claim (concurrently: a stream spreads over
// queues, so over workers); the tracker releases refused ones.
type Claims struct {
	mu   sync.Mutex
	seqs seqSet // guarded by mu
}

func newReceived(streams, ahead int) *received {
	return &received{table: bounded.NewCache[string, *Claims](streams), ahead: ahead}
}

func (r *received) set(stream string) *Claims {
	return r.table.GetOrMake(stream, func(string) *Claims { return &Claims{seqs: seqSet{max: r.ahead}} })
}

// seen says whether a copy of seq entered the pipeline, or seq is at or below floor (answered
// to the publisher). It moves the set up to floor.
func (s *Claims) seen(seq, floor uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seqs.forget(floor)
	return s.seqs.has(seq)
}

// Claim marks seq as entered; first is false when a copy did already, tracked false when seq
// lies beyond the set's reach (not claimed).
func (s *Claims) Claim(seq, floor uint64) (first, tracked bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seqs.forget(floor)
	if s.seqs.has(seq) {
		return false, true
	}
	return true, s.seqs.add(seq)
}

// Release forgets that seq entered: it was refused, and a retry must be stored.
func (s *Claims) Release(seq uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seqs.remove(seq)
}

// release forgets a claim of stream's seq, if the stream is still in the table.
func (r *received) release(stream string, seq uint64) {
	if s, ok := r.table.Get(stream); ok {
		s.Release(seq)
	}
}
