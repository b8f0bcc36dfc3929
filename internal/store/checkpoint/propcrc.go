package checkpoint

import "github.com/rocketstore/engine/internal/store/commitlog"

// PropCRCRule is the rule the engine's recovery, verify and repair apply to the records of a
// store with this checkpoint: the __CRC32# property is required from the extension's
// PropCRCFrom up to its durable offset, and nowhere without a valid extension (a store RocketMQ
// wrote).
func (c Checkpoint) PropCRCRule() commitlog.PropCRCRule {
	if !c.Ext.Valid {
		return commitlog.PropCRCRule{}
	}
	return commitlog.NewPropCRCRule(c.Ext.PropCRCFrom, c.Ext.DurableOffset)
}
