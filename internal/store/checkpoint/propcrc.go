package checkpoint

import "github.com/rocketstore/engine/internal/store/commitlog"

// PropCRCRule is the rule the engine's recovery, verify and repair apply to the records of a
// store with this checkpoint (commitlog.NewPropCRCRule): while the engine was the last to write
// (a valid extension that RocketMQ has not rewritten), the __CRC32# property is required from
// the extension's PropCRCFrom to the end of the log, and well-formed properties past its
// durable offset, since only the engine wrote there. Without a valid extension (a store RocketMQ
// wrote), or after RocketMQ rewrote the checkpoint (it may have appended records without the
// property, and the extension's offsets are then only a lower bound), nothing is required.
func (c Checkpoint) PropCRCRule() commitlog.PropCRCRule {
	if !c.Ext.Valid || c.Ext.Rewritten {
		return commitlog.PropCRCRule{}
	}
	return commitlog.NewPropCRCRule(c.Ext.PropCRCFrom, c.Ext.DurableOffset)
}
