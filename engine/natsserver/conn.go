package natsserver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	neturl "net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
)

// ConnConfig configures the engine's connection, to an external server or to the embedded one,
// with natscli's meanings: Creds is a user credentials file (JWT and nkey seed), Nkey an nkey
// seed file, User and Password a user, Token a token; TLSCert and TLSKey a client certificate,
// TLSCA the CAs that verify the server; TLSFirst does the TLS handshake before the server's
// greeting. Options are appended to the connection's own nats.go options (a later one wins).
type ConnConfig struct {
	// Name is the connection name the server shows (rocketstore).
	Name                               string
	Creds, Nkey, User, Password, Token string
	TLSCert, TLSKey, TLSCA             string
	TLSFirst                           bool
	Options                            []nats.Option
	// ReconnectWait is the pause between reconnection rounds (nats.go's 2 s); DrainTimeout
	// bounds a drain of the connection (nats.go's option; the engine's shutdown bounds its own).
	ReconnectWait, DrainTimeout time.Duration
}

// CheckFiles checks that the files the options name can be read, so that a typo fails the
// start at once instead of every connection attempt, forever.
func (c ConnConfig) CheckFiles() error {
	for _, f := range []struct{ what, path string }{
		{"credentials file", c.Creds}, {"nkey seed file", c.Nkey},
		{"TLS certificate", c.TLSCert}, {"TLS key", c.TLSKey}, {"TLS CA file", c.TLSCA},
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
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return errors.New("nats TLS: a client certificate needs both the certificate and its key")
	}
	return nil
}

// authOptions are the nats.go options of the connection's authentication and TLS.
func (c ConnConfig) authOptions() ([]nats.Option, error) {
	var o []nats.Option
	if c.Creds != "" {
		o = append(o, nats.UserCredentials(c.Creds))
	}
	if c.Nkey != "" {
		opt, err := nats.NkeyOptionFromSeed(c.Nkey)
		if err != nil {
			return nil, fmt.Errorf("nats nkey seed file %s: %w", c.Nkey, err)
		}
		o = append(o, opt)
	}
	if c.User != "" || c.Password != "" {
		o = append(o, nats.UserInfo(c.User, c.Password))
	}
	if c.Token != "" {
		o = append(o, nats.Token(c.Token))
	}
	if c.TLSCert != "" {
		o = append(o, nats.ClientCert(c.TLSCert, c.TLSKey))
	}
	if c.TLSCA != "" {
		o = append(o, nats.RootCAs(c.TLSCA))
	}
	if c.TLSFirst {
		o = append(o, nats.TLSHandshakeFirst())
	}
	return o, nil
}

// reconnectLogEvery rate-limits the lines about failed connection attempts.
const reconnectLogEvery = 30 * time.Second

// Connect makes the engine's connection to url (a comma-separated list): it reconnects forever
// (nats.go gives up only on the same authorization error twice in a row), and a server that is
// not up yet is waited for, logged, until it is, the connection closes for good (wrong
// credentials), a TLS failure shows that retrying cannot help, or ctx is done; on those it
// returns the error, the connection closed. What the connection publishes never comes back to
// its own subscriptions (NoEcho). closed is closed once the connection is closed for good.
func Connect(ctx context.Context, url string, c ConnConfig, log zerolog.Logger) (nc *nats.Conn, closed <-chan struct{}, err error) {
	wait := cmp.Or(c.ReconnectWait, nats.DefaultReconnectWait)
	auth, err := c.authOptions()
	if err != nil {
		return nil, nil, err
	}
	connected, connClosed := make(chan struct{}), make(chan struct{})
	var connectedOnce, closedOnce sync.Once
	var failures atomic.Int64
	var lastLogged atomic.Int64 // unix ns
	// refused carries a TLS failure before the first connection: a configuration error that
	// retrying cannot fix (isTLSRefusal).
	refused := make(chan error, 1)
	o := []nats.Option{
		nats.Name(cmp.Or(c.Name, "rocketstore")),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(wait),
		nats.RetryOnFailedConnect(true),
		nats.DrainTimeout(c.DrainTimeout),
		// What this connection publishes (acks, API replies, replays) never comes back to its
		// own subscriptions: a replay onto a stored subject is not stored again.
		nats.NoEcho(),
		nats.ConnectHandler(func(*nats.Conn) { connectedOnce.Do(func() { close(connected) }) }),
		nats.ClosedHandler(func(*nats.Conn) { closedOnce.Do(func() { close(connClosed) }) }),
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
	o = append(append(o, auth...), c.Options...)
	if nc, err = nats.Connect(url, o...); err != nil {
		return nil, nil, fmt.Errorf("connect to nats at %s: %w", redactURLs(url), err)
	}
	if nc.IsConnected() {
		return nc, connClosed, nil
	}
	log.Warn().Str("nats", redactURLs(url)).Dur("retry_every", wait).
		Msg("waiting for the nats server: it cannot be reached yet")
	select {
	case <-connected:
		log.Info().Str("url", nc.ConnectedUrlRedacted()).Msg("connected to nats")
		return nc, connClosed, nil
	case <-connClosed:
		err = nc.LastError()
		if err == nil {
			err = nats.ErrConnectionClosed
		}
		err = fmt.Errorf("connect to nats at %s: %w", redactURLs(url), err)
	case err = <-refused:
		err = fmt.Errorf("connect to nats at %s: TLS: %w (check --tlsca, --tlscert and --tlskey)", redactURLs(url), err)
	case <-ctx.Done():
		err = ctx.Err()
	}
	nc.Close()
	return nil, nil, err
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
