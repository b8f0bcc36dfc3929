package main

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketstore/engine/engine"
	"github.com/rocketstore/engine/stages/ingress"
)

// runCmd is `engine run`: zero configuration runs an embedded nats-server on 127.0.0.1:4222
// and stores every subject under ./store.
type runCmd struct {
	Store      string   `help:"Store directory (created if missing)." default:"./store" env:"ENGINE_STORE" type:"path"`
	Listen     string   `help:"Client address of the embedded nats-server." default:"127.0.0.1:4222" env:"ENGINE_LISTEN"`
	NATS       string   `name:"nats" help:"URL of an external NATS server to use instead of the embedded one (its max_payload must be at least the body limit + 64 KiB for oversized bodies to get an error reply)." env:"NATS_URL"`
	Subjects   []string `help:"Subjects to store, comma-separated; wildcards allowed. Inboxes (_INBOX.>) and $-subjects are never stored." default:">" env:"ENGINE_SUBJECTS"`
	QueueGroup string   `help:"Queue group for the subscriptions, so that several engines share the load (order then holds per engine)." env:"ENGINE_QUEUE_GROUP"`
	Flush      string   `help:"What an ack means: sync = on disk (group commit), async = written to the page cache." enum:"sync,async" default:"sync" env:"ENGINE_FLUSH"`

	TopicTokens int      `help:"Take the first N tokens of a subject as the topic and the rest as TAGS (0: the whole subject is the topic)." default:"0"`
	Queues      int      `help:"Queues per topic." default:"4"`
	KeysHeader  string   `help:"Header whose value becomes KEYS (indexed, space-separated)." default:"Rmq-Keys"`
	TagsHeader  string   `help:"Header whose value becomes TAGS." default:"Rmq-Tags"`
	MaxBody     byteSize `help:"Largest body accepted (RocketMQ's maxMessageSize)." default:"4MiB"`

	CommitLogSize byteSize `help:"Size of each CommitLog segment." default:"1GiB"`
	CQUnits       int      `name:"cq-units" help:"ConsumeQueue units (20 bytes each) per file." default:"300000"`
	IndexSlots    int      `help:"IndexFile hash slots per file." default:"5000000"`
	IndexEntries  int      `help:"IndexFile entries per file." default:"20000000"`
	NoIndex       bool     `help:"Do not build the IndexFile (no lookup by key)."`
	NoPropCRC     bool     `name:"no-prop-crc" help:"Do not write the whole-record __CRC32# property (then only the body is checksummed)."`

	JSStream   string `name:"js-stream" help:"Pull from this existing JetStream stream instead of subscribing to --subjects: a lossless bridge (each message is acked to the stream once durable here)."`
	JSConsumer string `name:"js-consumer" help:"Durable pull consumer on --js-stream (created if missing)." default:"rocketstore"`
	JSFilter   string `name:"js-filter" help:"Filter subject for a new --js-consumer."`

	HTTP  string `name:"http" help:"Serve /metrics (Prometheus), /healthz, /readyz, /status on this address (e.g. 127.0.0.1:8222); empty: off." env:"ENGINE_HTTP"`
	Pprof bool   `help:"Also serve /debug/pprof on the --http address."`

	DedupeWindow time.Duration `help:"How long a Nats-Msg-Id is remembered to drop duplicates." default:"2m"`
	StoreHost    string        `help:"Address written into records and message ids (RocketMQ's store host)." default:"127.0.0.1:10911"`
}

func (r *runCmd) Run(log zerolog.Logger) error {
	opts, nopts, err := r.options(log)
	if err != nil {
		return err
	}
	// Signals are caught before anything starts, so that one arriving during start-up still
	// gets the graceful stop. NoSigs on the embedded server: the engine alone decides the order.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	var mon *engine.Monitor
	if r.HTTP != "" {
		// Up before the store opens, so that /readyz says "recovering" during recovery.
		if mon, err = engine.StartMonitor(nil, r.HTTP, engine.MonitorOptions{Version: version, StoreDir: opts.Dir, Pprof: r.Pprof, Logger: log}); err != nil {
			return err
		}
		defer mon.Close()
		log.Info().Str("http", mon.URL()).Msg("monitoring")
	}
	srv, err := engine.Serve(opts, nopts)
	if err != nil {
		if mon != nil {
			mon.Fail(err)
		}
		return err
	}
	if mon != nil {
		mon.Attach(srv)
	}
	select {
	case s := <-sigs:
		log.Info().Str("signal", s.String()).Msg("stopping: draining every stage (a second signal exits at once)")
		if mon != nil {
			mon.SetPhase(engine.PhaseStopping, "signal "+s.String())
		}
	case <-srv.Done():
		log.Error().Err(srv.Engine.Err()).Msg("pipeline stopped")
	}
	go func() {
		s := <-sigs
		log.Warn().Str("signal", s.String()).Msg("second signal: exiting without draining; the next start recovers")
		os.Exit(1)
	}()
	err = errors.Join(srv.Engine.Err(), srv.Shutdown())
	if err != nil {
		return err
	}
	log.Info().Msg("stopped cleanly")
	return nil
}

func (r *runCmd) options(log zerolog.Logger) (engine.Options, engine.NATSOptions, error) {
	host, err := netip.ParseAddrPort(r.StoreHost)
	if err != nil {
		return engine.Options{}, engine.NATSOptions{}, fmt.Errorf("--store-host: %w", err)
	}
	mode := engine.FlushSync
	if r.Flush == "async" {
		mode = engine.FlushAsync
	}
	opts := engine.Options{
		Dir:               r.Store,
		Logger:            log,
		FlushMode:         mode,
		CommitLogFileSize: int64(r.CommitLogSize),
		ConsumeQueueUnits: r.CQUnits,
		IndexSlots:        r.IndexSlots,
		IndexEntries:      r.IndexEntries,
		NoIndex:           r.NoIndex,
		NoPropCRC:         r.NoPropCRC,
		MaxBodySize:       int(r.MaxBody),
		StoreHost:         host,
		DedupeWindow:      r.DedupeWindow,
	}
	nopts := engine.NATSOptions{
		URL: r.NATS, Listen: r.Listen, Subjects: r.Subjects, QueueGroup: r.QueueGroup,
		TopicTokens: r.TopicTokens, QueuesPerTopic: r.Queues, KeysHeader: r.KeysHeader, TagsHeader: r.TagsHeader,
	}
	if r.JSStream != "" {
		nopts.JetStream = &ingress.JetStreamSource{Stream: r.JSStream, Consumer: r.JSConsumer, FilterSubject: r.JSFilter}
	}
	return opts, nopts, nil
}
