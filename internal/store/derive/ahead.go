package derive

import "github.com/rocketstore/engine/internal/store/commitlog"

// Index is what a record derives, worked out ahead of the append by its encoder (Ahead), so that
// dispatch can build the ConsumeQueue unit and the IndexFile entries without reading the record
// back from the log. Known is false when it was not worked out: dispatch then reads the record.
// stages.RecordIndex, which carries it through the pipeline, has the same fields.
type Index struct {
	Known    bool
	NHashes  int8
	TagsCode int64
	// Hashes are the IndexFile key hashes (KeyHashes), unique key first.
	Hashes [2]int32
}

// Ahead is Index for a record whose props will be p, worked out by the same functions that read
// them back (TagsCode, KeyHashes), before the record is appended; prefix is TopicPrefix(p.Topic).
// It is Known only where what it works out must equal what the record derives once appended: not
// when the tag code may be a delivery time (the schedule topic with a DELAY: the store timestamp
// and the delay levels are the appender's and the dispatcher's), nor when the record has more
// keys than Hashes holds.
func Ahead(p Props, prefix int32) Index {
	var x Index
	if (p.Topic == commitlog.ScheduleTopic && p.Delay != "") || NumKeys(p) > len(x.Hashes) {
		return x
	}
	x.Known, x.TagsCode = true, tagsHash(p.Tags)
	x.NHashes = int8(len(KeyHashes(x.Hashes[:0], prefix, p)))
	return x
}

// Fed is a record the appender handed over with its Index known (stages.Dispatched, through the
// stages.DispatchFeed): where it went and what it derives, all the Builder needs to build it
// without reading it back.
type Fed struct {
	Phys           int64
	Size           int32
	QueueID        int32
	QueueOffset    int64
	StoreTimestamp int64
	Topic          string
	Index          Index
}
