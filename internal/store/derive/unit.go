package derive

import (
	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/internal/store/consumequeue"
	"github.com/rocketstore/engine/internal/store/javahash"
)

// Queued says whether a record of transaction type tx (commitlog.View.TransactionType) gets a
// ConsumeQueue unit: normal and committed messages do, half (prepared) and rolled-back ones do
// not, as in RocketMQ.
func Queued(tx int32) bool { return tx == commitlog.TxNotType || tx == commitlog.TxCommit }

// TagsCode is the ConsumeQueue tag code of a record with props p stored at storeTimestamp: Java's
// String.hashCode of TAGS sign-extended to 64 bits, 0 without tags. On the schedule topic
// (commitlog.ScheduleTopic) with a DELAY it is instead the delivery time, storeTimestamp + the
// delay of the level (clamped to the highest level; a level <= 0 keeps the tags hash), as
// RocketMQ's checkMessageAndReturnSize computes it. levels nil means DefaultDelayLevels. A DELAY
// that is not a Java int keeps the tags hash (RocketMQ would reject the whole record; a field only
// the dispatcher derives is no reason to lose data). It allocates nothing.
func TagsCode(p Props, storeTimestamp int64, levels DelayLevels) int64 {
	if delay, ok := deliveryDelay(p, levels); ok {
		return storeTimestamp + delay
	}
	return tagsHash(p.Tags)
}

// tagsHash is the tag code of a TAGS value (no delivery time): its hashCode sign-extended, 0 if
// empty.
func tagsHash(tags string) int64 { return javahash.TagsCode(tags) }

// deliveryDelay is the delay of the record's level when its tag code is a delivery time.
func deliveryDelay(p Props, levels DelayLevels) (int64, bool) {
	if p.Delay == "" || p.Topic != commitlog.ScheduleTopic {
		return 0, false
	}
	level, ok := parseJavaInt(p.Delay)
	if !ok {
		return 0, false
	}
	if levels == nil {
		levels = defaultDelayLevels
	}
	level = min(level, int64(len(levels)))
	if level <= 0 {
		return 0, false
	}
	return levels[level-1], true
}

// Unit is the ConsumeQueue unit of the record v at phys, whose props are p (PropsOf(v)).
func Unit(phys int64, v commitlog.View, p Props, levels DelayLevels) consumequeue.Unit {
	return consumequeue.Unit{Phys: phys, Size: int32(v.TotalSize()), TagsCode: TagsCode(p, v.StoreTimestamp(), levels)}
}
