package api

// Consumer groups (docs/GROUPS.md): the wire types of the group endpoints and of the batched
// read. The Go member is Join (member.go).

// Endpoints of consumer groups. Member requests after the join go to the engine's own prefix,
// Assignment.API; the others to the read API's prefix.
const (
	EndpointGroupJoin      = "group.join"
	EndpointGroupHeartbeat = "group.heartbeat"
	EndpointGroupRelease   = "group.release"
	EndpointGroupLeave     = "group.leave"
	EndpointGroupList      = "group.list"
	EndpointGroupDescribe  = "group.describe"
	EndpointGroupReset     = "group.reset"
	EndpointGroupDelete    = "group.delete"
	// EndpointRead is the batched read: many records in one NATS message (ReadRequest).
	EndpointRead = "read"
)

// Where a group starts in a queue it has no committed offset in (JoinRequest.Start).
const (
	StartEarliest = "earliest"
	StartLatest   = "latest"
)

// JoinRequest joins a member to a group on a topic.
type JoinRequest struct {
	Group string `json:"group"`
	Topic string `json:"topic"`
	// Subject filters the messages (a NATS subject or pattern); the same for every member.
	Subject string `json:"subject,omitempty"`
	// MemberID is the member's id when it joins again; empty: the engine names it.
	MemberID string `json:"memberId,omitempty"`
	// ClientID names the member's process for people.
	ClientID string `json:"clientId,omitempty"`
	// Notify is a subject the engine publishes the member's Assignment to when it changes.
	Notify string `json:"notify,omitempty"`
	// Start is StartEarliest (the default) or StartLatest.
	Start string `json:"start,omitempty"`
}

// Assignment is what a member holds: the reply to a join, a heartbeat and a release, and what the
// engine publishes to the member's notify subject.
type Assignment struct {
	// Engine is the answering engine's id; API the prefix of its own subjects, to which the
	// member sends everything after the join (<API>.group.heartbeat, <API>.read, ...).
	Engine string `json:"engine"`
	API    string `json:"api"`
	// Partitions are the partitions (queue ids) the engine serves, on a partitioned deployment.
	Partitions []int32 `json:"partitions,omitempty"`
	Group      string  `json:"group"`
	Topic      string  `json:"topic"`
	MemberID   string  `json:"memberId"`
	// Generation grows with every change: an assignment with a lower one than seen is stale.
	Generation int64 `json:"generation"`
	// HeartbeatMs is how often to heartbeat; SessionTimeoutMs how long the engine waits.
	HeartbeatMs      int64 `json:"heartbeatMs"`
	SessionTimeoutMs int64 `json:"sessionTimeoutMs"`
	// Queues are held and may be read, each from Offset when new to the member.
	Queues []AssignedQueue `json:"queues"`
	// Revoke are held but must be released: stop, commit where the member stopped, release.
	Revoke []AssignedQueue `json:"revoke"`
}

// AssignedQueue is a queue of an Assignment.
type AssignedQueue struct {
	QueueID int32 `json:"queueId"`
	Epoch   int64 `json:"epoch"`
	// Offset is where the group committed (or starts): where a new holder reads from.
	Offset int64 `json:"offset"`
}

// MemberRequest names a member: a heartbeat.
type MemberRequest struct {
	Group    string `json:"group"`
	Topic    string `json:"topic"`
	MemberID string `json:"memberId"`
}

// QueueOffset is an offset in a queue held at Epoch: a release's and a leave's commits.
type QueueOffset struct {
	QueueID int32 `json:"queueId"`
	Epoch   int64 `json:"epoch"`
	Offset  int64 `json:"offset"`
}

// ReleaseRequest commits where a member stopped in queues it was asked to give up and lets them
// go; LeaveRequest does it for every queue it holds and takes the member out.
type ReleaseRequest struct {
	Group    string        `json:"group"`
	Topic    string        `json:"topic"`
	MemberID string        `json:"memberId"`
	Queues   []QueueOffset `json:"queues"`
}

// LeaveRequest is a member's leave (see ReleaseRequest).
type LeaveRequest = ReleaseRequest

// ReadRequest is the batched read (endpoint read): several queues of one topic, many records in
// one reply (docs/GROUPS.md, "The batched read's reply"; ParseReadReply decodes it).
type ReadRequest struct {
	Topic  string      `json:"topic"`
	Queues []ReadQueue `json:"queues"`
	// Group and MemberID: a member's read, fenced by each queue's Epoch.
	Group    string `json:"group,omitempty"`
	MemberID string `json:"memberId,omitempty"`
	// Max bounds the messages (DefaultReadMax, at most MaxReadMax), MaxBytes their bytes
	// (DefaultReadMaxBytes; lowered to what fits in a reply).
	Max      int `json:"max,omitempty"`
	MaxBytes int `json:"maxBytes,omitempty"`
	// WaitMs waits, when every queue is at its end, for a message in any (at most MaxWaitMs).
	WaitMs int64 `json:"waitMs,omitempty"`
	// Subject and Tags filter, as in get (outside a group: a group's filter is its own).
	Subject string   `json:"subject,omitempty"`
	Tags    []string `json:"tags,omitempty"`
}

// ReadQueue is a queue of a ReadRequest.
type ReadQueue struct {
	QueueID int32 `json:"queueId"`
	Offset  int64 `json:"offset"`
	Epoch   int64 `json:"epoch,omitempty"`
}

// Bounds of the batched read.
const (
	DefaultReadMax      = 1024
	MaxReadMax          = 65536
	DefaultReadMaxBytes = 4 << 20
)

// GroupListRequest lists groups, paged: those after After (group, then topic, as "topic@group"
// keys sort), at most Max (DefaultGroupListMax), whose group or topic contains Match.
type GroupListRequest struct {
	After string `json:"after,omitempty"`
	Max   int    `json:"max,omitempty"`
	Match string `json:"match,omitempty"`
}

// DefaultGroupListMax is a group list's page when GroupListRequest.Max is 0 (and its cap: 1,000).
const DefaultGroupListMax = 100

// GroupListReply is a page of groups.
type GroupListReply struct {
	Groups []GroupSummary `json:"groups"`
	// Truncated: more follow; ask again with After set to the last one's Key.
	Truncated bool `json:"truncated,omitempty"`
}

// GroupSummary is one group of a list.
type GroupSummary struct {
	Key         string `json:"key"` // topic@group, as RocketMQ's table has it
	Group       string `json:"group"`
	Topic       string `json:"topic"`
	Members     int    `json:"members"`
	LagMessages int64  `json:"lagMessages"`
	LagMs       int64  `json:"lagMs"`
	Rebalancing bool   `json:"rebalancing,omitempty"`
}

// GroupRequest names a group on a topic: describe, delete.
type GroupRequest struct {
	Group string `json:"group"`
	Topic string `json:"topic"`
}

// GroupStatus is a group's state (describe).
type GroupStatus struct {
	Group       string          `json:"group"`
	Topic       string          `json:"topic"`
	Subject     string          `json:"subject,omitempty"`
	Members     []GroupMember   `json:"members"`
	Queues      []GroupQueue    `json:"queues"`
	Rebalancing *GroupRebalance `json:"rebalancing,omitempty"`
	// Rebalances are the last ones, oldest first.
	Rebalances  []GroupRebalance `json:"rebalances"`
	Redelivered int64            `json:"redelivered"`
	LagMessages int64            `json:"lagMessages"`
	LagMs       int64            `json:"lagMs"`
	// Engine answered for Partitions (partitioned deployments).
	Engine     string  `json:"engine,omitempty"`
	Partitions []int32 `json:"partitions,omitempty"`
}

// GroupMember is a member of a GroupStatus.
type GroupMember struct {
	MemberID string  `json:"memberId"`
	ClientID string  `json:"clientId,omitempty"`
	JoinedMs int64   `json:"joinedMs"`
	Queues   []int32 `json:"queues"`
}

// GroupQueue is a queue of a GroupStatus.
type GroupQueue struct {
	QueueID  int32  `json:"queueId"`
	Owner    string `json:"owner,omitempty"`
	Epoch    int64  `json:"epoch,omitempty"`
	Revoking bool   `json:"revoking,omitempty"`
	Next     string `json:"next,omitempty"`
	// Committed is the group's offset (-1 when it has none: it starts at MinOffset).
	Committed    int64  `json:"committed"`
	CommitEpoch  int64  `json:"commitEpoch,omitempty"`
	CommitMember string `json:"commitMember,omitempty"`
	CommitMs     int64  `json:"commitMs,omitempty"`
	MinOffset    int64  `json:"minOffset"`
	MaxOffset    int64  `json:"maxOffset"`
	LagMessages  int64  `json:"lagMessages"`
	LagMs        int64  `json:"lagMs"`
}

// GroupRebalance is a rebalance of a GroupStatus.
type GroupRebalance struct {
	Reason      string `json:"reason"`
	MemberID    string `json:"memberId,omitempty"`
	StartMs     int64  `json:"startMs"`
	DurationMs  int64  `json:"durationMs"` // 0 while under way
	Moved       int    `json:"moved"`
	Redelivered int64  `json:"redelivered"`
}

// GroupResetRequest sets a group's offsets: to Offset, or to the first message stored at or
// after Timestamp (ms), in Queues (every queue of the topic when empty). Refused while the
// group has members.
type GroupResetRequest struct {
	Group     string  `json:"group"`
	Topic     string  `json:"topic"`
	Queues    []int32 `json:"queues,omitempty"`
	Offset    *int64  `json:"offset,omitempty"`
	Timestamp *int64  `json:"timestamp,omitempty"`
}

// GroupResetReply lists the offsets set.
type GroupResetReply struct {
	Queues []QueueOffset `json:"queues"`
}

// GroupDeleteReply says whether the group had offsets.
type GroupDeleteReply struct {
	Deleted bool `json:"deleted"`
}
