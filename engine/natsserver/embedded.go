// Package natsserver is the NATS side of a served engine that is not the read API: the
// embedded nats-server (start, configuration file, partition mappings, its logs through the
// engine's logger), the engine's connection (waits and retries, TLS refusal, credentials, nkey,
// user, token and TLS options, redaction), and partition ownership in a key-value bucket with
// the watcher that does this engine's part of every hand-off. It declares what it needs of the
// engine for a hand-off (Handoff).
package natsserver

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"net"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/rocketstore/engine/stages/ingress/route"
	"github.com/rs/zerolog"
)

// EmbeddedConfig configures the embedded server.
type EmbeddedConfig struct {
	// Listen is the client address (127.0.0.1:4222; port -1 picks one). With ConfigFile, an
	// empty Listen keeps the address the file sets (its host defaulting to 127.0.0.1 and its
	// port to 4222).
	Listen string
	// ConfigFile is a nats-server configuration file (server.ProcessConfigFile).
	ConfigFile string
	// MaxPayload is the least max_payload the server gets: a smaller one in the file is
	// raised, with a warning.
	MaxPayload int32
	// Level is the log level the server's debug and trace logs follow; Logger gets its lines.
	Level  zerolog.Level
	Logger zerolog.Logger
	// PartitionSources are the subjects the server partitions into the namespace of
	// partitioned ingest (Prefix, Count: route.Partitions' defaults when zero).
	PartitionSources []string
	PartitionPrefix  string
	PartitionCount   int
	// Partitioned says partitioned ingest is on: PartitionSources need it.
	Partitioned bool
}

// Embedded is a nats-server running in this process.
type Embedded struct {
	ns  *server.Server
	log natsLogger
}

// StartEmbedded runs a nats-server in this process: on Listen, configured by ConfigFile when
// given. It handles no signals (the engine's own handler decides the shutdown order) and accepts
// payloads of at least MaxPayload. It logs through Logger, with debug and trace on when Level
// asks for them. It returns once the server takes connections, with the partition mappings in
// place.
func StartEmbedded(cfg EmbeddedConfig) (*Embedded, error) {
	log := cfg.Logger
	so := &server.Options{}
	if cfg.ConfigFile != "" {
		fo, err := server.ProcessConfigFile(cfg.ConfigFile)
		if err != nil {
			return nil, fmt.Errorf("embedded nats: config file: %w", err)
		}
		so = fo
	}
	if cfg.Listen != "" || cfg.ConfigFile == "" {
		host, portText, err := net.SplitHostPort(cmp.Or(cfg.Listen, "127.0.0.1:4222"))
		if err != nil {
			return nil, fmt.Errorf("embedded nats: listen address %q: %w", cfg.Listen, err)
		}
		port, err := strconv.Atoi(portText)
		if err != nil {
			return nil, fmt.Errorf("embedded nats: port %q: %w", portText, err)
		}
		so.Host, so.Port = host, port
	} else {
		so.Host = cmp.Or(so.Host, "127.0.0.1")
		if so.Port == 0 {
			so.Port = 4222
		}
	}
	so.NoSigs = true
	need := cfg.MaxPayload
	if so.MaxPayload != 0 && so.MaxPayload < need {
		log.Warn().Str("config", cfg.ConfigFile).Int32("max_payload", so.MaxPayload).Int32("raised_to", need).
			Msg("the embedded server's config sets max_payload below the body limit + 64 KiB: raised, so that large bodies reach the engine (and get a clear error when over the limit)")
	}
	so.MaxPayload = max(so.MaxPayload, need)
	if so.ServerName == "" {
		so.ServerName = "rocketstore-embedded"
	}
	ns, err := server.NewServer(so)
	if err != nil {
		return nil, fmt.Errorf("embedded nats: %w", err)
	}
	e := &Embedded{ns: ns, log: natsLogger{log.With().Str("component", "nats-server").Logger()}}
	e.SetLogLevel(cfg.Level)
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		ns.Shutdown()
		return nil, fmt.Errorf("embedded nats: not ready on %s within 10s (is the port in use?)", net.JoinHostPort(so.Host, strconv.Itoa(so.Port)))
	}
	if err := e.addPartitionMappings(cfg); err != nil {
		e.Shutdown()
		return nil, err
	}
	return e, nil
}

// addPartitionMappings adds the mappings of PartitionSources to the server's global account
// (before any client connects: a mapping applies where a message enters NATS).
func (e *Embedded) addPartitionMappings(cfg EmbeddedConfig) error {
	if len(cfg.PartitionSources) == 0 {
		return nil
	}
	if !cfg.Partitioned {
		return errors.New("partition sources without partitioned ingest")
	}
	prefix, count := cmp.Or(cfg.PartitionPrefix, route.DefaultPartitionPrefix), cfg.PartitionCount
	if count == 0 {
		count = route.DefaultPartitionCount
	}
	for _, src := range cfg.PartitionSources {
		subject, n, err := route.SplitPartitionSource(src, count)
		if err != nil {
			return err
		}
		dest, err := route.PartitionMapping(prefix, n, subject)
		if err != nil {
			return err
		}
		if err := e.ns.GlobalAccount().AddMapping(subject, dest); err != nil {
			return fmt.Errorf("embedded nats: mapping %q -> %q: %w", src, dest, err)
		}
	}
	return nil
}

// ClientURL is the URL clients connect to.
func (e *Embedded) ClientURL() string { return e.ns.ClientURL() }

// SetLogLevel turns the server's debug and trace logs on at debug, and at trace, level. The
// trace applies to the client connections made after the change.
func (e *Embedded) SetLogLevel(level zerolog.Level) {
	e.ns.SetLoggerV2(e.log, level <= zerolog.DebugLevel, level <= zerolog.TraceLevel, false)
}

// Interest returns, for the account nc's connection belongs to, how many subscriptions would
// receive a message on a subject, nc's own included (ingress's Config.Interest, which answers a
// request nobody else receives with no-responders). It counts every subscription of the account
// on this server that matches the subject (Subsz with the subject as its test), not the
// server's cached "any interest" walk, which stops at the first full wildcard and so misses the
// subscriptions beside a '>'. While the server has routes, leaf nodes or gateways, subscribers
// on other servers are not all listed here: it then returns math.MaxInt (someone else may
// answer).
func (e *Embedded) Interest(nc *nats.Conn) (func(subject string) int, error) {
	cid, err := nc.GetClientID()
	if err != nil {
		return nil, fmt.Errorf("embedded nats: the engine's client id: %w", err)
	}
	cz, err := e.ns.Connz(&server.ConnzOptions{CID: cid})
	if err != nil {
		return nil, fmt.Errorf("embedded nats: the engine's connection: %w", err)
	}
	if len(cz.Conns) != 1 {
		return nil, fmt.Errorf("embedded nats: %d connections with the engine's client id %d", len(cz.Conns), cid)
	}
	acc := cmp.Or(cz.Conns[0].Account, server.DEFAULT_GLOBAL_ACCOUNT)
	return func(subject string) int {
		if e.ns.NumRoutes() > 0 || e.ns.NumLeafNodes() > 0 || e.ns.NumOutboundGateways() > 0 {
			return math.MaxInt
		}
		sz, err := e.ns.Subsz(&server.SubszOptions{Subscriptions: true, Account: acc, Test: subject, Limit: 1})
		if err != nil {
			return math.MaxInt // not a subject a client can publish to: leave it be
		}
		return sz.Total
	}, nil
}

// JetStreamEnabled says the server runs JetStream.
func (e *Embedded) JetStreamEnabled() bool { return e.ns.JetStreamEnabled() }

// NumClients is the number of client connections (the engine's included).
func (e *Embedded) NumClients() int { return e.ns.NumClients() }

// Shutdown stops the server and waits until it has.
func (e *Embedded) Shutdown() {
	e.ns.Shutdown()
	e.ns.WaitForShutdown()
}

// natsLogger sends the embedded nats-server's log lines through the engine's logger.
type natsLogger struct{ log zerolog.Logger }

func (l natsLogger) Noticef(format string, v ...any) { l.log.Info().Msg(fmt.Sprintf(format, v...)) }
func (l natsLogger) Warnf(format string, v ...any)   { l.log.Warn().Msg(fmt.Sprintf(format, v...)) }
func (l natsLogger) Errorf(format string, v ...any)  { l.log.Error().Msg(fmt.Sprintf(format, v...)) }
func (l natsLogger) Debugf(format string, v ...any)  { l.log.Debug().Msg(fmt.Sprintf(format, v...)) }
func (l natsLogger) Tracef(format string, v ...any)  { l.log.Trace().Msg(fmt.Sprintf(format, v...)) }

// Fatalf logs at error level only: the server's fatal path exits the process, which an embedded
// server must not do behind the engine's back.
func (l natsLogger) Fatalf(format string, v ...any) { l.log.Error().Msg(fmt.Sprintf(format, v...)) }
