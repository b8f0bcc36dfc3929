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

// headerMapOverhead and headerKeyOverhead are what the decoded headers (nats.Header, a map of
// []string) cost beyond their bytes: a small map's table, then a slot and a value slice per key
// (measured: about 95 B a key with 64 keys).
const (
	headerMapOverhead = 384
	headerKeyOverhead = 128
)

// msgCost is what message m held in an inbox counts against Config.PendingBytes: the heap it
// takes, measured in TestMsgCostCountsWhatIsHeld. nats.go keeps the header block in the buffer
// Data is cut from and decodes it into a second copy (the map's keys and values are substrings
// of one string), so a message's headers cost twice their size on the wire plus the map; each
// buffer is rounded up to its allocation size class.
func msgCost(m *nats.Msg) int64 {
	n := len(m.Subject) + len(m.Reply) + msgOverhead
	hdr := 0
	if m.Header != nil {
		// Size is what came on the wire (nats.go's count): subject, reply, header block, body.
		hdr = max(m.Size()-len(m.Subject)-len(m.Reply)-len(m.Data), 0)
		n += heapSize(hdr) + headerMapOverhead + headerKeyOverhead*len(m.Header)
	}
	return int64(n + heapSize(hdr+len(m.Data)))
}

// heapSize bounds what an allocation of n bytes takes: the runtime rounds it up to its size
// class (at most about 19% more, from 4,097 B to 4,864 B) up to 32 KiB, and to whole 8 KiB
// pages past that.
func heapSize(n int) int {
	if n <= 32<<10 {
		return n + n/5 + 16
	}
	return n + 8<<10
}

// fireAndForget says whether m is a message nobody waits for an answer to: no reply subject and
// no batched-ack header (a stream's message without a reply subject is still reported missing
// to its publisher, so it is never dropped unannounced).
func fireAndForget(m *nats.Msg) bool {
	return m.Reply == "" && (m.Header == nil || m.Header[wire.HeaderSeq] == nil)
}
