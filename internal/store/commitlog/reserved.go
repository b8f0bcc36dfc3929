package commitlog

import "strings"

// reservedProps are the property names a message of the store may not carry under its own
// name: the ones the engine sets (UNIQ_KEY, KEYS, TAGS), the ones the store writes or reads
// (__CRC32#, CLUSTER, INNER_*, DUP_INFO, DELAY, WAIT, TRAN_MSG, REAL_*), and the rest of
// RocketMQ's system names
// (MessageConst.STRING_HASH_SET and its neighbours), which RocketMQ clients and brokers
// interpret: a header called DELAY or TTL would silently change what a RocketMQ consumer does.
var reservedProps = func() map[string]struct{} {
	names := []string{
		PropUniqKey, PropKeys, PropTags,
		PropCRC32, PropCluster, PropWait, PropDelay,
		PropTranMsg, PropRealTopic, PropRealQueueID,
		PropRetryTopic, PropInnerNum, PropInnerBase,
		PropInnerMultiDispatch, PropInnerMultiQueueOffset, PropDupInfo,
		"PGROUP", "MIN_OFFSET", "MAX_OFFSET", "BUYER_ID", "ORIGIN_MESSAGE_ID", "TRANSFER_FLAG",
		"CORRECTION_FLAG", "MQ2_FLAG", "RECONSUME_TIME", "MSG_REGION", "TRACE_ON", "EXTEND_UNIQ_INFO",
		"MAX_RECONSUME_TIMES", "CONSUME_START_TIME", "CHECK_IMMUNITY_TIME_IN_SECONDS",
		"TRAN_PREPARED_QUEUE_OFFSET", "__transactionId__", "TRANSACTION_CHECK_TIMES", "INSTANCE_ID",
		"CORRELATION_ID", "REPLY_TO_CLIENT", "TTL", "ARRIVE_TIME", "PUSH_REPLY_TIME", "MSG_TYPE",
		"POP_CK", "POP_CK_OFFSET", "1ST_POP_TIME", "__SHARDINGKEY", "PROPERTY_FORWARD_QUEUE_ID",
		"REDIRECT", "TRACE_CONTEXT", "TIMER_DELAY_SEC", "TIMER_DELIVER_MS", "__BORNHOST",
		"BORN_TIMESTAMP", "TIMER_ENQUEUE_MS", "TIMER_DEQUEUE_MS", "TIMER_ROLL_TIMES", "TIMER_OUT_MS",
		"TIMER_DEL_UNIQKEY", "TIMER_DELAY_LEVEL",
	}
	m := make(map[string]struct{}, len(names))
	for _, n := range names {
		m[n] = struct{}{}
	}
	return m
}()

// ReservedProperty reports whether name is one of reservedProps, or starts with RocketMQ's
// transient prefix "__RMQ.TRANSIENT." (RocketMQ never stores those).
func ReservedProperty(name string) bool {
	_, ok := reservedProps[name]
	return ok || strings.HasPrefix(name, PropTransientPrefix)
}
