package ingress

import (
	"maps"
	"sync"

	"github.com/nats-io/nats.go"

	"github.com/rocketstore/engine/internal/wire"
)

// maxDropTopics bounds the topics whose drops are counted one by one (a subject space can be
// as wide as its publishers make it); the drops of the topics past it are counted together under
// OtherTopics.
const maxDropTopics = 1024

// OtherTopics is the topic under which Stats.DroppedByTopic counts the drops of the topics past
// the first maxDropTopics that had some.
const OtherTopics = "_other"

// InvalidTopic is the topic under which Stats.DroppedByTopic counts the drops of messages whose
// subject maps to no valid topic.
const InvalidTopic = "_invalid"

// topicDrops counts the fire-and-forget messages ingress dropped (its inboxes full: inbox.go), by
// topic. A message dropped so is one nats.go handed over, so its subject and topic are known,
// unlike nats.go's own drops.
type topicDrops struct {
	mu      sync.Mutex
	byTopic map[string]int64 // guarded by mu
	total   int64            // guarded by mu
}

func (d *topicDrops) add(topic string) {
	if topic == "" {
		topic = InvalidTopic // a subject no topic could be made of: refused had it been taken
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.byTopic == nil {
		d.byTopic = make(map[string]int64)
	}
	if _, ok := d.byTopic[topic]; !ok && len(d.byTopic) >= maxDropTopics {
		topic = OtherTopics
	}
	d.byTopic[topic]++
	d.total++
}

// snapshot returns the total and a copy of the counts by topic.
func (d *topicDrops) snapshot() (int64, map[string]int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.total, maps.Clone(d.byTopic)
}

// fireAndForget says whether m is a message nobody waits for an answer to: no reply subject and
// no batched-ack header (a stream's message without a reply subject is still reported missing
// to its publisher, so it is never dropped unannounced).
func fireAndForget(m *nats.Msg) bool {
	return m.Reply == "" && (m.Header == nil || m.Header[wire.HeaderSeq] == nil)
}
