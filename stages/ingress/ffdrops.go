package ingress

import (
	"github.com/nats-io/nats.go"

	"github.com/rocketstore/engine/internal/wire"
	"github.com/rocketstore/engine/stages/ingress/internal/drops"
)

// OtherTopics is the topic under which Stats.DroppedByTopic counts the drops of the topics past
// the first 1024 that had some.
const OtherTopics = drops.OtherTopics

// InvalidTopic is the topic under which Stats.DroppedByTopic counts the drops of messages whose
// subject maps to no valid topic.
const InvalidTopic = drops.InvalidTopic

// msgOverhead is what a message nats.go delivered costs beyond its subject and body: the
// nats.Msg and the allocations around it, rounded up. The fire-and-forget bound counts it so that
// PendingBytes bounds memory, not only bodies.
const msgOverhead = 256

// msgCost is what message m held in an inbox counts against Config.PendingBytes.
func msgCost(m *nats.Msg) int64 {
	return int64(len(m.Subject) + len(m.Reply) + len(m.Data) + msgOverhead)
}

// fireAndForget says whether m is a message nobody waits for an answer to: no reply subject and
// no batched-ack header (a stream's message without a reply subject is still reported missing
// to its publisher, so it is never dropped unannounced).
func fireAndForget(m *nats.Msg) bool {
	return m.Reply == "" && (m.Header == nil || m.Header[wire.HeaderSeq] == nil)
}
