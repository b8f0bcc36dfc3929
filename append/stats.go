package appender

import "sync/atomic"

// statsCounters are written by the appender goroutine and read by Stats from anywhere.
type statsCounters struct {
	batches, records, bytes, duplicates, errors atomic.Int64
	dedupeSize                                  atomic.Int64
	dedupeEvicted, dedupeLookups, dedupeFound   atomic.Int64
}

// Stats returns the appender's counters so far.
func (a *Appender) Stats() Stats {
	s := &a.stats
	return Stats{
		Batches:    s.batches.Load(),
		Records:    s.records.Load(),
		Bytes:      s.bytes.Load(),
		Duplicates: s.duplicates.Load(),
		Errors:     s.errors.Load(),
		DedupeSize: int(s.dedupeSize.Load()),

		DedupeEvicted: s.dedupeEvicted.Load(),
		DedupeLookups: s.dedupeLookups.Load(),
		DedupeFound:   s.dedupeFound.Load(),
	}
}
