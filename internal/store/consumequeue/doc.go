// Package consumequeue owns Apache RocketMQ's ConsumeQueue: for every (topic, queueId) an
// array of 20-byte units, each naming one message's CommitLog record, so that the n-th message
// of a queue is found at byte n*20 without scanning the CommitLog. The files are RocketMQ's
// byte for byte (docs/STORE-FORMAT.md §2, §3):
//
//	<root>/consumequeue/<topic>/<queueId>/<20-digit byte offset>   UnitsPerFile*20 bytes each
//
//	unit: offset size field
//	           0    8 CommitLog physical offset
//	           8    4 record size (TOTALSIZE)
//	          12    8 tagsCode
//
// A Store holds every queue; a ConsumeQueue is one queue. The files are segment.Queue files
// (mapped once, reference counted), reserved on disk in small steps as they fill, so that tens
// of thousands of mostly idle queues cost what they hold rather than 6 MB each.
//
// Roles. One dispatcher writes a queue (Put); recovery runs the writer-side operations Recover,
// TruncateDirty, CorrectMinOffset before the dispatcher starts; retention (DeleteExpired), one
// flusher (Flush) and any number of readers (Unit, Read, MinOffset, MaxOffset, OffsetByTime) run
// concurrently with the writer. A reader holds a reference on the file it reads, so retention
// can delete a file under it, and it only reads units below the write position, which moves
// after the 20 bytes are in place.
//
// Read-only stores (Options.ReadOnly) serve offline readers that run beside a writing engine
// without its lock: files are mapped read-only, each queue's end is found by Recover's scan
// without changing anything, and Store.Refresh picks up new queues, files and units.
//
// Mapping. A queue maps its files on first use, not when the Store loads, and the Store unmaps
// flushed, idle queues when more than Options.MaxMapped are mapped, so that the number of
// mappings and descriptors (one per file of a mapped queue) stays below vm.max_map_count
// (65,530 by default) and the descriptor limit even with 40,000 queues.
//
// Where this differs from RocketMQ, on purpose:
//   - Put refuses a unit whose offset lies past the end of a non-empty queue (ErrGap) instead of
//     appending it at the wrong offset.
//   - A queue whose only file holds no unit that names a record (nothing, or pre-blank units,
//     maybe torn) takes its first unit at any offset, with a fresh pre-blank fill, not only in
//     the process that created the file: a crash that lost the first units must not wedge
//     re-dispatch.
//   - Units at CommitLog offset 0 never count for the max physical offset, and the min offset
//     never rests on a pre-blank unit, whole or torn by a crash: RocketMQ would take a blank's
//     end (up to 2^31-1) as the point below which everything is already built. A torn blank is
//     told from the unit of the CommitLog's first record by the unit after it, never by its
//     offset: a queue that starts above 0 may hold that record first (Unit.filler).
//   - TruncateDirty zeroes the units it drops in the file that remains, and makes the zeros
//     durable, so that a later crash cannot bring them back.
//   - CorrectMinOffset searches the whole queue, not only the first file.
//   - Flush flushes every full file it meets in one call instead of one file per call.
//
// Everything is synchronous: no goroutines, no logging.
package consumequeue
