package meta

// QueueStartsFileName is the file, in ConfigDirName, of the queues that start above offset 0 on
// this engine: partitions taken over from another engine (docs/SCALE-OUT.md, "Moving a
// partition"). RocketMQ has no such file; its static topics keep the same facts (a logic queue's
// start offset on a broker) in their mapping items.
const QueueStartsFileName = "queueStarts.json"

// QueueStartsFile is the content of queueStarts.json: by topic, by queue id, the first offset the
// queue takes on this engine.
type QueueStartsFile struct {
	Starts map[string]map[int32]int64 `json:"starts"`
}
