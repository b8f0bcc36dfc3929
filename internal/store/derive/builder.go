package derive

import (
	"fmt"
	"unsafe"

	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/internal/store/consumequeue"
	"github.com/rocketstore/engine/internal/store/indexfile"
)

// Builder applies one record to the ConsumeQueues and the IndexFiles. It is owned by one
// goroutine at a time (the dispatcher, or recovery before the dispatcher starts).
type Builder struct {
	cq          *consumequeue.Store
	index       *indexfile.Service // nil when indexing is off
	delayLevels DelayLevels
	hashes      []int32 // scratch for the key hashes of the record being applied

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
func NewBuilder(cq *consumequeue.Store, index *indexfile.Service, levels DelayLevels) *Builder {
	if levels == nil {
		levels = DefaultDelayLevels()
	}
	return &Builder{cq: cq, index: index, delayLevels: levels, queues: make(map[string]map[int32]*consumequeue.ConsumeQueue)}
}

// Apply builds the ConsumeQueue unit of the record at phys (Queued records only) and its index
// entries (Indexed ones), read back from its bytes. Both skip what they already hold, so
// applying a record twice is harmless.
func (b *Builder) Apply(phys int64, v commitlog.View) error {
	tx := v.TransactionType()
	// The props alias the mapped record: they are only hashed, and the caller holds the
	// segment mapped for the duration of Apply.
	p := PropsOf(v)
	if Queued(tx) {
		cq, err := b.queue(v.Topic(), v.QueueID())
		if err != nil {
			return err
		}
		if err := cq.Put(v.QueueOffset(), Unit(phys, v, p, b.delayLevels)); err != nil {
			return fmt.Errorf("dispatch: consumequeue %s: %w", cq, err)
		}
	}
	if b.index != nil && Indexed(tx) {
		b.hashes = KeyHashes(b.hashes[:0], TopicPrefix(p.Topic), p)
		if err := b.putHashes(phys, v.StoreTimestamp(), b.hashes); err != nil {
			return err
		}
	}
	b.LastStoreTimestamp = v.StoreTimestamp()
	return nil
}

// ApplyFed is Apply for a record the appender handed over with its Index known (Fed): the same
// unit and the same index entries, from what the encoder and the appender worked out instead of
// from the record's bytes. Only normal messages come this way (the appender hands over no
// other), so there is no transaction type to look at.
func (b *Builder) ApplyFed(f *Fed) error {
	cq, err := b.queueByName(f.Topic, f.QueueID)
	if err != nil {
		return err
	}
	u := consumequeue.Unit{Phys: f.Phys, Size: f.Size, TagsCode: f.Index.TagsCode}
	if err := cq.Put(f.QueueOffset, u); err != nil {
		return fmt.Errorf("dispatch: consumequeue %s: %w", cq, err)
	}
	if b.index != nil {
		if err := b.putHashes(f.Phys, f.StoreTimestamp, f.Index.Hashes[:f.Index.NHashes]); err != nil {
			return err
		}
	}
	b.LastStoreTimestamp = f.StoreTimestamp
	return nil
}

// putHashes indexes one record's key hashes and notes a file that filled up.
func (b *Builder) putHashes(phys, storeTimestamp int64, hashes []int32) error {
	filled, err := b.index.BuildHashes(phys, storeTimestamp, hashes)
	if err != nil {
		return fmt.Errorf("dispatch: index: %w", err)
	}
	if filled > 0 {
		b.IndexFilled = filled
	}
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
