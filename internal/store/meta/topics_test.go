package meta

import (
	"reflect"
	"testing"
)

// TestTopicsRocketMQShape loads topics.json as RocketMQ 5 writes it and saves it back: every
// field survives, with RocketMQ's names (an empty attributes map comes back as none).
func TestTopicsRocketMQShape(t *testing.T) {
	const rocketmq = `{
	"dataVersion":{
		"counter":2,
		"stateVersion":3,
		"timestamp":1700000000000
	},
	"topicConfigTable":{
		"TopicTest":{
			"attributes":{},
			"order":false,
			"perm":6,
			"readQueueNums":4,
			"topicFilterType":"SINGLE_TAG",
			"topicName":"TopicTest",
			"topicSysFlag":0,
			"writeQueueNums":4
		},
		"Ordered":{
			"attributes":{"+message.type":"FIFO"},
			"order":true,
			"perm":4,
			"readQueueNums":8,
			"topicFilterType":"MULTI_TAG",
			"topicName":"Ordered",
			"topicSysFlag":1,
			"writeQueueNums":2
		}
	}
}`
	want := TopicConfigFile{
		TopicConfigTable: map[string]TopicConfig{
			"TopicTest": {TopicName: "TopicTest", ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6, TopicFilterType: "SINGLE_TAG", Attributes: map[string]string{}},
			"Ordered": {TopicName: "Ordered", ReadQueueNums: 8, WriteQueueNums: 2, Perm: 4, TopicFilterType: "MULTI_TAG", TopicSysFlag: 1, Order: true,
				Attributes: map[string]string{"+message.type": "FIFO"}},
		},
		DataVersion: DataVersion{Timestamp: 1700000000000, Counter: 2, StateVersion: 3},
	}
	m := newMem(t, "store/config")
	path := "store/config/" + TopicsFileName
	if err := WriteFileAtomic(m, path, []byte(rocketmq)); err != nil {
		t.Fatal(err)
	}
	var got TopicConfigFile
	if _, err := Load(m, path, &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("loaded\n%+v\nwant\n%+v", got, want)
	}
	if err := Save(m, path, got); err != nil {
		t.Fatal(err)
	}
	var again TopicConfigFile
	tt := want.TopicConfigTable["TopicTest"]
	tt.Attributes = nil
	want.TopicConfigTable["TopicTest"] = tt
	if _, err := Load(m, path, &again); err != nil || !reflect.DeepEqual(again, want) {
		t.Fatalf("round trip: %+v, %v", again, err)
	}
}
