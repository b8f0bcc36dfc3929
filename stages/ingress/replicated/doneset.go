package replicated

import (
	"slices"

	"github.com/nats-io/nats.go/jetstream"
)

// doneSet is what is done of a partition: everything up to floor, and above it the sequences
// done out of order, each with its message to ack, and the runs of sequences the stream does not
// hold (deleted, purged, past its retention) as ranges. A gap of any length (a purge of 10^8
// messages, a sequence 2^40 ahead) costs one range, not one entry per sequence: the entries are
// bounded by what is in flight, whatever the stream skipped. Guarded by Partition.mu.
type doneSet struct {
	floor uint64
	one   map[uint64]jetstream.Msg // done above floor+1, with their ack (nil: none)
	gaps  []seqRange               // skipped above floor+1, ascending by from
}

// seqRange is the sequences from..to, both included.
type seqRange struct{ from, to uint64 }

// reset starts over at floor, forgetting everything above it.
func (s *doneSet) reset(floor uint64) {
	s.floor = floor
	clear(s.one)
	s.gaps = s.gaps[:0]
}

// add records seq as done, with ack its message to ack (nil: none). A sequence at or below the
// floor is done already.
func (s *doneSet) add(seq uint64, ack jetstream.Msg) {
	if seq > s.floor {
		if s.one == nil {
			s.one = map[uint64]jetstream.Msg{}
		}
		s.one[seq] = ack
	}
}

// skip records the sequences from..to as done, with no ack: the stream does not hold them.
func (s *doneSet) skip(from, to uint64) {
	if to < from || to <= s.floor {
		return
	}
	if n := len(s.gaps); n > 0 && s.gaps[n-1].to+1 >= from && s.gaps[n-1].from <= from {
		// The run continues the last one (the loop skips in sequence order).
		s.gaps[n-1].to = max(s.gaps[n-1].to, to)
		return
	}
	i, _ := slices.BinarySearchFunc(s.gaps, from, func(r seqRange, from uint64) int {
		switch {
		case r.from < from:
			return -1
		case r.from > from:
			return 1
		}
		return 0
	})
	s.gaps = slices.Insert(s.gaps, i, seqRange{from, to})
}

// advance moves the floor over every sequence done contiguously above it and returns the last
// ack it passed (nil if none): acking it acks everything up to it.
func (s *doneSet) advance() (ack jetstream.Msg) {
	for {
		if a, ok := s.one[s.floor+1]; ok {
			delete(s.one, s.floor+1)
			s.floor++
			if a != nil {
				ack = a
			}
			continue
		}
		if len(s.gaps) > 0 && s.gaps[0].from <= s.floor+1 {
			s.floor = max(s.floor, s.gaps[0].to)
			s.gaps = s.gaps[1:]
			continue
		}
		return ack
	}
}

// pending is how many entries the set holds above the floor (single sequences and ranges).
func (s *doneSet) pending() int { return len(s.one) + len(s.gaps) }
