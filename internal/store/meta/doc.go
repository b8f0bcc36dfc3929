// Package meta owns the store's small metadata files, the ones RocketMQ keeps beside its data:
// the abort marker that tells the next start whether the last one ended cleanly, the lock that
// keeps two processes out of one store, and the config JSON files (topics.json,
// consumerOffset.json) with their .bak fallback. It also owns WriteFileAtomic, the one way the
// store replaces a small file so that a crash leaves the old or the new content, never a mix.
//
// Every write here is durable when the call returns: the file is fsynced before it is renamed
// into place and the directory is fsynced after, because the callers act on these files at
// startup (abort decides normal or abnormal recovery, offsets decide where consumers resume).
package meta
