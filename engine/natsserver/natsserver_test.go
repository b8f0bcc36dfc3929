package natsserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rocketstore/engine/stages/ingress/route"
	"github.com/rs/zerolog"
)

// waitFor bounds the waits for the embedded server's deliveries.
const waitFor = 30 * time.Second

// TestEmbeddedAndConnect runs the embedded server on a loopback port the kernel picks, with a
// partition mapping, and the engine's connection to it: the max payload is raised to the one
// asked for, a message on the mapping's source reaches the partition's subject that
// route.PartitionOf names, what the connection publishes never comes back to its own
// subscriptions (NoEcho), and the server's end closes the connection for good.
func TestEmbeddedAndConnect(t *testing.T) {
	const count = 4
	e, err := StartEmbedded(EmbeddedConfig{Listen: "127.0.0.1:-1", MaxPayload: 2 << 20, Level: zerolog.InfoLevel,
		Logger: zerolog.Nop(), PartitionSources: []string{"orders.*"}, PartitionCount: count, Partitioned: true})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			e.Shutdown()
		}
	}()
	nc, closed, err := Connect(context.Background(), e.ClientURL(), ConnConfig{Name: "engine-test"}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if nc.MaxPayload() < 2<<20 {
		t.Fatalf("max payload %d, want at least %d", nc.MaxPayload(), 2<<20)
	}

	own, err := nc.SubscribeSync(">")
	if err != nil {
		t.Fatal(err)
	}
	pub, err := nats.Connect(e.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	want := fmt.Sprintf("%s.%d.orders.k1", route.DefaultPartitionPrefix, route.PartitionOf("k1", count))
	sub, err := pub.SubscribeSync(route.DefaultPartitionPrefix + ".>")
	if err != nil {
		t.Fatal(err)
	}
	if err := pub.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := nc.Publish("orders.k1", []byte("from the engine")); err != nil {
		t.Fatal(err)
	}
	m, err := sub.NextMsg(waitFor)
	if err != nil || m.Subject != want || !bytes.Equal(m.Data, []byte("from the engine")) {
		t.Fatalf("mapped: %v %v, want it on %s", m, err, want)
	}
	if err := pub.Publish("fence", nil); err != nil { // after the engine's own message
		t.Fatal(err)
	}
	if m, err := own.NextMsg(waitFor); err != nil || m.Subject != "fence" {
		t.Fatalf("the engine's connection got %v (%v) first: its own message came back", m, err)
	}
	if e.NumClients() != 2 || e.JetStreamEnabled() {
		t.Fatalf("%d clients, JetStream %v", e.NumClients(), e.JetStreamEnabled())
	}

	e.Shutdown()
	stopped = true
	nc.Close() // reconnecting forever: only our Close ends it
	select {
	case <-closed:
	case <-time.After(waitFor):
		t.Fatal("closed did not close")
	}
}

// TestStartEmbeddedRefusesSources: partition mappings need partitioned ingest, and a source
// that could be mapped twice is refused; neither leaves a server running on the port.
func TestStartEmbeddedRefusesSources(t *testing.T) {
	for _, cfg := range []EmbeddedConfig{
		{PartitionSources: []string{"orders.*"}},
		{PartitionSources: []string{"rmq.p.*"}, Partitioned: true},
	} {
		cfg.Listen, cfg.Logger = "127.0.0.1:-1", zerolog.Nop()
		if e, err := StartEmbedded(cfg); err == nil {
			e.Shutdown()
			t.Fatalf("%+v: started", cfg)
		}
	}
}

// TestConnectGivesUp: a server that is not there is waited for until ctx ends, and the error
// names the URL without its password.
func TestConnectGivesUp(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	url := "nats://user:secret@127.0.0.1:1"
	nc, closed, err := Connect(ctx, url, ConnConfig{ReconnectWait: 10 * time.Millisecond}, zerolog.Nop())
	if !errors.Is(err, context.DeadlineExceeded) || nc != nil || closed != nil {
		t.Fatalf("connect to nobody: %v %v", nc, err)
	}
	if got := redactURLs(url + ",nats://127.0.0.1:2"); strings.Contains(got, "secret") || !strings.Contains(got, "127.0.0.1:2") {
		t.Fatalf("redacted %q", got)
	}
}

// TestCheckFiles: a file the options name that cannot be read, or a certificate without its
// key, fails at once.
func TestCheckFiles(t *testing.T) {
	dir := t.TempDir()
	creds := filepath.Join(dir, "user.creds")
	if err := os.WriteFile(creds, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := (ConnConfig{Creds: creds}).CheckFiles(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []ConnConfig{{Creds: filepath.Join(dir, "missing")}, {TLSCert: creds}, {Nkey: dir + "/nkey"}} {
		if err := c.CheckFiles(); err == nil {
			t.Fatalf("%+v: no error", c)
		}
	}
}

// TestLevelWriter: events below the level are dropped, and the level changes while it writes.
func TestLevelWriter(t *testing.T) {
	var out bytes.Buffer
	w := NewLevelWriter(&out, zerolog.InfoLevel)
	log := zerolog.New(w).Level(zerolog.TraceLevel)
	log.Debug().Msg("hidden")
	log.Info().Msg("shown")
	w.SetLevel(zerolog.DebugLevel)
	log.Debug().Msg("now shown")
	if s := out.String(); strings.Contains(s, "hidden") || !strings.Contains(s, `"shown"`) || !strings.Contains(s, "now shown") ||
		w.Level() != zerolog.DebugLevel {
		t.Fatalf("wrote %q at %v", s, w.Level())
	}
}
