package indexfile

// Len is how many IndexFiles the service has, without the copy of Files: for metrics, read on
// every scrape.
func (s *Service) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.files)
}
