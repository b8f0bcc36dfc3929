package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/rocketstore/engine/engine/natsserver"
	"github.com/rocketstore/engine/engine/readapi"
	"github.com/rocketstore/engine/stages/ingress"
)

// payloadHeadroom is what the embedded server accepts above the body limit, so that a body just
// over it reaches the engine and gets a clear error reply instead of a client-side refusal, and
// so that headers fit next to a body at the limit.
const payloadHeadroom = 64 << 10

// Server is an engine fed from NATS: an embedded or external server, the engine's connection
// and the ingress stage.
type Server struct {
	Engine *Engine
	nats   *natsserver.Embedded // nil with an external server
	conn   *nats.Conn
	// connClosed is closed when conn closes for good.
	connClosed <-chan struct{}
	ing        *ingress.Ingress
	api        *readapi.Service // nil with NoReadAPI
	groupStore groupStore       // what consumer groups read of the store (startReadAPI)
	runErr     chan error
	opts       NATSOptions
	// stopOnce makes Shutdown and Abort safe to call more than once (and both): the first call
	// stops the server, later ones return its error.
	stopOnce sync.Once
	stopErr  error
	// stopOwnership ends the ownership watcher (partitions.go), a stage of the engine's group;
	// ownershipDone is closed when it has returned.
	stopOwnership context.CancelFunc
	ownershipDone chan struct{}
}

// Serve opens the store, connects to NATS (starting the embedded server if no URL is given) and
// starts storing what the subjects carry. It returns once the subscriptions are live. It is
// ServeContext without a way to give up: it waits for an external server as long as it takes.
func Serve(opts Options, nopts NATSOptions) (*Server, error) {
	return ServeContext(context.Background(), opts, nopts)
}

// ServeContext is Serve, given up (with ctx's error, everything started closed again) when ctx
// is done while it waits for the NATS server or for the subscriptions.
func ServeContext(ctx context.Context, opts Options, nopts NATSOptions) (_ *Server, err error) {
	opts = opts.withDefaults()
	s := &Server{opts: nopts, runErr: make(chan error, 1)}
	defer func() {
		if err != nil {
			s.closeAll()
		}
	}()
	if err := connConfig(nopts).CheckFiles(); err != nil {
		return nil, err
	}
	url := nopts.URL
	if url == "" {
		if err = s.startEmbedded(opts); err != nil {
			return nil, err
		}
		url = s.nats.ClientURL()
	} else if len(nopts.PartitionSources) > 0 {
		return nil, errors.New("partition sources are mappings of the embedded server: with an external server, configure them on every server (engine partition-map prints them)")
	}
	if s.Engine, err = Open(opts); err != nil {
		return nil, err
	}
	log := opts.Logger
	if s.conn, s.connClosed, err = natsserver.Connect(ctx, url, connConfig(nopts), log); err != nil {
		return nil, err
	}
	if need := int64(opts.MaxBodySize); s.conn.MaxPayload() < need {
		log.Warn().Int64("server_max_payload", s.conn.MaxPayload()).Int64("max_body", need).
			Msgf("the NATS server's max_payload is below the body limit: set max_payload to at least %d so that large bodies reach the engine (and get a clear error when over the limit)", need+payloadHeadroom)
	}
	if nopts.Partitions != nil && opts.StoreHost == defaultStoreHost {
		log.Warn().Str("store_host", opts.StoreHost.String()).
			Msg("partitioned ingest with the default store host: every engine needs a store host of its own (--store-host), or their offset message ids (store host + CommitLog offset) collide")
	}
	if err := s.checkReplicated(nopts); err != nil {
		return nil, err
	}
	parts, bucket, err := s.claimOwnership(ctx, nopts)
	if err != nil {
		return nil, err
	}
	var interest func(string) int
	if s.nats != nil {
		// The embedded server tells who else receives a subject: a request nobody else receives,
		// on a subject ingress never stores, is answered with no-responders (stages/ingress).
		if interest, err = s.nats.Interest(s.conn); err != nil {
			log.Warn().Err(err).Msg("requests on $- and _INBOX subjects that nobody serves will time out instead of getting no-responders")
		}
	}
	s.ing, err = s.Engine.newIngress(s.conn, nopts, parts, interest)
	if err != nil {
		return nil, err
	}
	if !nopts.NoReadAPI {
		// After ingress: under partitioned ingest the API serves the partitions ingress owns,
		// which move (route.Partitions).
		if err := s.startReadAPI(nopts, log); err != nil {
			return nil, err
		}
	}
	ing := s.ing
	// The batched-ack tracker answers what the ack stage and the reaper hand over, until the
	// pipeline is drained; ingress sends into the pipeline. Both run in the engine's group.
	if err := s.Engine.RunStage("batched-acks", func(context.Context) error {
		return ing.RunAcks(s.Engine.Drained())
	}); err != nil {
		return nil, err
	}
	if err := s.Engine.RunProducer("ingress", func(ctx context.Context) error {
		err := ing.Run(ctx)
		s.runErr <- err
		return err
	}, ing.Stop); err != nil {
		return nil, err
	}
	select {
	case <-s.ing.Ready():
	case err := <-s.runErr:
		s.runErr <- err
		return nil, fmt.Errorf("ingress: %w", err)
	case <-time.After(30 * time.Second):
		return nil, errors.New("ingress: subscriptions not confirmed by the server within 30s")
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if bucket != nil {
		if err := s.watchOwnership(bucket); err != nil {
			return nil, err
		}
	}
	if nopts.OnRunning != nil {
		nopts.OnRunning(s)
	}
	log.Info().Str("nats", s.conn.ConnectedUrlRedacted()).Strs("subjects", s.subjects()).Str("store", opts.Dir).
		Str("flush", opts.FlushMode.String()).Msg("engine running")
	return s, nil
}

// startReadAPI starts the read API (engine/readapi) on the engine's connection.
func (s *Server) startReadAPI(nopts NATSOptions, log zerolog.Logger) (err error) {
	o := s.Engine.opts
	cfg := readapi.Config{
		Prefix: nopts.APIPrefix, KeysHeader: nopts.KeysHeader, TagsHeader: nopts.TagsHeader,
		MaxLongPolls: nopts.MaxLongPolls, MaxReplays: nopts.MaxReplays, Version: nopts.Version,
		Metadata: map[string]string{"store_dir": o.Dir, "flush_mode": o.FlushMode.String(),
			"store_host": o.StoreHost.String(), "index": strconv.FormatBool(!o.NoIndex)},
		Unavailable: []error{ErrClosed}, Logger: log,
		Groups: nopts.Groups,
	}
	s.groupStore = groupStore{e: s.Engine, queues: cmp.Or(nopts.QueuesPerTopic, ingress.DefaultQueuesPerTopic)}
	if parts := s.ing.Partitions(); parts != nil {
		cfg.PartitionCount, cfg.Owned = parts.Count, parts.OwnedNow
		s.groupStore = groupStore{e: s.Engine, owned: parts.OwnedNow}
	}
	cfg.GroupStore = s.groupStore
	cfg.Groups.Logger = log
	s.api, err = readapi.Start(s.Engine, s.conn, cfg)
	return err
}

// NATSClosed is closed once the engine's NATS connection is closed for good: at shutdown, or
// when nats.go gives up reconnecting (the same authorization error twice in a row). The
// engine then receives nothing more: a service should stop (NATSError says why).
func (s *Server) NATSClosed() <-chan struct{} { return s.connClosed }

// NATSError is the connection's last error (nil if none).
func (s *Server) NATSError() error { return s.conn.LastError() }

// SetLogLevel changes the log level while the engine runs: NATSOptions.LogLevels' level, and
// the embedded nats-server's debug and trace logs (on at debug, and at trace, level). The
// server's trace applies to the client connections made after the change.
func (s *Server) SetLogLevel(level zerolog.Level) {
	if s.opts.LogLevels != nil {
		s.opts.LogLevels.SetLevel(level)
	}
	if s.nats != nil {
		s.nats.SetLogLevel(level)
	}
}

func (s *Server) subjects() []string {
	if s.ing != nil {
		return s.ing.Subjects()
	}
	if len(s.opts.Subjects) == 0 {
		return []string{">"}
	}
	return s.opts.Subjects
}

// ClientURL is the NATS URL publishers use (the embedded server's, or the external one).
func (s *Server) ClientURL() string { return s.conn.ConnectedUrl() }

// Ingress is the ingress stage, for its Stats.
func (s *Server) Ingress() *ingress.Ingress { return s.ing }

// Done is closed when the engine's pipeline stops (after Shutdown, or on a fatal error such as
// a failed sync).
func (s *Server) Done() <-chan struct{} { return s.Engine.Done() }

// Shutdown stops taking messages (the subscriptions drain: what was received is stored and
// acked), stops the read API (long polls are answered 503, replays end, and every request under
// way finishes before the engine closes), drains every stage in order, writes the last
// checkpoint, removes the abort file, and closes the connection and the embedded server.
func (s *Server) Shutdown() error {
	s.stopOnce.Do(func() { s.stopErr = s.shutdown() })
	return s.stopErr
}

func (s *Server) shutdown() error {
	var errs []error
	s.endOwnership()
	if s.ing != nil {
		s.ing.Stop()
		if err := <-s.runErr; err != nil {
			errs = append(errs, fmt.Errorf("ingress: %w", err))
		}
	}
	errs = append(errs, s.closeAll())
	return errors.Join(errs...)
}

// Abort stops the served engine as a crash of its process would, short of losing the page cache:
// the connection closes first, so that nothing (no ack, no reply) goes out after that moment;
// ingress aborts and drops what it holds; the pipeline stops without draining or syncing
// (Engine.Abort), leaving the abort file, so that the next Open recovers; the embedded server
// shuts down. Tests and benchmarks use it to kill an engine in the middle of a stream. After
// Shutdown, Abort does nothing (and the other way round).
func (s *Server) Abort() error {
	s.stopOnce.Do(func() { s.stopErr = s.abort() })
	return s.stopErr
}

func (s *Server) abort() error {
	if s.conn != nil {
		s.conn.Close()
	}
	s.endOwnership()
	if s.api != nil {
		s.api.Stop()
	}
	// Ingress runs in the engine's group: the abort cancels it, and Abort waits for it.
	err := s.Engine.Abort()
	if s.nats != nil {
		s.nats.Shutdown()
	}
	return err
}

// closeAll stops the read API (waiting for the requests under way, so that none reads a closed
// store), closes the engine (its acks go out on the connection), then drains the connection
// (bounded by DrainTimeout), then stops the embedded server.
func (s *Server) closeAll() error {
	var errs []error
	if s.api != nil {
		s.api.Stop()
	}
	if s.Engine != nil {
		// Its group ends with the batched-ack tracker's last acks, once everything is drained.
		errs = append(errs, s.Engine.Close())
	}
	if s.conn != nil {
		if s.conn.IsConnected() {
			if err := s.conn.Flush(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
				errs = append(errs, err)
			}
		}
		// Drain, not Close: whatever subscription is left (the ingress ones are drained
		// already) is drained, and what the connection still buffers is flushed.
		if s.conn.Drain() == nil {
			timeout := time.NewTimer(cmp.Or(s.opts.DrainTimeout, ingress.DefaultDrainTimeout))
			select {
			case <-s.connClosed:
			case <-timeout.C:
				errs = append(errs, errors.New("nats: the connection's drain did not finish in time; closed"))
			}
			timeout.Stop()
		}
		s.conn.Close()
	}
	if s.nats != nil {
		s.nats.Shutdown()
	}
	return errors.Join(errs...)
}

// startEmbedded runs a nats-server in this process (engine/natsserver): on Listen, configured
// by ServerConfig, accepting payloads a little above the body limit, logging through the
// engine's logger at the level of LogLevels, with the partition mappings of PartitionSources.
func (s *Server) startEmbedded(opts Options) (err error) {
	nopts, log := s.opts, opts.Logger
	level := log.GetLevel()
	if nopts.LogLevels != nil {
		level = nopts.LogLevels.Level()
	}
	cfg := natsserver.EmbeddedConfig{
		Listen: nopts.Listen, ConfigFile: nopts.ServerConfig, MaxPayload: int32(opts.MaxBodySize + payloadHeadroom),
		Level: level, Logger: log, PartitionSources: nopts.PartitionSources, Partitioned: nopts.Partitions != nil,
	}
	if p := nopts.Partitions; p != nil {
		cfg.PartitionPrefix, cfg.PartitionCount = p.Prefix, p.Count
	}
	s.nats, err = natsserver.StartEmbedded(cfg)
	return err
}

// connConfig is the engine's connection of nopts (engine/natsserver).
func connConfig(nopts NATSOptions) natsserver.ConnConfig {
	return natsserver.ConnConfig{
		Name: nopts.Name, Creds: nopts.Creds, Nkey: nopts.Nkey, User: nopts.User, Password: nopts.Password, Token: nopts.Token,
		TLSCert: nopts.TLSCert, TLSKey: nopts.TLSKey, TLSCA: nopts.TLSCA, TLSFirst: nopts.TLSFirst, Options: nopts.ConnOptions,
		ReconnectWait: nopts.ReconnectWait, DrainTimeout: cmp.Or(nopts.DrainTimeout, ingress.DefaultDrainTimeout),
	}
}
