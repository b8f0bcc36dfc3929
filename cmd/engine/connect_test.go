package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	natsserver "github.com/nats-io/nats-server/v2/server"
	natstest "github.com/nats-io/nats-server/v2/test"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
	"github.com/rs/zerolog"

	"github.com/rocketstore/engine/engine"
	"github.com/rocketstore/engine/internal/wire"
)

// The engine's NATS connection, configured from the command line and run in this process:
// authentication against servers that require it, waiting for a server not up yet, lame duck
// mode, the embedded server's --nats-config. Servers listen on loopback, on random ports.

// logSink collects JSON log lines and lets a test wait for one.
type logSink struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	notify chan struct{}
}

func newLogSink() *logSink { return &logSink{notify: make(chan struct{}, 1)} }

func (l *logSink) Write(p []byte) (int, error) {
	l.mu.Lock()
	l.buf.Write(p)
	l.mu.Unlock()
	select {
	case l.notify <- struct{}{}:
	default:
	}
	return len(p), nil
}

func (l *logSink) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// waitFor waits until the log holds s.
func (l *logSink) waitFor(t *testing.T, s string) {
	t.Helper()
	deadline := time.NewTimer(waitTimeout)
	defer deadline.Stop()
	for !strings.Contains(l.String(), s) {
		select {
		case <-l.notify:
		case <-deadline.C:
			t.Fatalf("the log has no %q within %v:\n%s", s, waitTimeout, l.String())
		}
	}
}

// smallStore are the flags of a small store in dir.
func smallStore(dir string) []string {
	return []string{"run", "--store", dir, "--commit-log-size", fmt.Sprint(commitLogSize), "--cq-units", fmt.Sprint(cqUnits),
		"--index-slots", "1024", "--index-entries", "8192", "--reconnect-wait", "20ms", "--drain-timeout", "10s"}
}

// serveArgs parses a command line and serves the engine it configures, logging into the sink.
func serveArgs(t *testing.T, ctx context.Context, args ...string) (*engine.Server, *logSink, error) {
	t.Helper()
	r := mustParse(t, args...)
	if err := r.validate(); err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	sink := newLogSink()
	opts, nopts := r.options(zerolog.New(sink).Level(zerolog.InfoLevel))
	srv, err := engine.ServeContext(ctx, opts, nopts)
	if err == nil {
		t.Cleanup(func() { _ = srv.Shutdown() })
	}
	return srv, sink, err
}

// storeOne publishes a request on nc and checks its ack.
func storeOne(t *testing.T, nc *nats.Conn, body []byte) wire.Ack {
	t.Helper()
	reply, err := nc.Request("orders.eu", body, waitTimeout)
	if err != nil {
		t.Fatal(err)
	}
	a, err := wire.ParseReply(reply.Data)
	if err != nil {
		t.Fatalf("reply %s: %v", reply.Data, err)
	}
	if a.Topic != "orders_eu" {
		t.Fatalf("ack %+v", a)
	}
	return a
}

// waitInterest waits until ns has a subscription matching subject.
func waitInterest(t *testing.T, ns *natsserver.Server, subject string) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !ns.GlobalAccount().SubscriptionInterest(subject) {
		if time.Now().After(deadline) {
			t.Fatalf("no subscription for %s within %v", subject, waitTimeout)
		}
		time.Sleep(5 * time.Millisecond) // the server's state, read from outside: no event to wait on
	}
}

func runServer(t *testing.T, set func(*natsserver.Options)) *natsserver.Server {
	t.Helper()
	opts := natstest.DefaultTestOptions
	opts.Port = natsserver.RANDOM_PORT
	opts.MaxPayload = 4<<20 + 64<<10
	set(&opts)
	ns := natstest.RunServer(&opts)
	t.Cleanup(ns.Shutdown)
	return ns
}

// operatorCreds sets up operator mode (an operator, an account, a user signed by the account)
// and returns the user's credentials file.
func operatorCreds(t *testing.T, o *natsserver.Options, dir string) string {
	t.Helper()
	okp, _ := nkeys.CreateOperator()
	opub, _ := okp.PublicKey()
	oc := jwt.NewOperatorClaims(opub)
	oc.Name = "test"
	akp, _ := nkeys.CreateAccount()
	apub, _ := akp.PublicKey()
	ac := jwt.NewAccountClaims(apub)
	ajwt, err := ac.Encode(okp)
	if err != nil {
		t.Fatal(err)
	}
	ukp, _ := nkeys.CreateUser()
	upub, _ := ukp.PublicKey()
	useed, _ := ukp.Seed()
	ujwt, err := jwt.NewUserClaims(upub).Encode(akp)
	if err != nil {
		t.Fatal(err)
	}
	creds, err := jwt.FormatUserConfig(ujwt, useed)
	if err != nil {
		t.Fatal(err)
	}
	resolver := &natsserver.MemAccResolver{}
	if err := resolver.Store(apub, ajwt); err != nil {
		t.Fatal(err)
	}
	o.TrustedOperators = []*jwt.OperatorClaims{oc}
	o.AccountResolver = resolver
	return writeConf(t, filepath.Join(dir, "user.creds"), string(creds))
}

// TestConnectAuthenticated: the engine connects to a server that requires credentials (user and
// password, token, nkey, credentials file), stores what a client publishes there, and fails to
// start, saying why, when the credentials are wrong.
func TestConnectAuthenticated(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	ukp, _ := nkeys.CreateUser()
	upub, _ := ukp.PublicKey()
	useed, _ := ukp.Seed()
	seedFile := writeConf(t, filepath.Join(dir, "user.nk"), string(useed))
	otherKP, _ := nkeys.CreateUser()
	otherSeed, _ := otherKP.Seed()
	otherSeedFile := writeConf(t, filepath.Join(dir, "other.nk"), string(otherSeed))
	var credsFile string

	for _, tc := range []struct {
		name   string
		server func(*natsserver.Options)
		good   []string // the engine's flags
		client func() []nats.Option
		bad    []string // wrong credentials
	}{
		{
			name:   "user and password",
			server: func(o *natsserver.Options) { o.Username, o.Password = "engine", "s3cret" },
			good:   []string{"--user", "engine", "--password", "s3cret"},
			client: func() []nats.Option { return []nats.Option{nats.UserInfo("engine", "s3cret")} },
			bad:    []string{"--user", "engine", "--password", "wrong"},
		},
		{
			name:   "token",
			server: func(o *natsserver.Options) { o.Authorization = "t0ken" },
			good:   []string{"--token", "t0ken"},
			client: func() []nats.Option { return []nats.Option{nats.Token("t0ken")} },
			bad:    []string{"--token", "wrong"},
		},
		{
			name:   "nkey",
			server: func(o *natsserver.Options) { o.Nkeys = []*natsserver.NkeyUser{{Nkey: upub}} },
			good:   []string{"--nkey", seedFile},
			client: func() []nats.Option {
				opt, err := nats.NkeyOptionFromSeed(seedFile)
				if err != nil {
					t.Fatal(err)
				}
				return []nats.Option{opt}
			},
			bad: []string{"--nkey", otherSeedFile},
		},
		{
			name:   "credentials file",
			server: func(o *natsserver.Options) { credsFile = operatorCreds(t, o, t.TempDir()) },
			client: func() []nats.Option { return []nats.Option{nats.UserCredentials(credsFile)} },
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := runServer(t, tc.server)
			good := tc.good
			if good == nil {
				good = []string{"--creds", credsFile}
			}
			ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
			defer cancel()
			srv, sink, err := serveArgs(t, ctx, append(append(smallStore(t.TempDir()), "--server", ns.ClientURL()), good...)...)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := nats.Connect(ns.ClientURL(), nats.MaxReconnects(0)); err == nil || !strings.Contains(strings.ToLower(err.Error()), "authorization") {
				t.Fatalf("the server takes a connection without credentials: %v", err)
			}
			nc, err := nats.Connect(ns.ClientURL(), tc.client()...)
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			storeOne(t, nc, []byte("hello "+tc.name))
			if err := srv.Shutdown(); err != nil {
				t.Fatalf("shutdown: %v\n%s", err, sink)
			}

			if tc.bad == nil {
				return
			}
			_, sink, err = serveArgs(t, ctx, append(append(smallStore(t.TempDir()), "--server", ns.ClientURL()), tc.bad...)...)
			if err == nil || !strings.Contains(err.Error(), "connect to nats at "+ns.ClientURL()) || !errors.Is(err, nats.ErrAuthorization) {
				t.Fatalf("wrong credentials: %v, want a connection error wrapping %v\n%s", err, nats.ErrAuthorization, sink)
			}
		})
	}
}

// TestConnectWrongCredentialsExit: wrong credentials end `engine run` with exit code 1 and the
// server's reason in the log.
func TestConnectWrongCredentialsExit(t *testing.T) {
	ns := runServer(t, func(o *natsserver.Options) { o.Username, o.Password = "engine", "s3cret" })
	c := startChild(t, append(storeArgs(t.TempDir()), "--server", ns.ClientURL(), "--user", "engine",
		"--password", "wrong", "--reconnect-wait", "20ms")...)
	line, _ := c.waitLog(0, "engine failed")
	if code := c.wait(); code != 1 {
		t.Fatalf("exit code %d, want 1", code)
	}
	if msg, _ := line["error"].(string); !strings.Contains(strings.ToLower(msg), "authorization violation") || strings.Contains(msg, "wrong") {
		t.Fatalf("error %q: want the server's reason, without the password", msg)
	}
}

// freePort is a loopback port nothing listens on (yet).
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	return port
}

// TestConnectWaitsForServer: a server not up at start is waited for, logged, and the engine
// starts once it is; the wait ends with the context.
func TestConnectWaitsForServer(t *testing.T) {
	clearEnv(t)
	port := freePort(t)
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	r := mustParse(t, append(smallStore(t.TempDir()), "--server", url)...)
	sink := newLogSink()
	opts, nopts := r.options(zerolog.New(sink))
	type result struct {
		srv *engine.Server
		err error
	}
	done := make(chan result, 1)
	go func() {
		srv, err := engine.ServeContext(ctx, opts, nopts)
		done <- result{srv, err}
	}()
	sink.waitFor(t, "waiting for the nats server: it cannot be reached yet")
	sink.waitFor(t, "cannot reach nats: retrying")
	ns := runServer(t, func(o *natsserver.Options) { o.Port = port })
	res := <-done
	if res.err != nil {
		t.Fatalf("%v\n%s", res.err, sink)
	}
	defer res.srv.Shutdown()
	sink.waitFor(t, "connected to nats")
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	storeOne(t, nc, []byte("late server"))

	// Given up with the context: everything started is closed again (the store's lock too).
	dir := t.TempDir()
	r = mustParse(t, append(smallStore(dir), "--server", fmt.Sprintf("nats://127.0.0.1:%d", freePort(t)))...)
	sink = newLogSink()
	opts, nopts = r.options(zerolog.New(sink))
	ctx2, cancel2 := context.WithCancel(context.Background())
	go func() {
		_, err := engine.ServeContext(ctx2, opts, nopts)
		done <- result{nil, err}
	}()
	sink.waitFor(t, "waiting for the nats server")
	cancel2()
	if res := <-done; !errors.Is(res.err, context.Canceled) {
		t.Fatalf("canceled: %v", res.err)
	}
	e, err := engine.Open(engine.Options{Dir: dir, CommitLogFileSize: commitLogSize, ConsumeQueueUnits: cqUnits, IndexSlots: 1024, IndexEntries: 8192})
	if err != nil {
		t.Fatalf("the store was left locked: %v", err)
	}
	e.Close()
}

// TestConnectStopsDuringWait: SIGTERM while `engine run` waits for a server that is not up ends
// it cleanly (exit 0).
func TestConnectStopsDuringWait(t *testing.T) {
	c := startChild(t, append(storeArgs(t.TempDir()), "--server", fmt.Sprintf("nats://127.0.0.1:%d", freePort(t)))...)
	c.waitLog(0, "waiting for the nats server")
	c.signal(syscall.SIGTERM)
	if code := c.wait(); code != 0 {
		t.Fatalf("exit code %d, want 0", code)
	}
	c.waitLog(0, "stopped during start-up")
}

// TestConnectLameDuck: the server's lame duck mode is logged; the engine keeps running and
// reconnects when a server is back.
func TestConnectLameDuck(t *testing.T) {
	clearEnv(t)
	port := freePort(t)
	ns := runServer(t, func(o *natsserver.Options) {
		o.Port = port
		o.LameDuckDuration = 200 * time.Millisecond
		o.LameDuckGracePeriod = 10 * time.Millisecond
	})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	srv, sink, err := serveArgs(t, ctx, append(smallStore(t.TempDir()), "--server", ns.ClientURL())...)
	if err != nil {
		t.Fatal(err)
	}
	go ns.LameDuckShutdown()
	sink.waitFor(t, "the nats server entered lame duck mode")
	ns.WaitForShutdown()
	ns2 := runServer(t, func(o *natsserver.Options) { o.Port = port })
	sink.waitFor(t, "reconnected to nats")
	// nats.go reports the reconnect once it has written the subscriptions to the new server,
	// which may not have read them yet: a request from another connection could find no
	// responder meanwhile.
	waitInterest(t, ns2, "orders.eu")
	select {
	case <-srv.Done():
		t.Fatal("the engine stopped")
	case <-srv.NATSClosed():
		t.Fatal("the connection closed")
	default:
	}
	nc, err := nats.Connect(ns2.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	storeOne(t, nc, []byte("after lame duck"))
	if err := srv.Shutdown(); err != nil {
		t.Fatalf("shutdown: %v\n%s", err, sink)
	}
}

// TestConnectRevoked: credentials refused after a reconnect (the same authorization error twice)
// close the connection for good: NATSClosed tells, with the reason.
func TestConnectRevoked(t *testing.T) {
	clearEnv(t)
	base := natstest.DefaultTestOptions
	base.Port = natsserver.RANDOM_PORT
	base.Username, base.Password = "engine", "s3cret"
	opts := base
	ns := natstest.RunServer(&opts)
	t.Cleanup(ns.Shutdown)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	srv, sink, err := serveArgs(t, ctx, append(smallStore(t.TempDir()), "--server", ns.ClientURL(), "--user", "engine", "--password", "s3cret")...)
	if err != nil {
		t.Fatal(err)
	}
	changed := base
	changed.Password = "changed"
	if err := ns.ReloadOptions(&changed); err != nil {
		t.Fatal(err)
	}
	select {
	case <-srv.NATSClosed():
	case <-time.After(waitTimeout):
		t.Fatalf("the connection did not close\n%s", sink)
	}
	if err := srv.NATSError(); !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("NATSError %v, want %v", err, nats.ErrAuthorization)
	}
}
