// Package derive works out what a CommitLog record derives, RocketMQ's "reput": its ConsumeQueue
// unit (with the tag code: the hash of TAGS, or a delivery time on the schedule topic) and its
// IndexFile entries (the hashes of topic#UNIQ_KEY and of topic#key for each key of KEYS), and
// builds them into the stores (Builder).
//
// Both ways of working them out call the same functions: ahead of the append, from what the
// encoder puts into the record (Ahead: ingress, so that dispatch need not read the record back),
// and from the record's bytes (PropsOf: dispatch, recovery, verify and repair). Nothing else in
// the engine decides which keys a record has or what its tag code is.
//
// The package is synchronous: no goroutines, no logging.
package derive
