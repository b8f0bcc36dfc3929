// Package drops counts and reports the messages ingress loses before they reach the store: the
// fire-and-forget messages it drops itself, by topic (Topics), and every drop, its own and the
// NATS client's, in a log line at most once per interval with the rate, the topics that lost
// most and what to do (Reporter).
package drops

import (
	"maps"
	"sync"
)

// MaxTopics bounds the topics whose drops are counted one by one (a subject space can be as wide
// as its publishers make it); the drops of the topics past it are counted together under
// OtherTopics.
const MaxTopics = 1024

// OtherTopics is the topic under which Topics counts the drops of the topics past the first
// MaxTopics that had some.
const OtherTopics = "_other"

// InvalidTopic is the topic under which Topics counts the drops of messages whose subject maps
// to no valid topic.
const InvalidTopic = "_invalid"

// Topics counts dropped messages by topic. Safe for concurrent use; the zero value is ready.
type Topics struct {
	mu      sync.Mutex
	byTopic map[string]int64 // guarded by mu
	total   int64            // guarded by mu
}

// Add counts one message of topic ("" for one that has none: InvalidTopic).
func (d *Topics) Add(topic string) {
	if topic == "" {
		topic = InvalidTopic
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.byTopic == nil {
		d.byTopic = make(map[string]int64)
	}
	if _, ok := d.byTopic[topic]; !ok && len(d.byTopic) >= MaxTopics {
		topic = OtherTopics
	}
	d.byTopic[topic]++
	d.total++
}

// Snapshot returns the total and a copy of the counts by topic.
func (d *Topics) Snapshot() (int64, map[string]int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.total, maps.Clone(d.byTopic)
}
