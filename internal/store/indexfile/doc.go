// Package indexfile owns RocketMQ's message-key index: the IndexFile format (a 40-byte header, a
// table of 4-byte hash slots and 20-byte entries chained per slot) and the IndexService that
// keeps the directory <root>/index of such files, builds entries for dispatched messages, answers
// key queries and deletes files that retention has made useless. The bytes are RocketMQ's, byte
// for byte (docs/STORE-FORMAT.md §4, §14 items 8-13).
//
// Layout of one file with S slots and N entries (all integers big-endian):
//
//	[0, 40)                  Header: beginTimestamp, endTimestamp, beginPhyOffset, endPhyOffset
//	                         (int64 each), hashSlotCount, indexCount (int32 each)
//	[40, 40+4S)              slot i: the number of the newest entry whose keyHash % S == i, 0 if none
//	[40+4S, 40+4S+20N)       entry n: keyHash int32, phyOffset int64, timeDiff int32 (seconds since
//	                         beginTimestamp), prevIndex int32 (the next older entry of the slot)
//
// Entry 0 is never used, so a file holds N-1 keys. A key is "topic#key"; its hash is the absolute
// value of Java's String.hashCode. The index stores and compares hashes only: a query returns the
// CommitLog offsets of every entry whose hash matches, and the caller must read each message back
// and compare its real key.
//
// Concurrency: one writer (the dispatcher's index sink) calls BuildHashes / PutKey; any number of
// goroutines query at the same time. Readers never see a half-written entry: the writer writes an
// entry, then publishes the new entry count (an atomic), then stores the slot (an atomic 32-bit
// store into the mapping). A reader loads the slot first and the count after it, so everything
// the slot leads to is published. Header fields are mirrored in atomics for readers; the mapped
// header bytes are written through on every put, as RocketMQ does, and read back only at load.
//
// Files are segment.Files: reference counted, so retention can delete a file under a live query,
// which keeps reading valid bytes until it releases.
//
// The package is synchronous: no goroutines, no logging.
package indexfile
