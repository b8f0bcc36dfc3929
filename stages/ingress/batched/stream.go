package batched

import (
	"math/bits"
	"slices"
	"time"

	"github.com/rocketstore/engine/internal/wire"
)

// stream is the tracker's state of one batched-ack stream (docs/BATCHED-ACKS.md). Owned by the
// tracker goroutine.
//
// Sequences move through three states: unseen, seen (stored, or refused, and reported in an ack)
// and below through. through is the cumulative ack: every sequence at or below it was stored and
// its position sent in an ack (this one or an earlier one), or lies at or below the floor the
// publisher sent (its own "everything up to here is answered"). A refused sequence is seen but
// stops through until the publisher's floor passes it: the cumulative ack never claims a refused
// message is stored. seen holds the seen sequences above through, within MaxAhead of it.
//
// Missing sequences: an unseen sequence below a seen one may still be on its way (in another
// ingress worker's batch), so it is only declared missing once the markers of an epoch requested
// after the later sequence was seen have come back from every worker (tracker.go): decided is the
// highest sequence so covered. Every unseen sequence in (through, decided] is missing; each is
// reported once (reported is how far the reports went); a resend that is lost again is the
// publisher's timeout's business.
type stream struct {
	id    string
	ackTo string

	through  uint64
	seen     seqSet
	refused  []uint64 // refused sequences above through, sorted: through stops below each
	maxSeen  uint64   // the highest tracked sequence seen, or through
	decided  uint64
	reported uint64
	// waitEpoch is the marker epoch whose return decides the gaps up to waitHigh (0: none).
	waitEpoch, waitHigh uint64
	// sentThrough is the through of the last ack published.
	sentThrough uint64

	// The next ack: positions of what was stored since the last one, in runs; refusals; and
	// whether new missing sequences were decided.
	runs []wire.StoredRun
	open map[runKey]int // runs[open[k]] is the run that may grow for k
	// lastRun is the run addRun last grew or opened (-1: none since the last ack), tried before
	// open: a pack's entries come one after another to one queue, and a map lookup per message
	// was 3% of the engine.
	lastRun    int
	refusals   []wire.RefusedRun
	decidedNew bool

	last       time.Time // the last round the stream had news in: the LRU order
	prev, next *stream   // the tracker's LRU list, most recent first
	inRound    bool      // on the tracker's touched list this round
	waiting    bool      // on the tracker's waiting list
	gone       bool      // evicted or expired
}

type runKey struct {
	topic   string
	queueID int32
	dup     bool
}

// extends says whether seq, refused with code and desc, continues the refused run r.
func extends(r *wire.RefusedRun, seq uint64, code int, desc string) bool {
	return r.Code == code && r.Description == desc && seq == r.Seq+r.Count
}

func newStream(id, ackTo string, floor uint64, maxAhead int) *stream {
	s := &stream{id: id, ackTo: ackTo, through: floor, maxSeen: floor, decided: floor, reported: floor,
		sentThrough: floor, open: make(map[runKey]int), lastRun: -1}
	s.seen = seqSet{base: floor &^ 63, max: maxAhead}
	return s
}

// applyFloor raises through to the publisher's floor.
func (s *stream) applyFloor(floor uint64) {
	if floor <= s.through {
		return
	}
	s.through = floor
	s.maxSeen = max(s.maxSeen, floor)
	s.decided = max(s.decided, floor)
	s.reported = max(s.reported, floor)
	i, _ := slices.BinarySearch(s.refused, floor+1)
	s.refused = s.refused[:copy(s.refused, s.refused[i:])]
	s.seen.forget(floor)
}

// stored records that seq is stored at (topic, queueID, queueOffset); dup says it is a
// duplicate answered with the first copy's position.
func (s *stream) stored(seq uint64, topic string, queueID int32, queueOffset int64, dup bool) {
	s.addRun(seq, topic, queueID, queueOffset, dup)
	if seq <= s.through || !s.seen.add(seq) {
		return // an answer again (the publisher lost the first), or beyond MaxAhead
	}
	s.maxSeen = max(s.maxSeen, seq)
	if i, ok := slices.BinarySearch(s.refused, seq); ok {
		s.refused = slices.Delete(s.refused, i, i+1) // refused before, stored on a resend
	}
}

func (s *stream) addRun(seq uint64, topic string, queueID int32, queueOffset int64, dup bool) {
	// The last run touched is the open one of its key: any later run of that key would have
	// been touched since.
	if i := s.lastRun; i >= 0 {
		if r := &s.runs[i]; r.QueueID == queueID && r.Dup == dup && r.Topic == topic && grow(r, seq, queueOffset) {
			return
		}
	}
	k := runKey{topic, queueID, dup}
	if i, ok := s.open[k]; ok && grow(&s.runs[i], seq, queueOffset) {
		s.lastRun = i
		return
	}
	s.open[k] = len(s.runs)
	s.lastRun = len(s.runs)
	s.runs = append(s.runs, wire.StoredRun{Topic: topic, QueueID: queueID, QueueOffset: queueOffset,
		Seq: seq, Step: 1, Count: 1, Dup: dup})
}

// grow adds the message seq, stored at queueOffset, to the run r (Count stored messages of one
// queue at consecutive queue offsets, with sequences Seq, Seq+Step...) if it continues r: the
// next queue offset, and the next sequence at r's step (any later one sets the step of a run of
// one).
func grow(r *wire.StoredRun, seq uint64, queueOffset int64) bool {
	if queueOffset != r.QueueOffset+int64(r.Count) {
		return false
	}
	switch {
	case r.Count == 1 && seq > r.Seq:
		r.Step, r.Count = seq-r.Seq, 2
		return true
	case r.Count > 1 && seq == r.Seq+r.Count*r.Step:
		r.Count++
		return true
	}
	return false
}

// refuse records that seq was not stored, with the reply code and the reason.
func (s *stream) refuse(seq uint64, code int, desc string) {
	if n := len(s.refusals); n > 0 && extends(&s.refusals[n-1], seq, code, desc) {
		s.refusals[n-1].Count++
	} else {
		s.refusals = append(s.refusals, wire.RefusedRun{Seq: seq, Count: 1, Code: code, Description: desc})
	}
	if seq <= s.through || s.seen.has(seq) || !s.seen.add(seq) {
		return // answered already (stored or refused), or beyond MaxAhead
	}
	s.maxSeen = max(s.maxSeen, seq)
	if i, ok := slices.BinarySearch(s.refused, seq); !ok {
		s.refused = slices.Insert(s.refused, i, seq)
	}
}

// advance moves through over the seen sequences that follow it, up to the first refused one.
func (s *stream) advance() {
	stop := s.seen.firstUnset(s.through+1) - 1
	if len(s.refused) > 0 && s.refused[0] <= stop {
		stop = s.refused[0] - 1
	}
	if stop > s.through {
		s.through = stop
		s.decided = max(s.decided, stop)
		s.reported = max(s.reported, stop)
		s.seen.forget(stop)
	}
}

// undecided says whether an unseen sequence lies below a seen one, above what was decided.
func (s *stream) undecided() bool {
	from := max(s.through, s.decided) + 1
	return s.maxSeen >= from && s.seen.firstUnset(from) < s.maxSeen
}

// missing appends to dst the ranges of missing sequences not reported yet, at most limit ranges,
// and marks them reported.
func (s *stream) missing(dst [][2]uint64, limit int) [][2]uint64 {
	seq := max(s.through, s.reported) + 1
	for seq <= s.decided {
		first := s.seen.firstUnset(seq)
		if first > s.decided {
			seq = s.decided + 1 // none left
			break
		}
		if limit == 0 {
			break // the rest goes in the next ack
		}
		last := min(s.seen.firstSet(first)-1, s.decided)
		dst = append(dst, [2]uint64{first, last})
		limit--
		seq = last + 1
	}
	s.reported = max(s.reported, seq-1)
	return dst
}

// news says whether the next ack has something to say.
func (s *stream) news() bool {
	return len(s.runs) > 0 || len(s.refusals) > 0 || s.decidedNew && s.reported < s.decided
}

// sent resets what went out in an ack.
func (s *stream) sent() {
	clear(s.runs)
	s.runs = s.runs[:0]
	clear(s.open)
	s.lastRun = -1
	clear(s.refusals)
	s.refusals = s.refusals[:0]
	s.decidedNew = false
	s.sentThrough = s.through
}

// seqSet is a set of sequences above base: a bitmap of at most max bits, base a multiple of 64.
// Everything at or below base counts as present.
type seqSet struct {
	base  uint64
	words []uint64
	max   int
}

func (s *seqSet) has(seq uint64) bool {
	if seq <= s.base {
		return true
	}
	i := seq - s.base - 1
	if i/64 >= uint64(len(s.words)) {
		return false
	}
	return s.words[i/64]&(1<<(i%64)) != 0
}

// add puts seq in the set; false when it lies beyond the bitmap's reach.
func (s *seqSet) add(seq uint64) bool {
	if seq <= s.base {
		return true
	}
	i := seq - s.base - 1
	if i >= uint64(s.max) {
		return false
	}
	w := int(i / 64)
	for len(s.words) <= w {
		s.words = append(s.words, 0)
	}
	s.words[w] |= 1 << (i % 64)
	return true
}

// remove takes seq out of the set (a no-op at or below base).
func (s *seqSet) remove(seq uint64) {
	if seq <= s.base {
		return
	}
	i := seq - s.base - 1
	if i/64 < uint64(len(s.words)) {
		s.words[i/64] &^= 1 << (i % 64)
	}
}

// firstUnset is the smallest sequence >= from not in the set.
func (s *seqSet) firstUnset(from uint64) uint64 {
	return s.first(from, ^uint64(0), uint64(len(s.words))*64)
}

// firstSet is the smallest sequence >= from in the set (above base), or the end of the bitmap's
// reach.
func (s *seqSet) firstSet(from uint64) uint64 { return s.first(from, 0, uint64(s.max)) }

// first is the smallest sequence >= from whose bit, flipped by flip (all ones: look for a
// sequence not in the set; 0: one in it), is set; past the words, from or base+1+end.
func (s *seqSet) first(from, flip, end uint64) uint64 {
	from = max(from, s.base+1)
	i := from - s.base - 1
	for w := i / 64; w < uint64(len(s.words)); w++ {
		word := s.words[w] ^ flip
		if w == i/64 {
			word &^= 1<<(i%64) - 1 // below from: as if not there
		}
		if word != 0 {
			return s.base + 1 + w*64 + uint64(bits.TrailingZeros64(word))
		}
	}
	return max(from, s.base+1+end)
}

// forget drops what lies at or below upTo, a word at a time.
func (s *seqSet) forget(upTo uint64) {
	nb := upTo &^ 63
	if nb <= s.base {
		return
	}
	drop := (nb - s.base) / 64
	if drop >= uint64(len(s.words)) {
		s.words = s.words[:0]
	} else {
		n := copy(s.words, s.words[drop:])
		clear(s.words[n:])
		s.words = s.words[:n]
	}
	s.base = nb
}
