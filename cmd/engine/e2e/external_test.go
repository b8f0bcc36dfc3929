package e2e

import (
	"fmt"
	"strings"
	"syscall"
	"testing"

	natsserver "github.com/nats-io/nats-server/v2/server"
)

// README.md "External NATS" and docs/CONFIG.md "The NATS connection": the engine on a NATS
// server of its user's (-s / --server / $NATS_URL).

// TestExternalServerNotUpYet: a server that is not up at start is waited for (logged), with
// /healthz alive and /readyz 503 meanwhile; once the server is up the engine runs, takes what
// is published through that server, and stops cleanly.
func TestExternalServerNotUpYet(t *testing.T) {
	t.Parallel()
	port := freePort(t)
	dir := t.TempDir()
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	p := startProc(t, procOpts{args: append([]string{"run", "--store", dir, "--log-format", "json", "--reconnect-wait", "100ms",
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
// server's error and exit code 1; the right ones connect.
func TestWrongCredentials(t *testing.T) {
	t.Parallel()
	ns := startNATS(t, 0, func(o *natsserver.Options) { o.Username, o.Password = "engine", "s3cret" })
	p := startProc(t, procOpts{args: append([]string{"run", "--store", t.TempDir(), "--log-format", "json",
		"-s", clientURL(ns), "--user", "engine", "--password", "wrong"}, sizeArgs...)})
	if code := p.wait(); code != 1 {
		t.Fatalf("wrong credentials: exit %d, want 1", code)
	}
	failed := p.waitLog("engine failed")
	if errText, _ := failed["error"].(string); !strings.Contains(strings.ToLower(errText), "nats: authorization violation") {
		t.Fatalf("the server's error is not said: %v", failed)
	}
	dir := t.TempDir()
	e := startEngineOpts(t, dir, procOpts{args: append([]string{"run", "--store", dir, "--log-format", "json",
		"-s", clientURL(ns)}, sizeArgs...), env: []string{"NATS_USER=engine", "NATS_PASSWORD=s3cret"}}, nil)
	e.stop()
}
