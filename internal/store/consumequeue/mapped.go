package consumequeue

import (
	"errors"
	"sync"
)

// mappedSet lists the queues whose files are mapped, in the order of a CLOCK sweep, and keeps
// their number near Options.MaxMapped: each mapped queue holds one mapping and one descriptor
// per file, and 40,000 queues mapped at once would exhaust the descriptor limit and come close
// to vm.max_map_count.
//
// A queue is listed when it maps its files (on first use after Load or after being unmapped).
// When the list grows past the bound, the hand goes round: a queue used since the hand last
// passed (its used bit set by every Put and read) loses its bit and is passed; one that was
// not is flushed and unmapped if nobody holds it. The bound is soft only while every mapped
// queue is in use.
type mappedSet struct {
	mu     sync.Mutex
	queues []*ConsumeQueue
	hand   int
	errs   []error // from unmapping, reported by Store.Close
}

// noteMapped lists cq as mapped and sweeps if the set is over the bound.
func (s *Store) noteMapped(cq *ConsumeQueue) {
	m := &s.mapped
	m.mu.Lock()
	defer m.mu.Unlock()
	if !cq.ringed {
		cq.ringed = true
		m.queues = append(m.queues, cq)
	}
	s.sweepLocked(cq, mapSweepSteps)
}

// mapSweepSteps bounds the sweep a mapping runs, so that while every mapped queue is dirty
// (between two flushes) each new mapping costs a few steps of the hand, not a full round.
const mapSweepSteps = 32

// sweep unmaps idle queues while the set is over the bound.
func (s *Store) sweep() {
	s.mapped.mu.Lock()
	defer s.mapped.mu.Unlock()
	s.sweepLocked(nil, -1)
}

// sweepLocked moves the CLOCK hand at most maxSteps times (twice round when negative),
// sparing the queue just mapped, whose caller is about to use it. REQUIRES: s.mapped.mu held.
// It only TryLocks queues, so it never waits for a queue while holding the set's lock.
func (s *Store) sweepLocked(spare *ConsumeQueue, maxSteps int) {
	m := &s.mapped
	limit := s.cfg.maxMapped
	if limit < 0 {
		return
	}
	steps := 2 * len(m.queues)
	if maxSteps >= 0 {
		steps = min(steps, maxSteps)
	}
	for ; steps > 0 && len(m.queues) > limit; steps-- {
		if m.hand >= len(m.queues) {
			m.hand = 0
		}
		cq := m.queues[m.hand]
		if cq == spare || cq.used.Swap(false) {
			m.hand++
			continue
		}
		gone, err := cq.evict()
		if err != nil {
			m.errs = append(m.errs, err)
		}
		if !gone {
			m.hand++
			continue
		}
		cq.ringed = false
		last := len(m.queues) - 1
		m.queues[m.hand] = m.queues[last]
		m.queues[last] = nil
		m.queues = m.queues[:last]
	}
}

// mappedQueues is a snapshot of the listed queues.
func (s *Store) mappedQueues() []*ConsumeQueue {
	s.mapped.mu.Lock()
	defer s.mapped.mu.Unlock()
	return append([]*ConsumeQueue(nil), s.mapped.queues...)
}

// MappedQueues is how many queues have their files mapped now.
func (s *Store) MappedQueues() int {
	s.mapped.mu.Lock()
	defer s.mapped.mu.Unlock()
	return len(s.mapped.queues)
}

// takeErrs returns and forgets the unmapping errors.
func (s *Store) takeErrs() error {
	s.mapped.mu.Lock()
	defer s.mapped.mu.Unlock()
	err := errors.Join(s.mapped.errs...)
	s.mapped.errs = nil
	return err
}
