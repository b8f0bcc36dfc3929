// Package offsets keeps the offsets consumer groups commit, per (group, topic, queue), where
// both RocketMQ and a crashed engine find them.
//
// Two files in <store>/config:
//
//   - consumerOffset.json: RocketMQ's own table ({"offsetTable": {"<topic>@<group>": {"<queueId>":
//     offset}}}, written by meta.Save: atomic replacement, the previous version as .bak). A
//     RocketMQ broker opening the store reads the groups' progress from it. It is rewritten when
//     the table is compacted: at every start that found journal entries, when the journal passes
//     Options.CompactBytes, and at a clean stop. The engine's own details of each offset (the
//     assignment epoch and member that committed it, and when) go beside it, in
//     consumerOffsetMeta.json, written the same way just before it.
//   - consumerOffset.journal: the engine's append-only log of every change since that table was
//     written: one record per commit that moved an offset, per deleted group. A commit is
//     answered once its record is written (and fsynced, in sync mode: group commit, one fsync
//     for every commit waiting), so a committed offset survives a kill -9 always, and a power
//     loss in sync mode; only what changed is written.
//
// The journal names the table it extends (the SHA-256 of consumerOffset.json's bytes), so that a
// table someone else rewrote since (RocketMQ's broker, run on the store after the engine
// crashed) is never overridden by an older journal: that journal is then ignored, and logged.
// A compaction writes both JSON files before it starts a new journal, so a crash between the
// two leaves a journal naming the old table: ignored, and the new table holds everything.
package offsets
