package meta

// ConfigDirName is the directory under the store root that holds the config JSON files, as in
// RocketMQ's BrokerPathConfigHelper.
const ConfigDirName = "config"

// TopicsFileName is the topic config file in ConfigDirName.
const TopicsFileName = "topics.json"

// TopicConfigFile is the content of topics.json in RocketMQ's shape (TopicConfigManager
// serialised by fastjson), so that either side can read what the other wrote.
type TopicConfigFile struct {
	TopicConfigTable map[string]TopicConfig `json:"topicConfigTable"` // by topic name
	DataVersion      DataVersion            `json:"dataVersion"`
}

// TopicConfig is one topic's entry in topics.json (RocketMQ's TopicConfig).
type TopicConfig struct {
	TopicName      string `json:"topicName"`
	ReadQueueNums  int32  `json:"readQueueNums"`
	WriteQueueNums int32  `json:"writeQueueNums"`
	// Perm is RocketMQ's PermName bit set: 2 write, 4 read, 1 inherit (6 = read and write).
	Perm int32 `json:"perm"`
	// TopicFilterType is the Java enum's name, "SINGLE_TAG" or "MULTI_TAG".
	TopicFilterType string `json:"topicFilterType"`
	TopicSysFlag    int32  `json:"topicSysFlag"`
	Order           bool   `json:"order"`
	// Attributes are RocketMQ 5's per-topic attributes (e.g. "+message.type"); kept so that a
	// topics.json written by RocketMQ 5 survives a load and save. Left out when empty, which
	// RocketMQ reads as its default, an empty map.
	Attributes map[string]string `json:"attributes,omitempty"`
}

// DataVersion is RocketMQ's DataVersion: a wall-clock stamp and a counter bumped on every change,
// which brokers and name servers compare to see whether a config changed.
type DataVersion struct {
	Timestamp int64 `json:"timestamp"` // Unix milliseconds of the last change
	Counter   int64 `json:"counter"`
	// StateVersion is RocketMQ 5's controller-mode epoch; kept so that it survives a load and
	// save, and 0 otherwise.
	StateVersion int64 `json:"stateVersion"`
}
