// Package checkpoint owns the store's checkpoint file: RocketMQ's StoreCheckpoint (five
// big-endian longs in a 4096-byte file) plus an extension of ours in the bytes RocketMQ leaves
// zero, which records CommitLog offsets so that our recovery can start from an offset instead
// of from a timestamp three seconds back.
//
// The file stays a valid RocketMQ checkpoint: RocketMQ reads only the first 40 bytes (older
// versions 24), and writes the extension bytes back unchanged because it maps the whole page.
// RocketMQ does rewrite those 40 bytes whenever it runs on the store, so the extension is checked
// on its own and records whether they changed since it was written (Ext.Rewritten).
package checkpoint

// Checkpoint is the content of the checkpoint file.
type Checkpoint struct {
	// PhysicMsgTimestamp is the store timestamp (Unix ms) of the last CommitLog record known
	// flushed.
	PhysicMsgTimestamp int64
	// LogicsMsgTimestamp is the store timestamp of the last message written to a ConsumeQueue
	// that was flushed.
	LogicsMsgTimestamp int64
	// IndexMsgTimestamp is the end timestamp of the last full IndexFile flushed.
	IndexMsgTimestamp int64
	// MasterFlushedOffset is the HA master's flushed offset, kept for RocketMQ (slave side).
	MasterFlushedOffset int64
	// ConfirmPhyOffset is the CommitLog confirm offset RocketMQ sets in recovery.
	ConfirmPhyOffset int64

	// Ext is our extension; RocketMQ never sees it.
	Ext Ext
}

// Ext is the part of the checkpoint that only our engine writes and reads.
type Ext struct {
	// Valid says that the extension is present and intact. Decode sets it false for a file
	// RocketMQ wrote; Encode writes the extension only when it is true, and otherwise leaves the
	// bytes zero, as RocketMQ does.
	Valid bool
	// Rewritten says that RocketMQ's 40 bytes are not the ones the engine wrote with this
	// extension: RocketMQ ran on the store after the engine (or those bytes were damaged, which
	// cannot be told apart). The offsets were true when written, but RocketMQ may have appended
	// records, recovered and rebuilt files since: they are a lower bound on what is dispatched
	// and durable, and PropCRCFrom no longer holds for the records after them.
	Rewritten bool
	// Stale says that an extension is there but can no longer be checked: a version-1
	// extension, whose CRC covered RocketMQ's bytes too, after RocketMQ changed more than its
	// confirm and HA offsets. Valid is then false and the offsets are zero: the caller recovers
	// as RocketMQ does, from RocketMQ's fields.
	Stale bool
	// DurableOffset is the CommitLog offset below which every byte is known synced.
	DurableOffset int64
	// DispatchedOffset is the CommitLog offset below which every record's ConsumeQueue and
	// IndexFile entries are both built and flushed: recovery re-dispatches from here.
	DispatchedOffset int64
	// PropCRCFrom is the CommitLog offset from which every record carries the whole-record
	// __CRC32# property (-1: not known). Recovery requires it there: damage to the property's
	// own name would otherwise make it look absent, and the record pass on its body CRC alone.
	PropCRCFrom int64
}

// minTimestampMargin is how far before the checkpoint's timestamps RocketMQ's abnormal
// recovery starts, to cover records whose timestamps are slightly out of order.
const minTimestampMargin = 3000

// MinTimestamp is RocketMQ's getMinTimestamp: the earlier of the CommitLog and ConsumeQueue
// timestamps less three seconds, never below zero. Abnormal recovery starts at the newest
// CommitLog file whose first record is no later than this.
func (c Checkpoint) MinTimestamp() int64 {
	// Go's int64 arithmetic wraps as Java's long does, so even absurd values give what RocketMQ
	// computes.
	return max(0, min(c.PhysicMsgTimestamp, c.LogicsMsgTimestamp)-minTimestampMargin)
}

// MinTimestampIndex is RocketMQ's getMinTimestampIndex: MinTimestamp, but no later than the
// IndexFile timestamp, used when the index must be rebuilt safely too.
func (c Checkpoint) MinTimestampIndex() int64 {
	return min(c.MinTimestamp(), c.IndexMsgTimestamp)
}
