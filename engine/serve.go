package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	neturl "net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/rocketstore/engine/engine/readapi"
	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/stages/ingress"
)

// payloadHeadroom is what the embedded server accepts above the body limit, so that a body just
// over it reaches the engine and gets a clear error reply instead of a client-side refusal, and
// so that headers fit next to a body at the limit.
const payloadHeadroom = 64 << 10

// Server is an engine fed from NATS: an embedded or external server, the engine's connection
// and the ingress stage.
type Server struct {
	Engine  *Engine
	nats    *server.Server // nil with an external server
	natsLog natsLogger
	conn    *nats.Conn
	// connClosed is closed when conn closes (ClosedHandler).
	connClosed chan struct{}
	ing        *ingress.Ingress
	api        *readapi.Service // nil with NoReadAPI
	runErr     chan error
	opts       NATSOptions
	// stopOnce makes Shutdown and Abort safe to call more than once (and both): the first call
	// stops the server, later ones return its error.
	stopOnce sync.Once
	stopErr  error
	// stopOwnership ends the ownership watcher (ownership.go); ownershipDone is closed when it
	// has returned.
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
	s := &Server{opts: nopts, runErr: make(chan error, 1), connClosed: make(chan struct{})}
	defer func() {
		if err != nil {
			s.closeAll()
		}
	}()
	if err := checkConnFiles(nopts); err != nil {
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
	if err := s.connect(ctx, url, log); err != nil {
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
	parts, ownKV, err := s.claimOwnership(ctx, nopts)
	if err != nil {
		return nil, err
	}
	s.ing, err = ingress.New(ingress.Config{
		Conn: s.conn, Out: s.Engine.in, Subjects: nopts.Subjects, QueueGroup: nopts.QueueGroup,
		TopicTokens: nopts.TopicTokens, QueuesPerTopic: nopts.QueuesPerTopic,
		KeysHeader: nopts.KeysHeader, TagsHeader: nopts.TagsHeader, QueueKeyHeader: nopts.QueueKeyHeader,
		Workers: nopts.Workers, WorkerQueue: nopts.WorkerQueue, MaxBatch: nopts.MaxBatch, DrainTimeout: nopts.DrainTimeout,
		Encode:    &commitlog.EncodeOptions{PropCRC: !opts.NoPropCRC, MaxBodySize: opts.MaxBodySize},
		StoreHost: opts.StoreHost, PendingMsgs: nopts.PendingMsgs, PendingBytes: nopts.PendingBytes,
		NoReply: nopts.NoReply, Logger: log, Clock: opts.Now, // ingress adds its stage field
		JetStream: nopts.JetStream, Exclude: apiExcluded(nopts),
		Batched: s.Engine.batchedConfig(nopts), Restarted: s.Engine.restartDedupe(), Partitions: parts,
		Replicated: s.Engine.replicatedSource(nopts),
	})
	if err != nil {
		return nil, err
	}
	if !nopts.NoReadAPI {
		// After ingress: under partitioned ingest the API serves the partitions ingress owns,
		// which move (ingress.Partitions).
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
	if ownKV != nil {
		octx, stop := context.WithCancel(context.Background())
		s.stopOwnership, s.ownershipDone = stop, make(chan struct{})
		go func() {
			defer close(s.ownershipDone)
			s.watchOwnership(octx, ownKV, nopts.Ownership.EngineID)
		}()
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
	}
	if parts := s.ing.Partitions(); parts != nil {
		cfg.PartitionCount, cfg.Owned = parts.Count, parts.OwnedNow
	}
	s.api, err = readapi.Start(s.Engine, s.conn, cfg)
	return err
}

// apiExcluded is ingress's Exclude for the read API's subjects (nil without the API).
func apiExcluded(nopts NATSOptions) func(string) bool {
	if nopts.NoReadAPI {
		return nil
	}
	return readapi.Excluded(nopts.APIPrefix)
}

// checkConnFiles checks that the files the connection options name can be read, so that a
// typo fails the start at once instead of every connection attempt, forever.
func checkConnFiles(nopts NATSOptions) error {
	for _, f := range []struct{ what, path string }{
		{"credentials file", nopts.Creds}, {"nkey seed file", nopts.Nkey},
		{"TLS certificate", nopts.TLSCert}, {"TLS key", nopts.TLSKey}, {"TLS CA file", nopts.TLSCA},
	} {
		if f.path == "" {
			continue
		}
		fh, err := os.Open(f.path)
		if err != nil {
			return fmt.Errorf("nats %s: %w", f.what, err)
		}
		fh.Close()
	}
	if (nopts.TLSCert == "") != (nopts.TLSKey == "") {
		return errors.New("nats TLS: a client certificate needs both the certificate and its key")
	}
	return nil
}

// connOptions are the nats.go options of the engine's connection, without its handlers.
func connOptions(nopts NATSOptions) ([]nats.Option, error) {
	var o []nats.Option
	if nopts.Creds != "" {
		o = append(o, nats.UserCredentials(nopts.Creds))
	}
	if nopts.Nkey != "" {
		opt, err := nats.NkeyOptionFromSeed(nopts.Nkey)
		if err != nil {
			return nil, fmt.Errorf("nats nkey seed file %s: %w", nopts.Nkey, err)
		}
		o = append(o, opt)
	}
	if nopts.User != "" || nopts.Password != "" {
		o = append(o, nats.UserInfo(nopts.User, nopts.Password))
	}
	if nopts.Token != "" {
		o = append(o, nats.Token(nopts.Token))
	}
	if nopts.TLSCert != "" {
		o = append(o, nats.ClientCert(nopts.TLSCert, nopts.TLSKey))
	}
	if nopts.TLSCA != "" {
		o = append(o, nats.RootCAs(nopts.TLSCA))
	}
	if nopts.TLSFirst {
		o = append(o, nats.TLSHandshakeFirst())
	}
	return o, nil
}

// reconnectLogEvery rate-limits the lines about failed connection attempts.
const reconnectLogEvery = 30 * time.Second

// connect makes the engine's connection: it reconnects forever (nats.go gives up only on the
// same authorization error twice in a row), and a server that is not up yet is waited for,
// logged, until it is, the connection closes for good (wrong credentials) or ctx is done.
func (s *Server) connect(ctx context.Context, url string, log zerolog.Logger) error {
	nopts := s.opts
	wait := cmp.Or(nopts.ReconnectWait, nats.DefaultReconnectWait)
	auth, err := connOptions(nopts)
	if err != nil {
		return err
	}
	connected := make(chan struct{})
	var connectedOnce, closedOnce sync.Once
	var failures atomic.Int64
	var lastLogged atomic.Int64 // unix ns
	// refused carries a TLS failure before the first connection: a configuration error that
	// retrying cannot fix (isTLSRefusal).
	refused := make(chan error, 1)
	o := []nats.Option{
		nats.Name(cmpOr(nopts.Name, "rocketstore")),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(wait),
		nats.RetryOnFailedConnect(true),
		nats.DrainTimeout(cmp.Or(nopts.DrainTimeout, ingress.DefaultDrainTimeout)),
		// What this connection publishes (acks, API replies, replays) never comes back to its
		// own subscriptions: a replay onto a stored subject is not stored again.
		nats.NoEcho(),
		nats.ConnectHandler(func(*nats.Conn) { connectedOnce.Do(func() { close(connected) }) }),
		nats.ClosedHandler(func(*nats.Conn) { closedOnce.Do(func() { close(s.connClosed) }) }),
		nats.DisconnectErrHandler(func(c *nats.Conn, err error) {
			if c.IsClosed() || c.IsDraining() {
				return // our own Close at shutdown, not a lost connection
			}
			log.Warn().Err(err).Msg("disconnected from nats: reconnecting")
		}),
		nats.ReconnectErrHandler(func(_ *nats.Conn, err error) {
			select {
			case <-connected:
			default:
				if isTLSRefusal(err) {
					select {
					case refused <- err:
					default:
					}
					return
				}
			}
			n := failures.Add(1)
			now := time.Now().UnixNano()
			if last := lastLogged.Load(); n > 1 && now-last < int64(reconnectLogEvery) || !lastLogged.CompareAndSwap(last, now) {
				return
			}
			log.Warn().Err(err).Int64("failed_attempts", n).Dur("retry_every", wait).
				Msg("cannot reach nats: retrying (logged at most every 30s)")
		}),
		// Without a handler nats.go writes async errors as raw lines to stderr. Slow-consumer
		// drops are counted and logged, rate-limited, by ingress; log the rest here.
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			if errors.Is(err, nats.ErrSlowConsumer) {
				return
			}
			ev := log.Warn().Err(err)
			if sub != nil {
				ev = ev.Str("subject", sub.Subject)
			}
			ev.Msg("nats error")
		}),
		nats.ReconnectHandler(func(c *nats.Conn) {
			failures.Store(0)
			log.Info().Str("url", c.ConnectedUrlRedacted()).Msg("reconnected to nats")
		}),
		nats.LameDuckModeHandler(func(c *nats.Conn) {
			log.Warn().Str("url", c.ConnectedUrlRedacted()).
				Msg("the nats server entered lame duck mode: it will close its connections soon; the engine keeps running, " +
					"and reconnects to another server of the cluster (those given, and those the cluster announced)")
		}),
	}
	o = append(append(o, auth...), nopts.ConnOptions...)
	if s.conn, err = nats.Connect(url, o...); err != nil {
		return fmt.Errorf("connect to nats at %s: %w", redactURLs(url), err)
	}
	if s.conn.IsConnected() {
		return nil
	}
	log.Warn().Str("nats", redactURLs(url)).Dur("retry_every", wait).
		Msg("waiting for the nats server: it cannot be reached yet")
	select {
	case <-connected:
		log.Info().Str("url", s.conn.ConnectedUrlRedacted()).Msg("connected to nats")
		return nil
	case <-s.connClosed:
		err := s.conn.LastError()
		if err == nil {
			err = nats.ErrConnectionClosed
		}
		return fmt.Errorf("connect to nats at %s: %w", redactURLs(url), err)
	case err := <-refused:
		return fmt.Errorf("connect to nats at %s: TLS: %w (check --tlsca, --tlscert and --tlskey)", redactURLs(url), err)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// redactURLs hides the passwords of a comma-separated URL list.
func redactURLs(list string) string {
	parts := strings.Split(list, ",")
	for i, p := range parts {
		if u, err := neturl.Parse(strings.TrimSpace(p)); err == nil && u.User != nil {
			parts[i] = u.Redacted()
		}
	}
	return strings.Join(parts, ",")
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
		s.nats.SetLoggerV2(s.natsLog, level <= zerolog.DebugLevel, level <= zerolog.TraceLevel, false)
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

// endOwnership stops the ownership watcher and waits for it (a step under way finishes).
func (s *Server) endOwnership() {
	if s.stopOwnership != nil {
		s.stopOwnership()
		<-s.ownershipDone
	}
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
		s.nats.WaitForShutdown()
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
		s.nats.WaitForShutdown()
	}
	return errors.Join(errs...)
}

// startEmbedded runs a nats-server in this process: on Listen, configured by ServerConfig when
// given. It handles no signals (the engine's own handler decides the shutdown order) and accepts
// payloads a little above the body limit. It logs through the engine's logger, with debug and
// trace on when the level asks for them.
func (s *Server) startEmbedded(opts Options) error {
	nopts, log := s.opts, opts.Logger
	so := &server.Options{}
	if nopts.ServerConfig != "" {
		fo, err := server.ProcessConfigFile(nopts.ServerConfig)
		if err != nil {
			return fmt.Errorf("embedded nats: config file: %w", err)
		}
		so = fo
	}
	if nopts.Listen != "" || nopts.ServerConfig == "" {
		host, portText, err := net.SplitHostPort(cmpOr(nopts.Listen, "127.0.0.1:4222"))
		if err != nil {
			return fmt.Errorf("embedded nats: listen address %q: %w", nopts.Listen, err)
		}
		port, err := strconv.Atoi(portText)
		if err != nil {
			return fmt.Errorf("embedded nats: port %q: %w", portText, err)
		}
		so.Host, so.Port = host, port
	} else {
		so.Host = cmpOr(so.Host, "127.0.0.1")
		if so.Port == 0 {
			so.Port = 4222
		}
	}
	so.NoSigs = true
	need := int32(opts.MaxBodySize + payloadHeadroom)
	if so.MaxPayload != 0 && so.MaxPayload < need {
		log.Warn().Str("config", nopts.ServerConfig).Int32("max_payload", so.MaxPayload).Int32("raised_to", need).
			Msg("the embedded server's config sets max_payload below the body limit + 64 KiB: raised, so that large bodies reach the engine (and get a clear error when over the limit)")
	}
	so.MaxPayload = max(so.MaxPayload, need)
	if so.ServerName == "" {
		so.ServerName = "rocketstore-embedded"
	}
	ns, err := server.NewServer(so)
	if err != nil {
		return fmt.Errorf("embedded nats: %w", err)
	}
	level := log.GetLevel()
	if nopts.LogLevels != nil {
		level = nopts.LogLevels.Level()
	}
	s.natsLog = natsLogger{log.With().Str("component", "nats-server").Logger()}
	ns.SetLoggerV2(s.natsLog, level <= zerolog.DebugLevel, level <= zerolog.TraceLevel, false)
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		ns.Shutdown()
		return fmt.Errorf("embedded nats: not ready on %s within 10s (is the port in use?)", net.JoinHostPort(so.Host, strconv.Itoa(so.Port)))
	}
	s.nats = ns
	return s.addPartitionMappings(ns)
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
