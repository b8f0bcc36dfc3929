package checkpoint

import "github.com/rocketstore/engine/internal/store/commitlog"

// PropCRCRule is the rule the engine's recovery, verify and repair apply to the records of a
// store with this checkpoint: the __CRC32# property is required from the extension's
// PropCRCFrom up to its durable offset, and nowhere without a valid extension (a store RocketMQ
// wrote) or after RocketMQ rewrote the checkpoint (it may have appended records without the
// property, and the extension's offsets are then only a lower bound).
func (c Checkpoint) PropCRCRule() commitlog.PropCRCRule {
	if !c.Ext.Valid || c.Ext.Rewritten {
		return commitlog.PropCRCRule{}
	}
	return commitlog.NewPropCRCRule(c.Ext.PropCRCFrom, c.Ext.DurableOffset)
}
