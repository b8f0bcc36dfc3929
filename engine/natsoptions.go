package engine

import (
	"time"

	"github.com/nats-io/nats.go"

	"github.com/rocketstore/engine/engine/groups"
	"github.com/rocketstore/engine/engine/natsserver"
	"github.com/rocketstore/engine/stages/ingress/jspull"
	"github.com/rocketstore/engine/stages/ingress/replicated"
	"github.com/rocketstore/engine/stages/ingress/route"
)

// NATSOptions configure the NATS side of a served engine.
type NATSOptions struct {
	// URL of an external server, or several, comma-separated (nats.go tries them in random
	// order and reconnects to any); empty embeds a server listening on Listen.
	URL string
	// Listen is the embedded server's client address (127.0.0.1:4222; port -1 picks one). With
	// ServerConfig, an empty Listen keeps the address the file sets (its host defaulting to
	// 127.0.0.1 and its port to 4222).
	Listen string
	// ServerConfig is a nats-server configuration file for the embedded server
	// (server.ProcessConfigFile: accounts, authorization, TLS, JetStream, limits...). The engine
	// applies its own requirements on top: NoSigs (the engine alone handles signals) and a
	// max_payload of at least the body limit + 64 KiB (a smaller one is raised, with a
	// warning). The server logs through the engine's logger, at its level: the file's log
	// settings are not used.
	ServerConfig string
	// Subjects to store (">" by default: every subject but inboxes and $-subjects).
	Subjects   []string
	QueueGroup string
	// TopicTokens > 0 takes the first tokens of a subject as the topic and the rest as TAGS.
	TopicTokens int
	// Topics are declared topics, matched first; MaxTopics limits the rest (see route.Mapping).
	Topics    []route.TopicPattern
	MaxTopics int
	// NoSubjectTags keeps new wide topics out of the subject-tag rule (route.WideTopics, subjecttags).
	NoSubjectTags  bool
	QueuesPerTopic int
	KeysHeader     string
	TagsHeader     string
	Workers        int
	// WorkerQueue and MaxBatch are ingress's bounds (ingress.Config): jobs waiting per worker
	// (ingress.DefaultWorkerQueue) and records per batch sent to the writer
	// (ingress.DefaultMaxBatch).
	WorkerQueue, MaxBatch int
	// PendingMsgs and PendingBytes bound the fire-and-forget messages ingress holds, and what
	// the NATS client buffers per subscription (ingress.Config: past them such messages are
	// dropped, counted by topic and logged); 0: ingress.DefaultPendingMsgs and
	// DefaultPendingBytes.
	PendingMsgs, PendingBytes int
	NoReply                   bool
	// Name is the connection name the server shows (rocketstore).
	Name string
	// QueueKeyHeader is the header whose value picks the queue by hash (default KeysHeader: its
	// first key).
	QueueKeyHeader string

	// Authentication and TLS of the engine's connection, to an external server or to the
	// embedded one (when ServerConfig asks for it), with natscli's meanings: Creds is a user
	// credentials file (JWT and nkey seed), Nkey an nkey seed file, User and Password a user,
	// Token a token; TLSCert and TLSKey a client certificate, TLSCA the CAs that verify the
	// server; TLSFirst does the TLS handshake before the server's greeting (the server must
	// have handshake_first). ConnOptions are appended to the engine's own nats.go options (a
	// later option wins): anything else nats.go offers.
	Creds, Nkey, User, Password, Token string
	TLSCert, TLSKey, TLSCA             string
	TLSFirst                           bool
	ConnOptions                        []nats.Option
	// ReconnectWait is the pause between reconnection rounds (nats.go's 2 s). The connection
	// reconnects forever, and also waits for a server that is not up yet at start (logged);
	// nats.go gives up only on the same authorization error twice in a row, which closes the
	// connection (NATSClosed).
	ReconnectWait time.Duration
	// DrainTimeout bounds the drain of the subscriptions and then of the connection at shutdown
	// (30 s each): past it, what is left is dropped (and logged) and the connection closed.
	DrainTimeout time.Duration
	// LogLevels, when the engine's Logger writes through it, is what the embedded nats-server's
	// debug and trace logs follow (instead of the Logger's own level), and what
	// Server.SetLogLevel changes.
	LogLevels *natsserver.LevelWriter
	// JetStream, when set, pulls from an existing JetStream stream through a durable consumer
	// instead of subscribing to Subjects, and acks each message once it is durable here.
	JetStream *jspull.Config

	// The read API (package engine/api), a micro service named "rocketstore" on the engine's
	// connection. NoReadAPI turns it off. APIPrefix is its subjects' prefix (api.DefaultPrefix,
	// "$RS.API"; a prefix without '$' is excluded from ingress). MaxLongPolls bounds the gets
	// waiting at a queue's head at once (DefaultMaxLongPolls), MaxReplays the replays running
	// at once (DefaultMaxReplays). Version is the engine's version the service shows (semver;
	// anything else is shown as 0.0.0-<it>, DefaultVersion when empty).
	NoReadAPI    bool
	APIPrefix    string
	MaxLongPolls int
	MaxReplays   int
	Version      string
	// Groups configures the consumer group coordinator the read API serves (docs/GROUPS.md).
	Groups groups.Config

	// Batched acks (docs/BATCHED-ACKS.md; the publisher package engine/publisher): a message with
	// the Rs-Seq header gets no reply of its own; its stream gets one cumulative ack per round.
	// On by default, but not with JetStream (the header is an ordinary one there) or a
	// QueueGroup (a stream split between engines cannot be tracked: such messages are refused).
	// NoBatchedAcks turns it off (such messages are then refused, 400). MaxStreams bounds the
	// streams tracked (batched.DefaultMaxStreams, 10,000: the least recently active is evicted
	// and told so); StreamIdle expires idle ones (batched.DefaultStreamIdle, 2 min).
	NoBatchedAcks bool
	MaxStreams    int
	StreamIdle    time.Duration

	// Partitions turns on partitioned ingest (docs/SCALE-OUT.md, route.Partitions): the engine
	// subscribes to the partitions it owns, "<prefix>.<p>.>", and stores partition p as queue p
	// of its topic (every topic then has Partitions.Count queues). Subjects and QueueGroup must
	// be empty.
	Partitions *route.Partitions
	// Replicated turns on replicated mode (docs/SCALE-OUT.md, replicated.Config): each
	// owned partition is consumed from its replicated JetStream stream (RMQ_P<p>) through a
	// durable consumer the partition's engines share, pinned to one of them at a time; the
	// publishers' acks are JetStream's. Needs Partitions and JetStream on the servers.
	Replicated *replicated.Config
	// OnRunning, when set, is called with the server once it serves, just before the "engine
	// running" log line (a monitor attaches there, so that whoever waits for that line finds the
	// status running).
	OnRunning func(*Server)
	// Ownership, with Partitions, takes partition ownership from a replicated JetStream
	// key-value bucket instead of Partitions.Owned alone (ownership.go): Partitions.Owned are
	// then claims, taken only where nobody owns the partition yet, and partitions move between
	// engines with MovePartition (`engine partition-move`).
	Ownership *Ownership
	// PartitionSources are the subjects (each with one or more '*' key tokens) that the
	// embedded server partitions into Partitions' namespace: the engine adds their mappings
	// (route.PartitionMapping) to the embedded server's global account. Every other server
	// that accepts publishers must carry the same mappings (`engine partition-map` prints them).
	PartitionSources []string
}
