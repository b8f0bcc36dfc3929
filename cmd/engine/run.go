package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketstore/engine/engine"
	"github.com/rocketstore/engine/engine/console"
	"github.com/rocketstore/engine/engine/groups"
	"github.com/rocketstore/engine/engine/monitor"
	"github.com/rocketstore/engine/engine/natsserver"
	"github.com/rocketstore/engine/stages/ingress/jspull"
	"github.com/rocketstore/engine/stages/ingress/replicated"
	"github.com/rocketstore/engine/stages/ingress/route"
)

// runCmd is `engine run`: zero configuration runs an embedded nats-server on 127.0.0.1:4222
// and stores every subject under ./store.
//
// Every flag but --config and --check-config is also a key of the configuration file (the flag's
// name with '_' for '-': --file-reserved-time is file_reserved_time) and has an environment
// variable; precedence is flag > environment > file > default (config.go). docs/CONFIG.md lists
// them all. A zero value keeps its meaning here: the defaults below are the engine's.
type runCmd struct {
	Config      string `short:"c" help:"Configuration file, in the NATS server config format (docs/CONFIG.md): it sets what no flag or environment variable sets." env:"ENGINE_CONFIG" type:"path" default:"" placeholder:"FILE"`
	CheckConfig bool   `name:"check-config" short:"t" help:"Check the configuration, print it (every key, its value and where it came from) and exit: 0 if valid, 2 if not."`

	// Store files (RocketMQ's store settings).
	Store          string        `help:"Store directory (created if missing)." default:"./store" env:"ENGINE_STORE" type:"path" group:"Store"`
	CommitLogSize  byteSize      `name:"commit-log-size" help:"Size of each CommitLog segment (mappedFileSizeCommitLog)." default:"1GiB" env:"ENGINE_COMMIT_LOG_SIZE" group:"Store"`
	CQUnits        int           `name:"cq-units" help:"ConsumeQueue units (20 bytes each) per file (mappedFileSizeConsumeQueue / 20)." default:"300000" env:"ENGINE_CQ_UNITS" group:"Store"`
	IndexSlots     int           `name:"index-slots" help:"IndexFile hash slots per file (maxHashSlotNum)." default:"5000000" env:"ENGINE_INDEX_SLOTS" group:"Store"`
	IndexEntries   int           `name:"index-entries" help:"IndexFile entries per file (maxIndexNum)." default:"20000000" env:"ENGINE_INDEX_ENTRIES" group:"Store"`
	NoIndex        bool          `name:"no-index" help:"Do not build the IndexFile (no lookup by key; messageIndexEnable=false)." env:"ENGINE_NO_INDEX" group:"Store"`
	NoPropCRC      bool          `name:"no-prop-crc" help:"Do not write the whole-record __CRC32# property (then only the body is checksummed)." env:"ENGINE_NO_PROP_CRC" group:"Store"`
	CommitLogCache byteSize      `name:"commit-log-cache" help:"CommitLog bytes behind the head kept in the page cache; older pages are dropped as the log grows (0: keep all, the kernel's choice, as RocketMQ)." default:"1GiB" env:"ENGINE_COMMIT_LOG_CACHE" group:"Store"`
	MmapWrites     bool          `name:"mmap-writes" help:"Copy records into the CommitLog's mapping (RocketMQ's default) instead of writing each append round with one pwrite; costs more CPU per page (see benchmarks/RESULTS.md)." env:"ENGINE_MMAP_WRITES" group:"Store"`
	MaxBody        byteSize      `name:"max-body" help:"Largest body accepted (maxMessageSize)." default:"4MiB" env:"ENGINE_MAX_BODY" group:"Store"`
	StoreHost      string        `name:"store-host" help:"Address written into records and message ids (RocketMQ's store host)." default:"127.0.0.1:10911" env:"ENGINE_STORE_HOST" group:"Store"`
	DedupeWindow   time.Duration `name:"dedupe-window" help:"How long a Nats-Msg-Id is remembered to drop duplicates." default:"2m" env:"ENGINE_DEDUPE_WINDOW" group:"Store"`
	DedupeMax      int           `name:"dedupe-max" help:"At most this many message ids are held in memory; ids pushed out before their window ends are looked up in the IndexFile. 0 turns dedupe off." default:"500000" env:"ENGINE_DEDUPE_MAX" group:"Store"`

	// Flush (what an ack means, and RocketMQ's flush services).
	Flush                   string        `help:"What an ack means: sync = on disk (group commit), async = written to the page cache (flushDiskType)." enum:"sync,async" default:"sync" env:"ENGINE_FLUSH" group:"Flush"`
	FlushInterval           time.Duration `name:"flush-interval" help:"async: CommitLog flush interval (flushIntervalCommitLog)." default:"500ms" env:"ENGINE_FLUSH_INTERVAL" group:"Flush"`
	FlushLeastPages         int           `name:"flush-least-pages" help:"async: flush when at least this many 4 KiB pages are dirty; 0 flushes whatever is dirty (flushCommitLogLeastPages)." default:"4" env:"ENGINE_FLUSH_LEAST_PAGES" group:"Flush"`
	FlushThoroughInterval   time.Duration `name:"flush-thorough-interval" help:"async: flush everything at least this often (flushCommitLogThoroughInterval)." default:"10s" env:"ENGINE_FLUSH_THOROUGH_INTERVAL" group:"Flush"`
	CQFlushInterval         time.Duration `name:"cq-flush-interval" help:"ConsumeQueue flush interval (flushIntervalConsumeQueue)." default:"1s" env:"ENGINE_CQ_FLUSH_INTERVAL" group:"Flush"`
	CQFlushLeastPages       int           `name:"cq-flush-least-pages" help:"ConsumeQueue: flush when at least this many pages are dirty; 0 flushes whatever is dirty (flushConsumeQueueLeastPages)." default:"2" env:"ENGINE_CQ_FLUSH_LEAST_PAGES" group:"Flush"`
	CQFlushThoroughInterval time.Duration `name:"cq-flush-thorough-interval" help:"ConsumeQueue: flush everything and write the checkpoint at least this often (flushConsumeQueueThoroughInterval)." default:"60s" env:"ENGINE_CQ_FLUSH_THOROUGH_INTERVAL" group:"Flush"`
	SlowSync                time.Duration `name:"slow-sync" help:"Log a warning for a sync slower than this." default:"1s" env:"ENGINE_SLOW_SYNC" group:"Flush"`
	DispatchStopTimeout     time.Duration `name:"dispatch-stop-timeout" help:"At shutdown, how long dispatch may go on building the ConsumeQueues and IndexFiles of what is stored; the rest is dispatched at the next start, from the checkpoint. Negative: until it is all done." default:"5s" env:"ENGINE_DISPATCH_STOP_TIMEOUT" group:"Flush"`
	OffsetPersistInterval   time.Duration `name:"offset-persist-interval" help:"Async flush: how often the consumer offsets journal is fsynced (flushConsumerOffsetInterval); sync flush fsyncs each commit before its answer." default:"5s" env:"ENGINE_OFFSET_PERSIST_INTERVAL" group:"Flush"`

	// Retention (CleanCommitLogService). Reloaded on SIGHUP.
	FileReservedTime       time.Duration `name:"file-reserved-time" help:"Delete CommitLog segments older than this (fileReservedTime). Reloaded on SIGHUP." default:"72h" env:"ENGINE_FILE_RESERVED_TIME" group:"Retention"`
	DeleteWhen             string        `name:"delete-when" help:"Local hours at which expired segments are deleted, ';'-separated, e.g. 04;16 (deleteWhen). Reloaded on SIGHUP." default:"04" env:"ENGINE_DELETE_WHEN" group:"Retention"`
	CleanInterval          time.Duration `name:"clean-interval" help:"How often retention runs (cleanResourceInterval). Reloaded on SIGHUP." default:"10s" env:"ENGINE_CLEAN_INTERVAL" group:"Retention"`
	CleanFirstDelay        time.Duration `name:"clean-first-delay" help:"Delay of the first retention pass after the start." default:"60s" env:"ENGINE_CLEAN_FIRST_DELAY" group:"Retention"`
	DiskMaxUsedRatio       float64       `name:"disk-max-used-ratio" help:"Above this disk use, expired segments are deleted at any hour (diskMaxUsedSpaceRatio; 0.10-0.95). Reloaded on SIGHUP." default:"0.75" env:"ENGINE_DISK_MAX_USED_RATIO" group:"Retention"`
	DiskCleanForciblyRatio float64       `name:"disk-clean-forcibly-ratio" help:"Above this disk use, the oldest segments are deleted whatever their age (diskSpaceCleanForciblyRatio; 0.30-0.85). Reloaded on SIGHUP." default:"0.85" env:"ENGINE_DISK_CLEAN_FORCIBLY_RATIO" group:"Retention"`
	DiskWarningRatio       float64       `name:"disk-warning-ratio" help:"Above this disk use, writes are refused (507) until it falls (diskSpaceWarningLevelRatio; 0.35-0.90). Reloaded on SIGHUP." default:"0.90" env:"ENGINE_DISK_WARNING_RATIO" group:"Retention"`
	DeleteFilesPerPass     int           `name:"delete-files-per-pass" help:"At most this many segments are deleted per retention pass. Reloaded on SIGHUP." default:"10" env:"ENGINE_DELETE_FILES_PER_PASS" group:"Retention"`
	NoRetention            bool          `name:"no-retention" help:"Never delete files on schedule (writes are still refused above --disk-warning-ratio). Reloaded on SIGHUP." env:"ENGINE_NO_RETENTION" group:"Retention"`

	// Ingress: subjects, mapping, acks.
	Subjects       []string      `help:"Subjects to store, comma-separated; wildcards allowed, no two overlapping. Inboxes (_INBOX.>) and $-subjects are never stored." default:">" env:"ENGINE_SUBJECTS" group:"Ingress"`
	QueueGroup     string        `name:"queue-group" help:"Queue group for the subscriptions, so that several engines share the load (order then holds per engine)." env:"ENGINE_QUEUE_GROUP" group:"Ingress"`
	TopicTokens    int           `name:"topic-tokens" help:"Take the first N tokens of a subject as the topic and the rest as TAGS (0: the whole subject is the topic)." default:"0" env:"ENGINE_TOPIC_TOKENS" group:"Ingress"`
	Topics         []string      `help:"Topics declared by subject pattern, comma-separated: PATTERN (orders.> is topic orders, device.*.temp is topic device) or PATTERN=TOPIC. Every subject a pattern matches is stored in its topic, with its subject in NATS_SUBJECT; matched before the rule, no two overlapping." env:"ENGINE_TOPICS" group:"Ingress"`
	NoSubjectTags  bool          `name:"no-subject-tags" help:"Store declared topics (and _overflow) new to the store as before: TAGS from the tags header, not the subject (reads of one subject then read every record of the topic). Topics already under the subject-tag rule keep it." env:"ENGINE_NO_SUBJECT_TAGS" group:"Ingress"`
	MaxTopics      int           `name:"max-topics" help:"Topics the subject rule may make (declared topics aside); the subjects of any further topic are stored in topic _overflow. -1 (--max-topics=-1): no limit." default:"1024" env:"ENGINE_MAX_TOPICS" group:"Ingress"`
	Queues         int           `help:"Queues per topic." default:"4" env:"ENGINE_QUEUES" group:"Ingress"`
	KeysHeader     string        `name:"keys-header" help:"Header whose value becomes KEYS (indexed, space-separated)." default:"Rmq-Keys" env:"ENGINE_KEYS_HEADER" group:"Ingress"`
	TagsHeader     string        `name:"tags-header" help:"Header whose value becomes TAGS." default:"Rmq-Tags" env:"ENGINE_TAGS_HEADER" group:"Ingress"`
	QueueKeyHeader string        `name:"queue-key-header" help:"Header whose value picks the queue by hash (empty: the first key of --keys-header); without it, round-robin." env:"ENGINE_QUEUE_KEY_HEADER" group:"Ingress"`
	NoReply        bool          `name:"no-reply" help:"Send no reply at all (no ack, no error): for setups where the reply subject is not ours to answer." env:"ENGINE_NO_REPLY" group:"Ingress"`
	NoBatchedAcks  bool          `name:"no-batched-acks" help:"Turn batched acks off (messages with Rs-Seq are then refused)." env:"ENGINE_NO_BATCHED_ACKS" group:"Ingress"`
	MaxStreams     int           `name:"max-streams" help:"Batched acks: streams tracked at once (the least recently active is evicted)." default:"10000" env:"ENGINE_MAX_STREAMS" group:"Ingress"`
	StreamIdle     time.Duration `name:"stream-idle" help:"Batched acks: a stream idle this long is forgotten." default:"2m" env:"ENGINE_STREAM_IDLE" group:"Ingress"`
	Workers        int           `help:"Encoding workers (0: one per CPU)." default:"0" env:"ENGINE_WORKERS" group:"Ingress"`
	PendingMsgs    int           `name:"pending-msgs" help:"Fire-and-forget messages ingress holds before it drops (counted by topic), and the NATS client's pending limit per subscription; -1: no limit." default:"65536" env:"ENGINE_PENDING_MSGS" group:"Ingress"`
	PendingBytes   limitSize     `name:"pending-bytes" help:"Bytes of those messages (each counted as the heap it takes: headers twice, 256 bytes for the message itself) ingress holds before it drops, and the NATS client's pending limit per subscription; -1: no limit." default:"16MiB" env:"ENGINE_PENDING_BYTES" group:"Ingress"`
	MemoryLimit    byteSize      `name:"memory-limit" help:"The whole process's memory budget: the Go runtime's soft limit (GOMEMLIMIT, when set, wins); 0: none. The default pending limits fit in the default (docs/CONFIG.md, Memory). Read at start." default:"256MiB" env:"ENGINE_MEMORY_LIMIT" group:"Ingress"`
	DrainTimeout   time.Duration `name:"drain-timeout" help:"At shutdown, how long the subscriptions, then the connection, may take to drain." default:"30s" env:"ENGINE_DRAIN_TIMEOUT" group:"Ingress"`

	Partitions         int           `help:"Partitioned ingest over several engines (docs/SCALE-OUT.md): P, the partitions (and queues) of every topic; 0: off. The NATS servers partition the subjects with a mapping (engine partition-map prints it)." default:"0" env:"ENGINE_PARTITIONS" group:"Partitions"`
	OwnedPartitions    string        `name:"owned-partitions" help:"The partitions this engine stores: numbers and ranges, comma-separated (0-15,32)." env:"ENGINE_OWNED_PARTITIONS" group:"Partitions"`
	PartitionPrefix    string        `name:"partition-prefix" help:"The partitions' namespace: partition p's messages come on <prefix>.<p>.<subject>." default:"rmq.p" env:"ENGINE_PARTITION_PREFIX" group:"Partitions"`
	Ownership          string        `help:"Where partition ownership comes from: config (--owned-partitions) or kv (a replicated JetStream key-value bucket: --owned-partitions are then claims, and partitions move with engine partition-move)." enum:"config,kv" default:"config" env:"ENGINE_OWNERSHIP" group:"Partitions"`
	EngineID           string        `name:"engine-id" help:"This engine's name in the ownership bucket, or among the engines of a replicated partition (default there: its store host): unique among the engines, stable across restarts." env:"ENGINE_ID" group:"Partitions"`
	OwnershipBucket    string        `name:"ownership-bucket" help:"The ownership key-value bucket (created if missing)." default:"RMQ_PARTITIONS" env:"ENGINE_OWNERSHIP_BUCKET" group:"Partitions"`
	OwnershipReplicas  int           `name:"ownership-replicas" help:"Replicas of the ownership bucket when the engine creates it." default:"3" env:"ENGINE_OWNERSHIP_REPLICAS" group:"Partitions"`
	Replicated         bool          `help:"Replicated mode (docs/SCALE-OUT.md): consume each owned partition from its replicated JetStream stream through a consumer shared, pinned, by the partition's engines; publishers get JetStream's acks." env:"ENGINE_REPLICATED" group:"Partitions"`
	StreamPrefix       string        `name:"stream-prefix" help:"Replicated mode: partition p's stream is <prefix><p>." default:"RMQ_P" env:"ENGINE_STREAM_PREFIX" group:"Partitions"`
	StreamReplicas     int           `name:"stream-replicas" help:"Replicated mode: replicas of the streams the engine creates." default:"3" env:"ENGINE_STREAM_REPLICAS" group:"Partitions"`
	StreamMaxAge       time.Duration `name:"stream-max-age" help:"Replicated mode: how long the streams the engine creates keep messages (an engine that falls further behind cannot catch up)." default:"168h" env:"ENGINE_STREAM_MAX_AGE" group:"Partitions"`
	ReplicatedConsumer string        `name:"replicated-consumer" help:"Replicated mode: the durable consumer this engine shares with the partition's other engines (one takes a partition at a time); a name of its own makes it a hot standby that takes everything." default:"rocketstore" env:"ENGINE_REPLICATED_CONSUMER" group:"Partitions"`
	PinnedTTL          time.Duration `name:"pinned-ttl" help:"Replicated mode: how long a silent engine keeps its partitions before another takes them." default:"10s" env:"ENGINE_PINNED_TTL" group:"Partitions"`
	PartitionSubjects  []string      `name:"partition-subjects" help:"Subjects the embedded server partitions, each with '*' key tokens (orders.*): their mappings are added to it. Every other server must carry the same." env:"ENGINE_PARTITION_SUBJECTS" group:"Partitions"`

	JSStream   string `name:"js-stream" help:"Pull from this existing JetStream stream instead of subscribing to --subjects: a lossless bridge (each message is acked to the stream once durable here)." env:"ENGINE_JS_STREAM" group:"JetStream bridge"`
	JSConsumer string `name:"js-consumer" help:"Durable pull consumer on --js-stream (created if missing)." default:"rocketstore" env:"ENGINE_JS_CONSUMER" group:"JetStream bridge"`
	JSFilter   string `name:"js-filter" help:"Filter subject for a new --js-consumer." env:"ENGINE_JS_FILTER" group:"JetStream bridge"`

	// The NATS connection: natscli's flag names and environment variables.
	Server         string        `short:"s" aliases:"nats" help:"NATS server URLs of an external server, comma-separated, instead of the embedded one (its max_payload should be at least the body limit + 64 KiB)." env:"NATS_URL" placeholder:"URL" group:"NATS connection"`
	Creds          string        `help:"User credentials file (JWT + nkey seed)." env:"NATS_CREDS" type:"path" default:"" placeholder:"FILE" group:"NATS connection"`
	Nkey           string        `help:"User nkey seed file." env:"NATS_NKEY" type:"path" default:"" placeholder:"FILE" group:"NATS connection"`
	User           string        `help:"User name." env:"NATS_USER" group:"NATS connection"`
	Password       string        `help:"Password." env:"NATS_PASSWORD" group:"NATS connection"`
	Token          string        `help:"Authentication token." env:"NATS_TOKEN" group:"NATS connection"`
	TLSCert        string        `name:"tlscert" help:"TLS client certificate file." env:"NATS_CERT" type:"path" default:"" placeholder:"FILE" group:"NATS connection"`
	TLSKey         string        `name:"tlskey" help:"TLS client private key file." env:"NATS_KEY" type:"path" default:"" placeholder:"FILE" group:"NATS connection"`
	TLSCA          string        `name:"tlsca" help:"TLS certificate authority chain file." env:"NATS_CA" type:"path" default:"" placeholder:"FILE" group:"NATS connection"`
	TLSFirst       bool          `name:"tlsfirst" help:"Do the TLS handshake before the server's greeting (the server needs handshake_first)." env:"ENGINE_TLSFIRST" group:"NATS connection"`
	ConnectionName string        `name:"connection-name" help:"Name of the engine's connection, as the server shows it." default:"rocketstore" env:"ENGINE_CONNECTION_NAME" group:"NATS connection"`
	ReconnectWait  time.Duration `name:"reconnect-wait" help:"Pause between reconnection attempts; the engine reconnects forever, and waits for a server that is not up yet." default:"2s" env:"ENGINE_RECONNECT_WAIT" group:"NATS connection"`

	// The embedded server.
	Listen     string `help:"Client address of the embedded nats-server (port -1: any free port)." default:"127.0.0.1:4222" env:"ENGINE_LISTEN" group:"Embedded server"`
	NATSConfig string `name:"nats-config" help:"nats-server configuration file for the embedded server (accounts, TLS, JetStream...); --listen, when set, overrides its address." env:"ENGINE_NATS_CONFIG" type:"path" default:"" placeholder:"FILE" group:"Embedded server"`

	// The read API.
	NoReadAPI    bool   `name:"no-read-api" help:"Do not serve the read API over NATS." env:"ENGINE_NO_READ_API" group:"Read API"`
	APIPrefix    string `name:"api-prefix" help:"Subject prefix of the read API." default:"$RS.API" env:"ENGINE_API_PREFIX" group:"Read API"`
	MaxLongPolls int    `name:"max-long-polls" help:"Gets waiting at the head of a queue at once." default:"128" env:"ENGINE_MAX_LONG_POLLS" group:"Read API"`
	MaxReplays   int    `name:"max-replays" help:"Replays running at once." default:"4" env:"ENGINE_MAX_REPLAYS" group:"Read API"`

	// Consumer groups (docs/GROUPS.md).
	GroupHeartbeat        time.Duration `name:"group-heartbeat" help:"How often consumer group members heartbeat." default:"1s" env:"ENGINE_GROUP_HEARTBEAT" group:"Consumer groups"`
	GroupSessionTimeout   time.Duration `name:"group-session-timeout" help:"A member not heard from for this long is taken out of its group, its queues moved (at least twice the heartbeat)." default:"3s" env:"ENGINE_GROUP_SESSION_TIMEOUT" group:"Consumer groups"`
	GroupRebalanceTimeout time.Duration `name:"group-rebalance-timeout" help:"How long a member may take to release a queue asked back before it is taken from it." default:"30s" env:"ENGINE_GROUP_REBALANCE_TIMEOUT" group:"Consumer groups"`
	GroupMaxMembers       int           `name:"group-max-members" help:"Members of every consumer group on the engine together." default:"50000" env:"ENGINE_GROUP_MAX_MEMBERS" group:"Consumer groups"`
	GroupMaxGroupMembers  int           `name:"group-max-group-members" help:"Members of one consumer group." default:"1000" env:"ENGINE_GROUP_MAX_GROUP_MEMBERS" group:"Consumer groups"`
	MaxGroups             int           `name:"max-groups" help:"Consumer groups whose committed offsets the store keeps (-1: no bound); a commit of one more is refused (429)." default:"100000" env:"ENGINE_MAX_GROUPS" group:"Consumer groups"`

	HTTP  string `name:"http" help:"Serve /metrics (Prometheus), /healthz, /readyz, /status and the console (/console/) on this address (e.g. 127.0.0.1:8222); empty: off." env:"ENGINE_HTTP" group:"Monitoring"`
	Pprof bool   `help:"Also serve /debug/pprof on the --http address." env:"ENGINE_PPROF" group:"Monitoring"`

	// The console in the browser (engine/console), on the --http address.
	NoConsole       bool   `name:"no-console" help:"Do not serve the console under /console/ on the --http address." env:"ENGINE_NO_CONSOLE" group:"Console"`
	ConsoleUser     string `name:"console-user" help:"User name of the console's credentials (HTTP basic authentication)." default:"admin" env:"ENGINE_CONSOLE_USER" group:"Console"`
	ConsolePassword string `name:"console-password" help:"Password of the console: when set, every console request needs it; on an --http address other than loopback the console is refused without it." env:"ENGINE_CONSOLE_PASSWORD" group:"Console"`
	ConsoleActions  bool   `name:"console-actions" help:"Let the console reset and delete consumer groups (each confirmed in the page); needs --console-password." env:"ENGINE_CONSOLE_ACTIONS" group:"Console"`

	// Set by the hooks (config.go), not flags.
	file     *configFile // the configuration file, if any
	settings []setting   // every key, its value and its source, after parsing
	args     []string    // the command line, parsed again on SIGHUP
}

func (r *runCmd) Run(log zerolog.Logger, levels *natsserver.LevelWriter) error {
	if err := r.validate(); err != nil {
		return err
	}
	if r.CheckConfig {
		r.printConfig(os.Stdout)
		return nil
	}
	log = dynamicLogger(log)
	ev := log.Info()
	if limit := applyMemoryLimit(int64(r.MemoryLimit)); limit == math.MaxInt64 {
		ev = ev.Str("memory_limit", "none")
	} else {
		ev = ev.Int64("memory_limit", limit)
	}
	_, fromEnv := os.LookupEnv("GOMEMLIMIT")
	ev.Bool("from_gomemlimit", fromEnv).Msg("memory budget")
	opts, nopts := r.options(log)
	nopts.LogLevels = levels
	if r.file != nil {
		log.Info().Str("config", r.file.path).Msg("configuration file loaded")
	}
	// Signals are caught before anything starts, so that one arriving during start-up still
	// gets the graceful stop. NoSigs on the embedded server: the engine alone decides the order.
	// SIGHUP is caught from the start too (its default action would end the process); it is
	// handled once the engine runs.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	hups := make(chan os.Signal, 1)
	signal.Notify(hups, syscall.SIGHUP)
	defer signal.Stop(hups)
	// A signal during start-up (recovery, or waiting for a NATS server not up yet) gives up the
	// start: everything started closes again cleanly.
	startCtx, startDone := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer startDone()
	var mon *monitor.Monitor
	var con *console.Console
	var err error
	if r.HTTP != "" {
		var stopConsole func()
		if con, stopConsole, err = r.startConsole(log); err != nil {
			return err
		}
		defer stopConsole()
		// Up before the store opens, so that /readyz says "recovering" during recovery.
		mopts := monitor.Options{Version: version, StoreDir: opts.Dir, Pprof: r.Pprof, Logger: log}
		if con != nil {
			mopts.Console = con
		}
		if mon, err = monitor.Start(r.HTTP, mopts); err != nil {
			return err
		}
		defer mon.Close()
		if con != nil {
			con.SetStatus(mon.Status)
		}
		log.Info().Str("http", mon.URL()).Bool("console", con != nil).Msg("monitoring")
	}
	if mon != nil {
		nopts.OnRunning = func(s *engine.Server) { // before the "engine running" line: the status is then running
			mon.Attach(s.Engine, s)
			if con != nil {
				con.Attach(console.ServerTarget(s))
			}
		}
	}
	srv, err := engine.ServeContext(startCtx, opts, nopts)
	if err != nil {
		if startCtx.Err() != nil && errors.Is(err, context.Canceled) {
			log.Info().Msg("stopped during start-up: nothing was taken yet")
			return nil
		}
		if mon != nil {
			mon.Fail(err)
		}
		return err
	}
	startDone()
	if mon != nil {
		mon.Attach(srv.Engine, srv)
	}
	var runErr error
loop:
	for {
		select {
		case <-hups:
			r.reload(srv, log)
		case s := <-sigs:
			// Not ready first, then the log line: whoever reads the line (a supervisor, a
			// test) finds /readyz already saying so.
			if mon != nil {
				mon.SetPhase(monitor.PhaseStopping, "signal "+s.String())
			}
			log.Info().Str("signal", s.String()).Msg("stopping: draining every stage (a second signal exits at once)")
			break loop
		case <-srv.Done():
			log.Error().Err(srv.Engine.Err()).Msg("pipeline stopped")
			break loop
		case <-srv.NATSClosed():
			runErr = fmt.Errorf("the nats connection closed and will not reconnect: %w", srv.NATSError())
			log.Error().Err(runErr).Msg("stopping: nothing can reach the engine any more")
			if mon != nil {
				mon.SetPhase(monitor.PhaseStopping, "nats connection closed")
			}
			break loop
		}
	}
	go func() {
		s := <-sigs
		log.Warn().Str("signal", s.String()).Msg("second signal: exiting without draining; the next start recovers")
		os.Exit(1)
	}()
	err = errors.Join(runErr, srv.Engine.Err(), srv.Shutdown())
	if err != nil {
		return err
	}
	log.Info().Msg("stopped cleanly")
	return nil
}

// options are the engine's options for r, which validate has checked.
func (r *runCmd) options(log zerolog.Logger) (engine.Options, engine.NATSOptions) {
	host, _ := netip.ParseAddrPort(r.StoreHost)
	mode := engine.FlushSync
	if r.Flush == "async" {
		mode = engine.FlushAsync
	}
	// RocketMQ's "least pages 0" flushes whatever is dirty; the engine's 0 means its default,
	// and a negative value means whatever is dirty.
	anyDirty := func(n int) int {
		if n == 0 {
			return -1
		}
		return n
	}
	dedupeMax := r.DedupeMax
	if dedupeMax == 0 {
		dedupeMax = -1 // off
	}
	opts := engine.Options{
		Dir:                     r.Store,
		Logger:                  log,
		FlushMode:               mode,
		CommitLogFileSize:       int64(r.CommitLogSize),
		CommitLogCache:          cmp.Or(int64(r.CommitLogCache), -1),
		ConsumeQueueUnits:       r.CQUnits,
		IndexSlots:              r.IndexSlots,
		IndexEntries:            r.IndexEntries,
		NoIndex:                 r.NoIndex,
		NoPropCRC:               r.NoPropCRC,
		MmapWrites:              r.MmapWrites,
		MaxBodySize:             int(r.MaxBody),
		StoreHost:               host,
		DedupeWindow:            r.DedupeWindow,
		DedupeMax:               dedupeMax,
		FlushInterval:           r.FlushInterval,
		FlushLeastPages:         anyDirty(r.FlushLeastPages),
		FlushThoroughInterval:   r.FlushThoroughInterval,
		CQFlushInterval:         r.CQFlushInterval,
		CQFlushLeastPages:       anyDirty(r.CQFlushLeastPages),
		CQFlushThoroughInterval: r.CQFlushThoroughInterval,
		SlowSync:                r.SlowSync,
		OffsetPersistInterval:   r.OffsetPersistInterval,
		MaxGroups:               r.MaxGroups,
		CleanFirstDelay:         r.CleanFirstDelay,
		DispatchStopTimeout:     r.DispatchStopTimeout,
	}
	opts.FileReservedTime, opts.DeleteWhen, opts.CleanInterval = r.FileReservedTime, r.DeleteWhen, r.CleanInterval
	opts.DiskMaxUsedRatio, opts.DiskCleanForciblyRatio, opts.DiskWarningRatio = r.DiskMaxUsedRatio, r.DiskCleanForciblyRatio, r.DiskWarningRatio
	opts.DeleteFilesPerPass, opts.NoRetention = r.DeleteFilesPerPass, r.NoRetention
	nopts := engine.NATSOptions{
		URL: r.Server, ServerConfig: r.NATSConfig, Subjects: r.Subjects, QueueGroup: r.QueueGroup,
		TopicTokens: r.TopicTokens, Topics: r.topicPatterns(), NoSubjectTags: r.NoSubjectTags, MaxTopics: r.MaxTopics, QueuesPerTopic: r.Queues,
		KeysHeader: r.KeysHeader, TagsHeader: r.TagsHeader, QueueKeyHeader: r.QueueKeyHeader,
		Workers: r.Workers, PendingMsgs: r.PendingMsgs, PendingBytes: int(r.PendingBytes),
		NoReply: r.NoReply, Name: r.ConnectionName,
		NoReadAPI: r.NoReadAPI, APIPrefix: r.APIPrefix, MaxLongPolls: r.MaxLongPolls, MaxReplays: r.MaxReplays,
		Groups: groups.Config{HeartbeatInterval: r.GroupHeartbeat, SessionTimeout: r.GroupSessionTimeout,
			RebalanceTimeout: r.GroupRebalanceTimeout, MaxMembers: r.GroupMaxMembers, MaxGroupMembers: r.GroupMaxGroupMembers},
		Version:       version,
		NoBatchedAcks: r.NoBatchedAcks, MaxStreams: r.MaxStreams, StreamIdle: r.StreamIdle,
		Creds: r.Creds, Nkey: r.Nkey, User: r.User, Password: r.Password, Token: r.Token,
		TLSCert: r.TLSCert, TLSKey: r.TLSKey, TLSCA: r.TLSCA, TLSFirst: r.TLSFirst,
		ReconnectWait: r.ReconnectWait, DrainTimeout: r.DrainTimeout,
	}
	// --listen applies to the embedded server's address unless --nats-config gives it and no
	// flag, variable or file line set --listen.
	if r.NATSConfig == "" || r.sourceOf("listen") != sourceDefault {
		nopts.Listen = r.Listen
	}
	if r.JSStream != "" {
		nopts.JetStream = &jspull.Config{Stream: r.JSStream, Consumer: r.JSConsumer, FilterSubject: r.JSFilter}
	}
	if nopts.Partitions = r.partitionsOf(); nopts.Partitions != nil {
		nopts.Subjects, nopts.QueuesPerTopic, nopts.PartitionSources = nil, r.Partitions, r.PartitionSubjects
		if r.Replicated {
			nopts.Replicated = &replicated.Config{StreamPrefix: r.StreamPrefix, Replicas: r.StreamReplicas,
				MaxAge: r.StreamMaxAge, PinnedTTL: r.PinnedTTL, Consumer: r.ReplicatedConsumer, Name: r.EngineID}
		}
		if r.Ownership == "kv" {
			nopts.Ownership = &engine.Ownership{Bucket: r.OwnershipBucket, Replicas: r.OwnershipReplicas, EngineID: r.EngineID}
		}
	}
	return opts, nopts
}

// retention is r's retention settings.
func (r *runCmd) retention() engine.Retention {
	return engine.Retention{
		FileReservedTime: r.FileReservedTime, DeleteWhen: r.DeleteWhen, CleanInterval: r.CleanInterval,
		DiskMaxUsedRatio: r.DiskMaxUsedRatio, DiskCleanForciblyRatio: r.DiskCleanForciblyRatio,
		DiskWarningRatio: r.DiskWarningRatio, DeleteFilesPerPass: r.DeleteFilesPerPass, NoRetention: r.NoRetention,
	}
}

// topicPatterns parses --topics; the validator has reported what does not parse.
func (r *runCmd) topicPatterns() []route.TopicPattern {
	var ps []route.TopicPattern
	for _, s := range r.Topics {
		if p, err := route.ParseTopicPattern(s); err == nil {
			ps = append(ps, p)
		}
	}
	return ps
}
