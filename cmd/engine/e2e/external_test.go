package e2e

import (
	"fmt"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// README.md "External NATS" and docs/CONFIG.md "The NATS connection": the engine on a NATS
// server of its user's (-s / --server / $NATS_URL).

// TestExternalServerNotUpYet: a server that is not up at start is waited for (logged, and for
// more attempts than nats.go's default limit), with /healthz alive and /readyz 503 meanwhile;
// once the server is up the engine runs, takes what is published through that server, and
// stops cleanly.
func TestExternalServerNotUpYet(t *testing.T) {
	t.Parallel()
	port := freePort(t)
	dir := t.TempDir()
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	p := startProc(t, procOpts{args: append([]string{"run", "--store", dir, "--log-format", "json", "--reconnect-wait", "10ms",
		"--http", "127.0.0.1:0"}, sizeArgs...), env: []string{"NATS_URL=" + url}})
	mon := p.waitLog("monitoring")
	p.waitLog("waiting for the nats server")
	base, _ := mon["http"].(string)
	if code, _ := httpGet(t, base+"/healthz"); code != 200 {
		t.Errorf("/healthz while waiting for NATS: %d, want 200", code)
	}
	if code, body := httpGet(t, base+"/readyz"); code != 503 {
		t.Errorf("/readyz while waiting for NATS: %d %q, want 503", code, body)
	}
	refuseAttempts(t, p, port, forever)
	ns := startNATS(t, port)
	running := p.waitLog("engine running")
	if running["nats"] != url {
		t.Fatalf("engine running on %v, want %s", running["nats"], url)
	}
	if code, _ := httpGet(t, base+"/readyz"); code != 200 {
		t.Errorf("/readyz once running: %d", code)
	}
	nc := connect(t, clientURL(ns))
	a := stored(t, nc, msg("ext.a", "through the user's server"))
	p.send(syscall.SIGTERM)
	if code := p.wait(); code != 0 {
		t.Fatalf("exit %d, want 0", code)
	}
	if got := readQueue(t, offline(dir), a.Topic, a.QueueID); len(got) != 1 {
		t.Fatalf("stored: %v", got)
	}
}

// TestSignalDuringStartup: a SIGTERM while the engine waits for a server that is not up gives
// the start up cleanly: exit 0.
func TestSignalDuringStartup(t *testing.T) {
	t.Parallel()
	p := startProc(t, procOpts{args: append([]string{"run", "--store", t.TempDir(), "--log-format", "json",
		"--server", fmt.Sprintf("nats://127.0.0.1:%d", freePort(t))}, sizeArgs...)})
	p.waitLog("waiting for the nats server")
	p.send(syscall.SIGTERM)
	if code := p.wait(); code != 0 {
		t.Fatalf("a signal during start-up: exit %d, want 0", code)
	}
	p.waitLog("stopped during start-up")
}

// TestWrongCredentials: a server that refuses the engine's credentials fails the start with the
// server's error and exit code 1; the right ones connect; revoked while the engine runs, they
// stop it with exit 1.
func TestWrongCredentials(t *testing.T) {
	t.Parallel()
	ns := startNATS(t, 0, func(o *natsserver.Options) { o.Username, o.Password = "engine", "s3cret" })
	p := startProc(t, procOpts{args: append([]string{"run", "--store", t.TempDir(), "--log-format", "json",
		"-s", clientURL(ns), "--user", "engine", "--password", "wrong", "--reconnect-wait", "100ms"}, sizeArgs...)})
	if code := p.wait(); code != 1 {
		t.Fatalf("wrong credentials: exit %d, want 1", code)
	}
	failed := p.waitLog("engine failed")
	if errText, _ := failed["error"].(string); !strings.Contains(strings.ToLower(errText), "nats: authorization violation") {
		t.Fatalf("the server's error is not said: %v", failed)
	}
	dir := t.TempDir()
	e := startEngineOpts(t, dir, procOpts{args: append([]string{"run", "--store", dir, "--log-format", "json",
		"-s", clientURL(ns), "--reconnect-wait", "100ms"}, sizeArgs...), env: []string{"NATS_USER=engine", "NATS_PASSWORD=s3cret"}})
	// Revoked while it runs: the server refuses the reconnections, the connection closes for
	// good, and the engine stops with exit 1, saying why.
	revoked := &natsserver.Options{Host: "127.0.0.1", Port: ns.Addr().(*net.TCPAddr).Port, MaxPayload: 4<<20 + 64<<10,
		NoSigs: true, NoLog: true, Username: "engine", Password: "changed"}
	if err := ns.ReloadOptions(revoked); err != nil {
		t.Fatal(err)
	}
	if code := e.wait(); code != 1 {
		t.Fatalf("credentials revoked: exit %d, want 1", code)
	}
	if l := e.waitLog("stopping: nothing can reach the engine any more"); !strings.Contains(strings.ToLower(fmt.Sprint(l["error"])), "authorization") {
		t.Fatalf("the reason is not said: %v", l)
	}
}

// TestExternalServerRestart: a lost connection is retried (logged), forever (more attempts than
// nats.go's default limit), and once the server is back the engine takes messages again.
func TestExternalServerRestart(t *testing.T) {
	t.Parallel()
	port := freePort(t)
	ns := startNATS(t, port)
	dir := t.TempDir()
	e := startEngine(t, dir, "--server", clientURL(ns), "--reconnect-wait", "10ms")
	first := stored(t, connect(t, clientURL(ns)), msg("rc.a", "before"))
	mark := e.nlines()
	ns.Shutdown()
	e.waitLogAfter(mark, "disconnected from nats")
	refuseAttempts(t, e.proc, port, forever)
	ns = startNATS(t, port)
	e.waitLogAfter(mark, "reconnected to nats")
	// The subscriptions are back once the server has them: a request may still find none for
	// a moment after the reconnection (no responders), so ask until one is answered.
	nc := connect(t, clientURL(ns))
	var second ack
	untilDeadline(t, "a request answered after the reconnection", func() bool {
		reply, err := nc.RequestMsg(msg("rc.a", "after"), waitTimeout)
		if err != nil {
			return false
		}
		second = ackOf(t, reply.Data)
		return true
	})
	e.stop()
	if n := checkAcked(t, offline(dir), []sentMsg{{"rc.a", "before", first}, {"rc.a", "after", second}}); n != 2 {
		t.Fatalf("stored %d, want 2", n)
	}
}

// forever is how many reconnection attempts a lost server sees before it comes back: more than
// nats.go's default limit (60), after which a client that does not retry forever gives up.
const forever = nats.DefaultMaxReconnect + 10

// refuseAttempts stands in for the lost server at 127.0.0.1:port until the engine has tried to
// reconnect n times: it accepts each attempt and closes it at once. An engine that gives up
// before (its connection closed for good) exits, which fails the test.
func refuseAttempts(t *testing.T, p *proc, port, n int) {
	t.Helper()
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	attempts, done := make(chan struct{}), make(chan struct{})
	defer func() { close(done); ln.Close() }()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
			select {
			case attempts <- struct{}{}:
			case <-done:
				return
			}
		}
	}()
	deadline := time.After(waitTimeout)
	for seen := 0; seen < n; seen++ {
		select {
		case <-attempts:
		case <-p.exited:
			t.Fatalf("the engine exited (code %d) after %d attempts to connect: it does not retry forever", p.code, seen)
		case <-deadline:
			t.Fatalf("%d attempts to connect within %v, want %d", seen, waitTimeout, n)
		}
	}
}

// TestQueueGroup: --queue-group shares the subjects between engines: each message is stored by
// exactly one of them.
func TestQueueGroup(t *testing.T) {
	t.Parallel()
	ns := startNATS(t, 0)
	a := startEngine(t, t.TempDir(), "--server", clientURL(ns), "--queue-group", "rs", "--store-host", "127.0.0.1:20011")
	b := startEngine(t, t.TempDir(), "--server", clientURL(ns), "--queue-group", "rs", "--store-host", "127.0.0.1:20012")
	sent := publishAcked(t, clientURL(ns), "qg", []string{"qg.a", "qg.b", "qg.c", "qg.d"}, 10)
	byHost := map[string][]sentMsg{}
	for _, s := range sent {
		byHost[s.ack.MsgID[:16]] = append(byHost[s.ack.MsgID[:16]], s)
	}
	a.stop()
	b.stop()
	total := 0
	for host, dir := range map[string]string{"7F00000100004E2B": a.dir, "7F00000100004E2C": b.dir} {
		if n := checkAcked(t, offline(dir), byHost[host]); n != len(byHost[host]) {
			t.Fatalf("engine %s stored %d, acked %d", host, n, len(byHost[host]))
		}
		total += len(byHost[host])
	}
	if total != len(sent) {
		t.Fatalf("%d acked by the two engines, %d sent", total, len(sent))
	}
}

// TestNATSConfigFile: --nats-config runs the embedded server from a nats-server configuration:
// its address is the file's when --listen is not set, and a max_payload below the body limit +
// 64 KiB is raised, with a warning, so that bodies up to --max-body reach the engine.
func TestNATSConfigFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	port := freePort(t)
	conf := writeFile(t, dir+"/nats.conf", fmt.Sprintf("host: 127.0.0.1\nport: %d\nmax_payload: 1024\n", port))
	e := startEngineOpts(t, dir+"/store", procOpts{args: append([]string{"run", "--store", dir + "/store", "--log-format", "json",
		"--nats-config", conf, "--max-body", "256KiB"}, sizeArgs...)})
	if want := fmt.Sprintf("nats://127.0.0.1:%d", port); e.url != want {
		t.Fatalf("the embedded server at %s, want the file's %s", e.url, want)
	}
	if _, ok := e.grep("max_payload below the body limit"); !ok {
		t.Errorf("no warning for the raised max_payload")
	}
	stored(t, connect(t, e.url), msg("nc.a", strings.Repeat("x", 200<<10)))
	e.stop()
}
