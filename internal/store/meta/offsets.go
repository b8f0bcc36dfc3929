package meta

import (
	"maps"
	"sync"
)

// ConsumerOffsetFileName is the consumer offset file in ConfigDirName.
const ConsumerOffsetFileName = "consumerOffset.json"

// OffsetKeySeparator joins topic and group in the keys of the offset table, as RocketMQ's
// TOPIC_GROUP_SEPARATOR. Neither a topic nor a group name may contain it.
const OffsetKeySeparator = "@"

// ConsumerOffsetFile is the content of consumerOffset.json in RocketMQ's shape: for every
// "<topic>@<group>", the next queue offset to consume per queue id. Save writes the queue ids as
// quoted keys ({"0":250}); RocketMQ's fastjson writes them bare ({0:250}), and Load accepts both.
type ConsumerOffsetFile struct {
	OffsetTable map[string]map[int32]int64 `json:"offsetTable"`
}

// OffsetKey is the offset table key of a group's offsets in a topic.
func OffsetKey(group, topic string) string { return topic + OffsetKeySeparator + group }

// ConsumerOffsets is the live consumer offset table, shared by the goroutines that serve
// consumers and the one that saves it. All methods are safe for concurrent use. The zero value
// is an empty table.
type ConsumerOffsets struct {
	mu    sync.Mutex
	table map[string]map[int32]int64 // OffsetKey -> queue id -> offset
}

// NewConsumerOffsets returns a table holding a copy of f's offsets (f may be the zero value).
func NewConsumerOffsets(f ConsumerOffsetFile) *ConsumerOffsets {
	return &ConsumerOffsets{table: cloneTable(f.OffsetTable)}
}

// Offset returns the committed offset of group in the queue (topic, queueID), and whether
// there is one.
func (o *ConsumerOffsets) Offset(group, topic string, queueID int32) (int64, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	off, ok := o.table[OffsetKey(group, topic)][queueID]
	return off, ok
}

// SetOffset records offset as the committed offset of group in the queue (topic, queueID).
func (o *ConsumerOffsets) SetOffset(group, topic string, queueID int32, offset int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.table == nil {
		o.table = make(map[string]map[int32]int64)
	}
	key := OffsetKey(group, topic)
	q := o.table[key]
	if q == nil {
		q = make(map[int32]int64)
		o.table[key] = q
	}
	q[queueID] = offset
}

// Snapshot returns a deep copy of the table, for Save to write while commits go on.
func (o *ConsumerOffsets) Snapshot() ConsumerOffsetFile {
	o.mu.Lock()
	defer o.mu.Unlock()
	return ConsumerOffsetFile{OffsetTable: cloneTable(o.table)}
}

func cloneTable(t map[string]map[int32]int64) map[string]map[int32]int64 {
	out := make(map[string]map[int32]int64, len(t))
	for k, q := range t {
		out[k] = maps.Clone(q)
	}
	return out
}
