package ingress

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
	"runtime"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/rocketstore/engine/internal/natssubject"
	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/stages"
	"github.com/rocketstore/engine/stages/ingress/batched"
	"github.com/rocketstore/engine/stages/ingress/jspull"
	"github.com/rocketstore/engine/stages/ingress/replicated"
	"github.com/rocketstore/engine/stages/ingress/route"
)

// Defaults for the zero values of Config.
const (
	DefaultQueuesPerTopic = 4
	DefaultKeysHeader     = "Rmq-Keys"
	DefaultTagsHeader     = "Rmq-Tags"
	DefaultWorkerQueue    = 1024
	// DefaultPendingMsgs and DefaultPendingBytes are the pending limits (Config.PendingMsgs,
	// PendingBytes): a sixteenth of engine.DefaultMemoryLimit's budget, with room left for
	// nats.go's own buffer, the embedded server's and the pipeline's (docs/CONFIG.md, "Memory").
	DefaultPendingMsgs  = 64 << 10
	DefaultPendingBytes = 16 << 20
	DefaultMaxBatch     = 256
	DefaultSubjectCache = 1 << 16
	DefaultDrainTimeout = 30 * time.Second
	DefaultLogInterval  = 5 * time.Second
)

// MaxQueuesPerTopic bounds Config.QueuesPerTopic: a queue id is a Java int on disk (QUEUEID) and
// in every ConsumeQueue's name.
const MaxQueuesPerTopic = math.MaxInt32

// Config wires an Ingress. Conn and Out are required; every other zero value has a default.
type Config struct {
	// Conn is the engine's connection. Ingress subscribes on it and publishes replies on it; it
	// never closes it (see the package doc on stopping).
	Conn *nats.Conn
	// Subjects to subscribe to; default [">"]. Each must be a valid NATS subject (non-empty
	// tokens, no whitespace, '>' only as the last token) outside _INBOX. and $, and no two may
	// overlap (see the package doc): New refuses them otherwise. With
	// ">" the connection also receives every inbox message on the server, our own acks included:
	// they are excluded cheaply, but they are received; narrower subjects avoid that traffic.
	Subjects []string
	// QueueGroup, when set, makes the subscriptions queue subscriptions, so that several engines
	// share the load. NATS then splits each publisher's messages across the group: order holds
	// per engine only.
	QueueGroup string
	// Exclude reports subjects not to store (the engine passes its own API prefixes). Subjects
	// under "_INBOX." (request/reply inboxes, our own acks among them) and subjects starting with
	// "$" (system and JetStream API subjects) are always excluded, whatever Exclude says.
	Exclude func(subject string) bool
	// Interest, when set, is how many subscriptions on the server, ingress's own included, would
	// receive a message on subject (the embedded server can tell; nil with an external one). A
	// request on an excluded subject that only ingress's subscriptions receive is then answered
	// with NATS's no-responders status instead of being left to time out (noresponders.go).
	Interest func(subject string) int

	// Mapping is the subject -> topic rule: declared patterns, the default or token rule, the limit.
	Mapping route.Mapping
	// QueuesPerTopic is how many queues each topic has; default 4.
	QueuesPerTopic int
	// KeysHeader becomes KEYS (default "Rmq-Keys"); TagsHeader becomes TAGS (default "Rmq-Tags").
	KeysHeader, TagsHeader string
	// QueueKeyHeader chooses the queue by hash when present; default KeysHeader (its first key).
	QueueKeyHeader string
	// SubjectCache bounds the subject -> topic cache (and the per-topic round-robin state), in
	// entries; default 65536.
	SubjectCache int

	// Encode are the encoder options; nil means PropCRC on and the default 4 MiB body limit.
	Encode *commitlog.EncodeOptions
	// StoreHost is this engine's address, written in every record and in the offset message ids.
	StoreHost netip.AddrPort
	// BornHost is written as every record's born host. NATS does not tell a subscriber who
	// published a message, so this is a configured value (for example the NATS server's address);
	// the zero value is written as 0.0.0.0:0.
	BornHost netip.AddrPort

	// Workers encode in parallel; default GOMAXPROCS.
	Workers int
	// WorkerQueue is the capacity of each worker's channel, in jobs: a message, or a run of at
	// most MaxBatch entries of one pack. Memory bound: at most Workers × WorkerQueue jobs wait
	// between the callbacks and the workers (a run's bytes are its pack's, one NATS message).
	// Default 1024.
	WorkerQueue int
	// MaxBatch bounds the records of one batch sent to Out; default 256. Memory bound: a full Out
	// holds at most cap(Out) × MaxBatch records.
	MaxBatch int
	// Out carries batches to the appender. Made (bounded) and closed by the engine, which
	// closes it after Run has returned (other producers may share it).
	Out chan<- *stages.Batch

	// PendingMsgs and PendingBytes bound the fire-and-forget messages (no reply subject, no
	// batched-ack header) that ingress holds, shared over the workers' inboxes, each counted
	// as the heap it takes, headers included (msgCost; package inbox): past them it
	// drops such a message and counts it by topic, since nobody waits for it. They are also the
	// nats.go pending limits of each subscription (Subscription.SetPendingLimits): what the
	// client buffers while a callback waits, beyond which it drops. 0 means DefaultPendingMsgs
	// and DefaultPendingBytes; a negative value means no limit (no drops, and no memory bound
	// either).
	PendingMsgs, PendingBytes int
	// DrainTimeout bounds the graceful drain of the subscriptions; default 30 s. Past it the
	// subscriptions are unsubscribed and what nats.go still buffered is dropped (and logged).
	DrainTimeout time.Duration

	// NoReply turns off every reply (acks and errors), for setups where the reply subject is not
	// ours to answer.
	NoReply bool

	// Logger receives warnings (drops, rejects), rate-limited to one line per LogInterval
	// (default 5 s) per kind. The zero value logs nothing.
	Logger      zerolog.Logger
	LogInterval time.Duration
	// Clock stamps the born timestamps and the generated UNIQ_KEYs; default time.Now.
	Clock func() time.Time
	// JetStream, when set, pulls from a JetStream stream instead of subscribing to Subjects:
	// a lossless bridge (see jspull.Config).
	JetStream *jspull.Config
	// Batched, when set, turns batched acks on (package batched, docs/BATCHED-ACKS.md): messages
	// with the Rs-Seq header get one cumulative ack per stream per round instead of a reply each.
	// Without it such messages are refused (ErrBatchedOff). Not with JetStream (the header is
	// then an ordinary property) nor with QueueGroup (a stream split between engines could not
	// be tracked).
	Batched *batched.Config
	// StoreDedupe, when set, carries the dedupe window of publisher message ids where the
	// appender's memory does not reach: across the engine's restart, and past its bound
	// (StoreDedupe).
	StoreDedupe *StoreDedupe
	// Partitions, when set, turns on partitioned ingest (route.Partitions, docs/SCALE-OUT.md): the
	// subscriptions are the owned partitions' ("<Prefix>.<p>.>"; Subjects must be empty), a
	// message's queue is its partition, every topic has Partitions.Count queues
	// (QueuesPerTopic must be 0 or that), and the stored NATS_SUBJECT is the subject the publisher
	// used (the part after "<Prefix>.<p>."). Not with JetStream or QueueGroup.
	Partitions *route.Partitions
	// Replicated, with Partitions, turns on replicated mode (package replicated): each owned
	// partition is consumed from its replicated JetStream stream instead of subscribed to.
	Replicated *replicated.Config
}

// withDefaults checks c and fills in the defaults.
func (c Config) withDefaults() (Config, error) {
	if c.Conn == nil {
		return c, errors.New("ingress: Config.Conn is nil")
	}
	if c.Out == nil {
		return c, errors.New("ingress: Config.Out is nil")
	}
	if c.JetStream != nil {
		js, err := c.JetStream.WithDefaults()
		if err != nil {
			return c, err
		}
		c.JetStream = js
	}
	if c.Batched != nil && c.JetStream != nil {
		c.Batched = nil // JetStream acks its own stream; Rs-Seq is an ordinary header there
	}
	if c.Batched != nil && c.QueueGroup != "" {
		return c, errors.New("ingress: batched acks need every message of a stream to reach one engine: not with a queue group")
	}
	if err := c.Mapping.Check(); err != nil {
		return c, fmt.Errorf("ingress: Config.Mapping: %w", err)
	}
	if c.Partitions != nil {
		parts, err := c.Partitions.Check()
		if err != nil {
			return c, err
		}
		switch {
		case c.JetStream != nil || c.QueueGroup != "":
			return c, errors.New("ingress: partitioned ingest takes its partitions' subjects with plain subscriptions: not with JetStream or a queue group")
		case len(c.Subjects) > 0:
			return c, fmt.Errorf("ingress: partitioned ingest subscribes to its partitions (%s.<p>.>), not to subjects %q",
				parts.Prefix, c.Subjects)
		case c.QueuesPerTopic != 0 && c.QueuesPerTopic != parts.Count:
			return c, fmt.Errorf("ingress: %d queues per topic with %d partitions: a topic's queues are its partitions",
				c.QueuesPerTopic, parts.Count)
		}
		c.Partitions, c.Subjects, c.QueuesPerTopic = parts, parts.Subjects(), parts.Count
	}
	if c.Replicated != nil {
		if c.Partitions == nil {
			return c, errors.New("ingress: replicated mode consumes partitions: it needs Partitions")
		}
		r, err := c.Replicated.WithDefaults()
		if err != nil {
			return c, err
		}
		c.Replicated, c.Batched = r, nil // publishers get JetStream's acks
	}
	if len(c.Subjects) == 0 && c.Partitions == nil {
		c.Subjects = []string{">"} // partitioned ingest may own nothing yet (Dynamic)
	}
	if err := route.CheckSubscriptions(c.Subjects); err != nil {
		return c, err
	}
	if strings.IndexFunc(c.QueueGroup, func(r rune) bool { return r < utf8.RuneSelf && natssubject.Space(byte(r)) }) >= 0 {
		return c, fmt.Errorf("ingress: queue group %q has whitespace, which NATS refuses", c.QueueGroup)
	}
	if c.QueuesPerTopic <= 0 {
		c.QueuesPerTopic = DefaultQueuesPerTopic
	}
	if c.QueuesPerTopic > MaxQueuesPerTopic {
		return c, fmt.Errorf("ingress: %d queues per topic: at most %d (a queue id is a 32-bit int)", c.QueuesPerTopic, MaxQueuesPerTopic)
	}
	if c.KeysHeader == "" {
		c.KeysHeader = DefaultKeysHeader
	}
	if c.TagsHeader == "" {
		c.TagsHeader = DefaultTagsHeader
	}
	if c.QueueKeyHeader == "" {
		c.QueueKeyHeader = c.KeysHeader
	}
	if c.KeysHeader == c.TagsHeader || c.KeysHeader == nats.MsgIdHdr || c.TagsHeader == nats.MsgIdHdr {
		return c, fmt.Errorf("ingress: the keys (%q), tags (%q) and %s headers must differ",
			c.KeysHeader, c.TagsHeader, nats.MsgIdHdr)
	}
	if c.SubjectCache <= 0 {
		c.SubjectCache = DefaultSubjectCache
	}
	if c.Encode == nil {
		c.Encode = &commitlog.EncodeOptions{PropCRC: true}
	}
	if c.Workers <= 0 {
		c.Workers = runtime.GOMAXPROCS(0)
	}
	if c.WorkerQueue <= 0 {
		c.WorkerQueue = DefaultWorkerQueue
	}
	if c.MaxBatch <= 0 {
		c.MaxBatch = DefaultMaxBatch
	}
	if c.PendingMsgs == 0 {
		c.PendingMsgs = DefaultPendingMsgs
	}
	if c.PendingBytes == 0 {
		c.PendingBytes = DefaultPendingBytes
	}
	if c.DrainTimeout <= 0 {
		c.DrainTimeout = DefaultDrainTimeout
	}
	if c.LogInterval <= 0 {
		c.LogInterval = DefaultLogInterval
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	return c, nil
}
