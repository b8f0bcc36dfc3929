package stages

// Record is one message on its way to the CommitLog. Ingress fills the first group of fields
// (the encoded bytes hold every field of the record but the three the writer stamps); the
// appender fills the second; acks read both.
type Record struct {
	// Bytes is the record as commitlog.AppendRecord encoded it.
	Bytes []byte
	// Topic and QueueID select the queue whose next offset the record takes.
	Topic   string
	QueueID int32
	// PropCRC says Bytes ends with the reserved __CRC32# entry the writer fills.
	PropCRC bool
	// MsgID is the publisher's idempotency key (Nats-Msg-Id): a second record with the same
	// MsgID inside the dedupe window is not stored; it gets the first one's position.
	MsgID string
	// Reply is where the ack goes ("" for none); Ctx is opaque to every stage but the one that
	// made the record (ingress keeps what it needs to answer here).
	Reply string
	Ctx   any

	// Index is what dispatch needs besides the appender's fields, when the encoder knows it.
	Index RecordIndex
	// DedupeChecked is set by a producer that looked MsgID up in the store (the IndexFile)
	// before sending the record, while the appender's dedupe window had dropped ids from
	// memory (appender.Appender.Forgotten): the ids up to this sequence were looked up and the
	// message is not one of them. 0: nothing looked up.
	DedupeChecked int64

	// Set by the appender. StoreTimestamp too, unless the producer sets it (a replicated record
	// stores its stream's timestamp, so that every engine on the stream stores the same).
	QueueOffset    int64
	PhysOffset     int64
	Size           int32
	StoreTimestamp int64
	Duplicate      bool
	Err            error // this record was not stored
}

// End is the CommitLog offset just past the record.
func (r *Record) End() int64 { return r.PhysOffset + int64(r.Size) }

// Batch is what moves from ingress to the appender and from the appender to the acks: records
// in the order they are to be appended. Done is called once, by the ack stage, when every record
// has reached the promised durability level or failed; it must not block for long.
type Batch struct {
	Records []Record
	// End is the CommitLog offset the acks wait for: past every stored record of the batch and
	// past the originals of its duplicates. Set by the appender.
	End  int64
	Done func(*Batch)
	// Durable makes the acks wait until the batch is durable whatever the flush mode (a
	// JetStream source acks its stream only then).
	Durable bool
	// Arenas are the buffers the records' Bytes were cut from, one reference each (Arena).
	Arenas []*Arena
	// Owner is the producer's, for taking the batch's memory back once it is done with (the
	// stages never touch it).
	Owner any
}

// ReleaseBytes is called by the appender once every record is copied into the log: it releases
// the batch's arenas and clears the records' Bytes, so that none is read after. A batch without
// arenas (its records own their bytes) keeps them.
func (b *Batch) ReleaseBytes() {
	if len(b.Arenas) == 0 {
		return
	}
	for i := range b.Records {
		b.Records[i].Bytes = nil
	}
	for _, a := range b.Arenas {
		a.Release()
	}
	b.Arenas = nil
}
