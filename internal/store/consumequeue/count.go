package consumequeue

// Len is how many queues the store has (mapped or not), without the copy and sort of Queues:
// for metrics, read on every scrape.
func (s *Store) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.queues)
}
