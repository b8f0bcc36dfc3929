// Package groups is the engine's consumer group coordinator, as Kafka's KIP-848 puts it in the
// broker: members join a group on a topic over NATS and heartbeat; the coordinator assigns the
// topic's queues (those this engine serves) to them, evenly and stickily, and moves a queue only
// once its owner has let it go.
//
// Every change is an event handled at once: a join, a clean leave, a member's session running
// out (no heartbeat for Config.SessionTimeout, a timer per member) or a revocation running out
// start a rebalance on the spot; nothing polls. The members learn their assignment from the
// reply to their join and heartbeats, and at once from a push to the subject they named.
//
// Fencing is what keeps a message from two live members at once, not timing: every assignment
// of a queue to a member carries an epoch, and a read, a commit or a release must name the
// member and the epoch of the queue's current assignment, or it is refused (ErrFenced). A queue
// being revoked is read by nobody: its owner must release it (committing where it stopped),
// leave, or run out of time, and only then does it go to its next owner, with a new epoch, at
// the offset committed.
//
// The coordinator's state is soft: after a restart of the engine the members find out (their
// heartbeats are refused as from an unknown member) and join again. The committed offsets are
// hard: they are in the offsets table (internal/store/offsets), written before a commit is
// answered.
//
// In a partitioned deployment every engine coordinates the groups on the queues it owns; a
// member joins every engine, and assign rotates the uneven extra queues by the engine's first
// queue so that the members' totals stay even with no coordination between engines.
package groups
