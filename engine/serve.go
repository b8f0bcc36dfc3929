package engine

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/stages/ingress"
)

// NATSOptions configure the NATS side of a served engine.
type NATSOptions struct {
	// URL of an external server; empty embeds one listening on Listen.
	URL string
	// Listen is the embedded server's client address (127.0.0.1:4222; port -1 picks one).
	Listen string
	// Subjects to store (">" by default: every subject but inboxes and $-subjects).
	Subjects   []string
	QueueGroup string
	// TopicTokens > 0 takes the first tokens of a subject as the topic and the rest as TAGS.
	TopicTokens    int
	QueuesPerTopic int
	KeysHeader     string
	TagsHeader     string
	Workers        int
	// PendingMsgs and PendingBytes bound what the NATS client buffers for the subscriptions
	// (fire-and-forget publishers past them are dropped, counted and logged).
	PendingMsgs, PendingBytes int
	NoReply                   bool
	// Name is the connection name the server shows (rocketstore).
	Name string
	// JetStream, when set, pulls from an existing JetStream stream through a durable consumer
	// instead of subscribing to Subjects, and acks each message once it is durable here.
	JetStream *ingress.JetStreamSource

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

	// Batched acks (docs/BATCHED-ACKS.md; the publisher package engine/publisher): a message with
	// the Rs-Seq header gets no reply of its own; its stream gets one cumulative ack per round.
	// On by default, but not with JetStream (the header is an ordinary one there) or a
	// QueueGroup (a stream split between engines cannot be tracked: such messages are refused).
	// NoBatchedAcks turns it off (such messages are then refused, 400). MaxStreams bounds the
	// streams tracked (ingress.DefaultMaxStreams, 10,000: the least recently active is evicted
	// and told so); StreamIdle expires idle ones (ingress.DefaultStreamIdle, 2 min).
	NoBatchedAcks bool
	MaxStreams    int
	StreamIdle    time.Duration
}

// payloadHeadroom is what the embedded server accepts above the body limit, so that a body just
// over it reaches the engine and gets a clear error reply instead of a client-side refusal, and
// so that headers fit next to a body at the limit.
const payloadHeadroom = 64 << 10

// Server is an engine fed from NATS: an embedded or external server, the engine's connection
// and the ingress stage.
type Server struct {
	Engine *Engine
	nats   *server.Server // nil with an external server
	conn   *nats.Conn
	ing    *ingress.Ingress
	api    *apiService // nil with NoReadAPI
	runErr chan error
	opts   NATSOptions
	// abortIngress cancels ingress's Run: the abort (Abort).
	abortIngress context.CancelFunc
}

// Serve opens the store, connects to NATS (starting the embedded server if no URL is given) and
// starts storing what the subjects carry. It returns once the subscriptions are live.
func Serve(opts Options, nopts NATSOptions) (_ *Server, err error) {
	opts = opts.withDefaults()
	s := &Server{opts: nopts, runErr: make(chan error, 1)}
	defer func() {
		if err != nil {
			s.closeAll()
		}
	}()
	url := nopts.URL
	if url == "" {
		if s.nats, err = startEmbedded(opts, nopts.Listen); err != nil {
			return nil, err
		}
		url = s.nats.ClientURL()
	}
	if s.Engine, err = Open(opts); err != nil {
		return nil, err
	}
	log := opts.Logger
	if s.conn, err = nats.Connect(url,
		nats.Name(cmpOr(nopts.Name, "rocketstore")),
		nats.MaxReconnects(-1),
		nats.RetryOnFailedConnect(false),
		// What this connection publishes (acks, API replies, replays) never comes back to its
		// own subscriptions: a replay onto a stored subject is not stored again.
		nats.NoEcho(),
		nats.DisconnectErrHandler(func(c *nats.Conn, err error) {
			if c.IsClosed() {
				return // our own Close at shutdown, not a lost connection
			}
			log.Warn().Err(err).Msg("disconnected from nats")
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
			log.Info().Str("url", c.ConnectedUrlRedacted()).Msg("reconnected to nats")
		}),
	); err != nil {
		return nil, fmt.Errorf("connect to nats at %s: %w", url, err)
	}
	if need := int64(opts.MaxBodySize); s.conn.MaxPayload() < need {
		log.Warn().Int64("server_max_payload", s.conn.MaxPayload()).Int64("max_body", need).
			Msgf("the NATS server's max_payload is below the body limit: set max_payload to at least %d so that large bodies reach the engine (and get a clear error when over the limit)", need+payloadHeadroom)
	}
	if !nopts.NoReadAPI {
		if s.api, err = startAPI(s.Engine, s.conn, nopts, log); err != nil {
			return nil, err
		}
	}
	s.ing, err = ingress.New(ingress.Config{
		Conn: s.conn, Out: s.Engine.in, Subjects: nopts.Subjects, QueueGroup: nopts.QueueGroup,
		TopicTokens: nopts.TopicTokens, QueuesPerTopic: nopts.QueuesPerTopic,
		KeysHeader: nopts.KeysHeader, TagsHeader: nopts.TagsHeader, Workers: nopts.Workers,
		Encode:    &commitlog.EncodeOptions{PropCRC: !opts.NoPropCRC, MaxBodySize: opts.MaxBodySize},
		StoreHost: opts.StoreHost, PendingMsgs: nopts.PendingMsgs, PendingBytes: nopts.PendingBytes,
		NoReply: nopts.NoReply, Logger: log, Clock: opts.Now, // ingress adds its stage field
		JetStream: nopts.JetStream, Exclude: apiExcluded(nopts),
		Batched: s.Engine.batchedConfig(nopts),
	})
	if err != nil {
		return nil, err
	}
	ictx, cancel := context.WithCancel(context.Background())
	s.abortIngress = cancel
	go func() { s.runErr <- s.ing.Run(ictx) }()
	select {
	case <-s.ing.Ready():
	case err := <-s.runErr:
		s.runErr <- err
		return nil, fmt.Errorf("ingress: %w", err)
	case <-time.After(30 * time.Second):
		return nil, errors.New("ingress: subscriptions not confirmed by the server within 30s")
	}
	log.Info().Str("nats", url).Strs("subjects", s.subjects()).Str("store", opts.Dir).
		Str("flush", opts.FlushMode.String()).Msg("engine running")
	return s, nil
}

func (s *Server) subjects() []string {
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
	var errs []error
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
// shuts down. Tests and benchmarks use it to kill an engine in the middle of a stream. Call
// Shutdown or Abort, once.
func (s *Server) Abort() error {
	if s.conn != nil {
		s.conn.Close()
	}
	if s.ing != nil {
		s.abortIngress()
		<-s.runErr // the abort's own error (context canceled): expected
	}
	if s.api != nil {
		s.api.stop()
	}
	err := s.Engine.Abort()
	if s.ing != nil {
		s.ing.CloseAcks()
	}
	if s.nats != nil {
		s.nats.Shutdown()
		s.nats.WaitForShutdown()
	}
	return err
}

// closeAll stops the read API (waiting for the requests under way, so that none reads a closed
// store), closes the engine (its acks go out on the connection), then the connection, then the
// embedded server.
func (s *Server) closeAll() error {
	var errs []error
	if s.api != nil {
		s.api.stop()
	}
	if s.Engine != nil {
		errs = append(errs, s.Engine.Close())
	}
	if s.ing != nil {
		s.ing.CloseAcks() // the last batched acks, once the ack stage has handed everything over
	}
	if s.conn != nil {
		if err := s.conn.Flush(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
			errs = append(errs, err)
		}
		s.conn.Close()
	}
	if s.nats != nil {
		s.nats.Shutdown()
		s.nats.WaitForShutdown()
	}
	return errors.Join(errs...)
}

// startEmbedded runs a nats-server in this process on listen. It handles no signals (the
// engine's own handler decides the shutdown order) and accepts payloads a little above the
// body limit.
func startEmbedded(opts Options, listen string) (*server.Server, error) {
	host, portText, err := net.SplitHostPort(cmpOr(listen, "127.0.0.1:4222"))
	if err != nil {
		return nil, fmt.Errorf("embedded nats: listen address %q: %w", listen, err)
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		return nil, fmt.Errorf("embedded nats: port %q: %w", portText, err)
	}
	ns, err := server.NewServer(&server.Options{
		Host:       host,
		Port:       port,
		NoSigs:     true,
		MaxPayload: int32(opts.MaxBodySize + payloadHeadroom),
		ServerName: "rocketstore-embedded",
	})
	if err != nil {
		return nil, fmt.Errorf("embedded nats: %w", err)
	}
	ns.SetLoggerV2(natsLogger{opts.Logger.With().Str("component", "nats-server").Logger()}, false, false, false)
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		ns.Shutdown()
		return nil, fmt.Errorf("embedded nats: not ready on %s within 10s (is the port in use?)", listen)
	}
	return ns, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
