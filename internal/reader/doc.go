// Package reader is the read side of the store: it serves consumers and tools from the
// ConsumeQueues, the CommitLog and the IndexFiles while the engine writes them.
//
//	Get            pull by queue offset, with RocketMQ's statuses, tag filtering and long polling
//	Lookup         a message by its offset message id
//	Query          messages by key (UNIQ_KEY or a KEYS token) within a store-time range
//	OffsetForTime  the first queue offset stored at or after a time
//	Offsets        min/max offsets (and store times) of a topic's queues; Topics lists them
//	ConsumerOffsets  committed consumer offsets, persisted to config/consumerOffset.json
//
// A Reader is built over stores the engine has open (New), or opens a store directory
// read-only by itself, without the lock, even while an engine writes it (OpenOffline).
//
// # Copy once
//
// Units are decoded straight from the ConsumeQueue mapping into a small array on the stack.
// A record is parsed in place in the CommitLog mapping while its segment is referenced (one
// reference per segment a call touches, not one per record), checked against its unit, and
// its bytes are then copied exactly once, into a buffer that belongs to the result; every
// field of the Message (topic, tags, keys, properties, message id, body) is a view of that
// copy. The records of one Get share one buffer sized from their units. Nothing aliases the
// mapping after a call returns, so retention may delete a segment at any time.
//
// # Long polling
//
// A Get that finds nothing at the head of its queue and asks to Wait blocks until the
// Dispatched watermark moves past the value it had before the queue was read, then reads
// again, until something is found, the wait times out or ctx ends. Every unit is in its
// ConsumeQueue before Dispatched passes its record, so a message that arrives during the read
// cannot be missed: either the read saw its unit, or Dispatched had not yet passed it and its
// dispatch wakes the wait. Nothing polls: the wait is Watermark.Wait, which takes its waiter
// off the mark when the poll's deadline or ctx ends it, so that polls timing out at the head
// of an idle queue leave nothing behind. A waiter wakes on every dispatch step of any queue
// (the watermark is store-wide), re-reads its queue (a few atomic loads when nothing is new)
// and waits again.
//
// # Offline readers
//
// OpenOffline maps the CommitLog, the ConsumeQueues and the IndexFiles read-only and never
// writes, creates, truncates or syncs anything, so it needs no lock. It sees what was on disk
// when it opened; Refresh picks up what the writer added since. The ConsumeQueues find their
// end with RocketMQ's recovery scan made read-only (consumequeue.Options.ReadOnly). The
// newest unit of a queue may have been caught in the middle of its write, so an offline Get
// confirms a tags-code miss on it with the record, and takes a mismatch between it and its
// record as the end of the queue for now rather than as damage.
//
// The package has no goroutines of its own and does not log.
package reader
