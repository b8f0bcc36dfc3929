package api

import "strings"

// DefaultPrefix is the subject prefix of the read API's endpoints. It starts with '$', so the
// engine's ingress never stores API traffic.
const DefaultPrefix = "$RS.API"

// ServiceName is the micro service's name, as `nats micro ls` shows it (and $SRV.INFO.rocketstore
// asks for it).
const ServiceName = "rocketstore"

// Endpoint names; an endpoint's subject is <prefix>.<name> (see Subject).
const (
	EndpointGet           = "get"
	EndpointMsg           = "msg"
	EndpointQuery         = "query"
	EndpointOffsetForTime = "offset_for_time"
	EndpointOffsets       = "offsets"
	EndpointTopics        = "topics"
	EndpointCommit        = "commit"
	EndpointFetch         = "fetch"
	EndpointReplay        = "replay"
)

// Endpoints lists every endpoint name.
var Endpoints = []string{
	EndpointGet, EndpointMsg, EndpointQuery, EndpointOffsetForTime, EndpointOffsets,
	EndpointTopics, EndpointCommit, EndpointFetch, EndpointReplay,
}

// Subject is the subject of endpoint under prefix (DefaultPrefix when empty).
func Subject(prefix, endpoint string) string {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	return strings.TrimSuffix(prefix, ".") + "." + endpoint
}

// Bounds of requests.
const (
	// MaxWaitMs caps GetRequest.WaitMs (a minute).
	MaxWaitMs = 60_000
	// DefaultMaxInFlight is an acked replay's window when ReplayRequest.MaxInFlight is 0.
	DefaultMaxInFlight = 256
	// MaxMaxInFlight caps ReplayRequest.MaxInFlight.
	MaxMaxInFlight = 65536
	// DefaultAckWaitMs is how long an acked replay waits for an ack before sending again.
	DefaultAckWaitMs = 30_000
	// DefaultMaxDeliver is how many times an acked replay sends a message at most.
	DefaultMaxDeliver = 5
)

// Get statuses (RocketMQ's GetMessageStatus names), GetReply.Status.
const (
	StatusFound               = "FOUND"               // Messages holds at least one message
	StatusNoMatchedMessage    = "NO_MATCHED_MESSAGE"  // the tag filter took out every unit read
	StatusNoMessageInQueue    = "NO_MESSAGE_IN_QUEUE" // the queue never held a message
	StatusOffsetTooSmall      = "OFFSET_TOO_SMALL"    // below the queue's min; NextOffset is the min
	StatusOffsetOverflowOne   = "OFFSET_OVERFLOW_ONE" // at the queue's head: nothing yet
	StatusOffsetOverflowBadly = "OFFSET_OVERFLOW_BADLY"
	StatusOffsetFoundNull     = "OFFSET_FOUND_NULL" // the records were deleted by retention
)

// Message is one stored message on the wire.
type Message struct {
	Topic       string `json:"topic"`
	QueueID     int32  `json:"queueId"`
	QueueOffset int64  `json:"queueOffset"`
	// CommitLogOffset is the record's physical offset in the CommitLog.
	CommitLogOffset int64 `json:"commitLogOffset"`
	// Size is the whole record's size in the CommitLog (what maxBytes counts).
	Size int32 `json:"size"`
	// MsgID is RocketMQ's offset message id: store host and CommitLog offset, uppercase hex.
	MsgID string `json:"msgId"`
	// StoreTimestamp (the engine's clock) and BornTimestamp (when ingress took it), in ms.
	StoreTimestamp int64 `json:"storeTimestamp"`
	BornTimestamp  int64 `json:"bornTimestamp"`
	// BornHost and StoreHost are "ip:port" ("[ip6]:port"), "" when not set.
	BornHost  string `json:"bornHost"`
	StoreHost string `json:"storeHost"`
	// Tags, Keys (space-separated, as stored) and UniqKey are the TAGS, KEYS and UNIQ_KEY
	// properties.
	Tags    string `json:"tags,omitempty"`
	Keys    string `json:"keys,omitempty"`
	UniqKey string `json:"uniqKey,omitempty"`
	// Properties holds every property (NATS_SUBJECT, the original NATS headers...); a repeated
	// name keeps its last value.
	Properties map[string]string `json:"properties"`
	// Body is the body, or the part of it from BodyOffset on when Partial (standard base64 in
	// JSON).
	Body []byte `json:"body"`
	// BodySize is the length of the whole body.
	BodySize int `json:"bodySize"`
	// BodyOffset is where Body starts in the body (a msg range read).
	BodyOffset int `json:"bodyOffset,omitempty"`
	// Partial: Body is not the whole body. In get and query replies a body too large for any
	// reply is left out entirely; read it with msg ranges (Client.Body).
	Partial bool `json:"partial,omitempty"`
}

// GetRequest asks for messages of one queue from Offset (endpoint get).
type GetRequest struct {
	Topic   string `json:"topic"`
	QueueID int32  `json:"queueId"`
	Offset  int64  `json:"offset"`
	// Max bounds the number of messages (32 when 0, at most 1024).
	Max int `json:"max,omitempty"`
	// MaxBytes bounds the sum of the records' sizes (256 KiB when 0), lowered by the engine to
	// what fits in a reply; the first message is returned whatever its size.
	MaxBytes int `json:"maxBytes,omitempty"`
	// Tags keeps only messages whose TAGS is one of them; empty or "*": every message.
	Tags []string `json:"tags,omitempty"`
	// Subject keeps only messages whose NATS subject (NATS_SUBJECT) matches it: a subject, or a
	// pattern with '*' and '>' ("device.*.temp"); empty: every message.
	Subject string `json:"subject,omitempty"`
	// WaitMs > 0 makes a get at the head of the queue wait that long for a message (long
	// polling), at most MaxWaitMs.
	WaitMs int64 `json:"waitMs,omitempty"`
}

// GetReply is what a get found.
type GetReply struct {
	// Status is one of the Status* names.
	Status   string    `json:"status"`
	Messages []Message `json:"messages"`
	// NextOffset is the offset to ask for next.
	NextOffset int64 `json:"nextOffset"`
	// MinOffset and MaxOffset are the queue's bounds when it was read.
	MinOffset int64 `json:"minOffset"`
	MaxOffset int64 `json:"maxOffset"`
	// Truncated: the reply holds fewer messages than asked for because of the reply size
	// bound (the connection's max payload); NextOffset is the first one left out.
	Truncated bool `json:"truncated,omitempty"`
	// WaitSkipped: the get asked to wait, but every long-poll slot was taken, so it was
	// answered at once.
	WaitSkipped bool `json:"waitSkipped,omitempty"`
	// ScanStopped: a filtered get (tags, subject) stopped at its scan limit (800 queue units)
	// before the head of the queue: later offsets may still match (a NO_MATCHED_MESSAGE status
	// speaks for the units scanned only); get again from NextOffset.
	ScanStopped bool `json:"scanStopped,omitempty"`
	// Applied lists the bounds the engine applied where the request asked for more (max,
	// maxBytes, waitMs): a larger value is lowered, not refused.
	Applied map[string]int64 `json:"applied,omitempty"`
}

// MsgRequest asks for one message by its offset message id (endpoint msg).
type MsgRequest struct {
	MsgID string `json:"msgId"`
	// BodyOffset and BodyMax select a range of the body: from BodyOffset, at most BodyMax bytes
	// (0: as much as fits in a reply). The reply's Partial says whether that is the whole body.
	BodyOffset int `json:"bodyOffset,omitempty"`
	BodyMax    int `json:"bodyMax,omitempty"`
}

// QueryRequest asks for the messages of a topic with a key (endpoint query).
type QueryRequest struct {
	Topic string `json:"topic"`
	// Key is matched against UNIQ_KEY and each token of KEYS, exactly.
	Key string `json:"key"`
	// Begin and End bound the store time in ms, both inclusive (End 0: no bound); the index
	// keeps seconds, so an entry's time can be up to 999 ms before its message's store time.
	Begin int64 `json:"begin,omitempty"`
	End   int64 `json:"end,omitempty"`
	// Max bounds the number of messages (64 when 0, at most 64).
	Max int `json:"max,omitempty"`
}

// QueryReply holds the messages found, newest first.
type QueryReply struct {
	Messages []Message `json:"messages"`
	// Truncated: older matches were left out to fit the reply; ask again with End set to the
	// oldest store time returned.
	Truncated bool `json:"truncated,omitempty"`
}

// OffsetForTimeRequest asks for the first queue offset stored at or after Timestamp.
type OffsetForTimeRequest struct {
	Topic   string `json:"topic"`
	QueueID int32  `json:"queueId"`
	// Timestamp in ms.
	Timestamp int64 `json:"timestamp"`
}

// OffsetForTimeReply: Offset is the queue's max offset when every message is older, its min
// offset when none is.
type OffsetForTimeReply struct {
	Offset int64 `json:"offset"`
}

// OffsetsRequest asks for the bounds of every queue of Topic.
type OffsetsRequest struct {
	Topic string `json:"topic"`
}

// OffsetsReply lists the bounds of a topic's queues by queue id.
type OffsetsReply struct {
	Topic  string         `json:"topic"`
	Queues []QueueOffsets `json:"queues"`
}

// QueueOffsets are the bounds of one queue.
type QueueOffsets struct {
	QueueID int32 `json:"queueId"`
	// MinOffset is the first offset that can be read, MaxOffset the offset of the next message.
	MinOffset int64 `json:"minOffset"`
	MaxOffset int64 `json:"maxOffset"`
	// MinStoreTime and MaxStoreTime are the store times (ms) of the messages at MinOffset and
	// MaxOffset-1; 0 when the queue is empty.
	MinStoreTime int64 `json:"minStoreTime"`
	MaxStoreTime int64 `json:"maxStoreTime"`
}

// TopicsRequest lists topics, sorted by name, after After ("": from the first).
type TopicsRequest struct {
	After string `json:"after,omitempty"`
}

// TopicsReply lists topics and their queues.
type TopicsReply struct {
	Topics []TopicInfo `json:"topics"`
	// Truncated: more topics follow; ask again with After set to the last name returned.
	Truncated bool `json:"truncated,omitempty"`
}

// TopicInfo names a topic and its queue ids (ascending).
type TopicInfo struct {
	Name   string  `json:"name"`
	Queues []int32 `json:"queues"`
}

// CommitRequest records Offset (the next offset the group will consume) for Group in a queue.
// The topic and queue must exist. It is answered once the offset is in the offsets journal
// (docs/GROUPS.md). MemberID and Epoch make it a member's commit, on the engine's own prefix
// (Assignment.API), refused (409) unless the member holds the queue at that epoch; without them
// it is refused (409) while the group has members.
type CommitRequest struct {
	Group    string `json:"group"`
	Topic    string `json:"topic"`
	QueueID  int32  `json:"queueId"`
	Offset   int64  `json:"offset"`
	MemberID string `json:"memberId,omitempty"`
	Epoch    int64  `json:"epoch,omitempty"`
}

// CommitReply echoes the offset committed.
type CommitReply struct {
	Offset int64 `json:"offset"`
}

// FetchRequest asks for Group's committed offset in a queue.
type FetchRequest struct {
	Group   string `json:"group"`
	Topic   string `json:"topic"`
	QueueID int32  `json:"queueId"`
}

// FetchReply: Found is false (and Offset -1) when the group never committed in the queue.
type FetchReply struct {
	Offset int64 `json:"offset"`
	Found  bool  `json:"found"`
}

// Replay modes.
const (
	ReplayAcked = "acked"
	ReplayPaced = "paced"
)

// ReplayRequest asks to send a topic's messages onto Subject (endpoint replay; see the package
// doc). StartOffset and StartTime are exclusive; with neither, each queue is replayed from its
// min offset. Each queue stops at the max offset it had when the replay started.
type ReplayRequest struct {
	Topic string `json:"topic"`
	// Queues to replay; empty: every queue of the topic.
	Queues []int32 `json:"queues,omitempty"`
	// Subject receives the messages (no wildcards).
	Subject string `json:"subject"`
	// StartOffset is the queue offset each queue starts from (raised to its min offset).
	StartOffset int64 `json:"startOffset,omitempty"`
	// StartTime (ms) starts each queue at its first message stored at or after it.
	StartTime int64 `json:"startTime,omitempty"`
	// Tags keeps only messages whose TAGS is one of them.
	Tags []string `json:"tags,omitempty"`
	// FilterSubject keeps only messages whose NATS subject matches it (a subject or a pattern).
	FilterSubject string `json:"filterSubject,omitempty"`
	// Mode is ReplayAcked ("", the default) or ReplayPaced.
	Mode string `json:"mode,omitempty"`
	// Acked mode: at most MaxInFlight unacked messages (DefaultMaxInFlight), each sent again
	// after AckWaitMs without an ack (DefaultAckWaitMs), at most MaxDeliver times in all
	// (DefaultMaxDeliver).
	MaxInFlight int   `json:"maxInFlight,omitempty"`
	AckWaitMs   int64 `json:"ackWaitMs,omitempty"`
	MaxDeliver  int   `json:"maxDeliver,omitempty"`
	// Rate is the paced mode's rate in messages per second (required there).
	Rate float64 `json:"rate,omitempty"`
}

// ReplayReply is the plan of a replay that started.
type ReplayReply struct {
	// ReplayID is in the Rs-Replay-Id header of every message of the replay.
	ReplayID string `json:"replayId"`
	Subject  string `json:"subject"`
	Mode     string `json:"mode"`
	// Queues lists each queue's range [StartOffset, StopOffset).
	Queues []ReplayQueue `json:"queues"`
	// MaxCount is the number of queue offsets in the ranges: the count sent is at most that
	// (tag filters and records deleted by retention make it smaller).
	MaxCount int64 `json:"maxCount"`
}

// ReplayQueue is the range of one queue a replay sends.
type ReplayQueue struct {
	QueueID     int32 `json:"queueId"`
	StartOffset int64 `json:"startOffset"`
	StopOffset  int64 `json:"stopOffset"`
}
