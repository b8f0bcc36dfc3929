// Package dispatch builds what is derived from the CommitLog: RocketMQ's "reput". The
// dispatcher follows the log up to a limit (Durable in sync mode, Written in async mode), turns
// each record into a ConsumeQueue unit and IndexFile entries, and advances the Dispatched
// watermark. Recovery re-dispatches through the same Builder, so live traffic and recovery share
// one code path.
package dispatch

import (
	"fmt"
	"unsafe"

	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/internal/store/consumequeue"
	"github.com/rocketstore/engine/internal/store/indexfile"
	"github.com/rocketstore/engine/stages"
)

// Builder applies one record to the ConsumeQueues and the IndexFiles. It is owned by one
// goroutine at a time (the dispatcher, or recovery before the dispatcher starts).
type Builder struct {
	cq          *consumequeue.Store
	index       *indexfile.Service // nil when indexing is off
	delayLevels commitlog.DelayLevels

	// queues caches the ConsumeQueue of each (topic, queue) so that the hot path looks it up
	// without converting the topic bytes to a string (m[string(b)] does not allocate).
	queues map[string]map[int32]*consumequeue.ConsumeQueue
	// last is the queue queueByName found last.
	last struct {
		topic string
		id    int32
		cq    *consumequeue.ConsumeQueue
	}

	// IndexFilled is the end timestamp of the last IndexFile that filled up (for the
	// checkpoint's indexMsgTimestamp); LastStoreTimestamp that of the last record applied.
	IndexFilled        int64
	LastStoreTimestamp int64
}

// NewBuilder makes a builder over the stores; index may be nil.
func NewBuilder(cq *consumequeue.Store, index *indexfile.Service, levels commitlog.DelayLevels) *Builder {
	if levels == nil {
		levels = commitlog.DefaultDelayLevels()
	}
	return &Builder{cq: cq, index: index, delayLevels: levels, queues: make(map[string]map[int32]*consumequeue.ConsumeQueue)}
}

// Apply builds the ConsumeQueue unit of the record at phys (normal and committed messages only,
// as RocketMQ) and its index entries (all but rolled-back ones). Both skip what they already
// hold, so applying a record twice is harmless.
func (b *Builder) Apply(phys int64, v commitlog.View) error {
	tx := v.TransactionType()
	props := v.Properties().DispatchProps()
	if tx == commitlog.TxNotType || tx == commitlog.TxCommit {
		cq, err := b.queue(v.Topic(), v.QueueID())
		if err != nil {
			return err
		}
		u := consumequeue.Unit{Phys: phys, Size: int32(v.TotalSize()), TagsCode: v.TagsCodeOf(props, b.delayLevels)}
		if err := cq.Put(v.QueueOffset(), u); err != nil {
			return fmt.Errorf("dispatch: consumequeue %s: %w", cq, err)
		}
	}
	if b.index != nil && tx != commitlog.TxRollback {
		// The strings alias the mapped record: BuildIndex only hashes them and keeps none,
		// and the caller holds the segment mapped for the duration of Apply.
		filled, err := b.index.BuildIndex(indexfile.Request{
			Topic: alias(v.Topic()), UniqKey: alias(props.UniqKey), Keys: alias(props.Keys),
			PhyOffset: phys, StoreTimestamp: v.StoreTimestamp(), SysFlag: v.SysFlag(),
		})
		if err != nil {
			return fmt.Errorf("dispatch: index: %w", err)
		}
		if filled > 0 {
			b.IndexFilled = filled
		}
	}
	b.LastStoreTimestamp = v.StoreTimestamp()
	return nil
}

// ApplyDispatched is Apply for a record the appender handed over with its RecordIndex known
// (stages.DispatchFeed): the same unit and the same index entries, built from what the encoder
// and the appender worked out instead of from the record's bytes. Only normal messages come
// this way (the appender hands over no other), so there is no transaction type to look at.
func (b *Builder) ApplyDispatched(d *stages.Dispatched) error {
	cq, err := b.queueByName(d.Topic, d.QueueID)
	if err != nil {
		return err
	}
	u := consumequeue.Unit{Phys: d.Phys, Size: d.Size, TagsCode: d.Index.TagsCode}
	if err := cq.Put(d.QueueOffset, u); err != nil {
		return fmt.Errorf("dispatch: consumequeue %s: %w", cq, err)
	}
	if b.index != nil {
		filled, err := b.index.BuildHashes(d.Phys, d.StoreTimestamp, d.Index.Hashes[:d.Index.NHashes])
		if err != nil {
			return fmt.Errorf("dispatch: index: %w", err)
		}
		if filled > 0 {
			b.IndexFilled = filled
		}
	}
	b.LastStoreTimestamp = d.StoreTimestamp
	return nil
}

// queueByName is queue for a topic held as a string.
// The last queue found is tried first: records come in runs of one queue (a pack's entries), and
// two map lookups per record, one hashing the topic, were 2% of the engine.
func (b *Builder) queueByName(topic string, id int32) (*consumequeue.ConsumeQueue, error) {
	if b.last.cq != nil && b.last.id == id && b.last.topic == topic {
		return b.last.cq, nil
	}
	cq := b.queues[topic][id]
	if cq == nil {
		var err error
		if cq, err = b.queue(unsafe.Slice(unsafe.StringData(topic), len(topic)), id); err != nil {
			return nil, err
		}
	}
	b.last.topic, b.last.id, b.last.cq = topic, id, cq
	return cq, nil
}

func (b *Builder) queue(topic []byte, id int32) (*consumequeue.ConsumeQueue, error) {
	byID := b.queues[string(topic)]
	if cq := byID[id]; cq != nil {
		return cq, nil
	}
	t := string(topic)
	cq, err := b.cq.FindOrCreate(t, id)
	if err != nil {
		return nil, fmt.Errorf("dispatch: consumequeue %s/%d: %w", t, id, err)
	}
	if byID == nil {
		byID = make(map[int32]*consumequeue.ConsumeQueue)
		b.queues[t] = byID
	}
	byID[id] = cq
	return cq, nil
}

// Forget drops the cached queues (after retention or truncation changed the store's set).
func (b *Builder) Forget() {
	clear(b.queues)
	b.last.topic, b.last.id, b.last.cq = "", 0, nil
}

func alias(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}
