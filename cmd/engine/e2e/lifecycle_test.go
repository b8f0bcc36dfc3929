package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
)

// The engine's life as README.md ("Run it", "On disk"), docs/CONFIG.md ("Signals and exit
// codes") and docs/ARCHITECTURE.md ("Durability contract", "Recovery") tell it: a start with no
// configuration, a clean stop and the clean start after it, a crash and the recovery after it, a
// second signal, the store's lock.

// TestZeroConfigRun: `engine run` with nothing but a free port (the README's `go run
// ./cmd/engine run` binds 127.0.0.1:4222) stores every subject under ./store, logs JSON when
// stderr is not a terminal (the embedded nats-server through the same logger), never stores
// reply inboxes or $-subjects, lays the store out as "On disk" shows, and removes `abort` at a
// clean stop.
func TestZeroConfigRun(t *testing.T) {
	t.Parallel()
	cwd := t.TempDir()
	e := startEngineOpts(t, filepath.Join(cwd, "store"), procOpts{args: []string{"run", "--listen", "127.0.0.1:-1"}, dir: cwd})
	for _, l := range e.snapshot() {
		if l.fields == nil {
			t.Fatalf("a log line that is not JSON: %q", l.raw)
		}
	}
	if l, _, ok := e.findLog(0, "Server is ready"); !ok || l["component"] != "nats-server" {
		t.Fatalf("the embedded nats-server's lines are not in the engine's log: %v", l)
	}
	running := e.waitLog("engine running")
	if running["store"] != filepath.Join(cwd, "store") || running["flush"] != "sync" || !equalStrings(running["subjects"], ">") {
		t.Fatalf("engine running: %v, want ./store, sync and every subject", running)
	}
	nc := connect(t, e.url)
	// Reply inboxes and $-subjects are never stored, everything else is.
	for _, subj := range []string{"_INBOX.e2e.x", "$E2E.x"} {
		if err := nc.Publish(subj, []byte("not stored")); err != nil {
			t.Fatal(err)
		}
	}
	a := stored(t, nc, msg("orders.eu", "stored", "Rmq-Keys", "k"))
	waitReadable(t, nc, a)

	store := filepath.Join(cwd, "store")
	for _, f := range []string{"commitlog/00000000000000000000", "abort", "lock", "checkpoint",
		filepath.Join("consumequeue", "orders_eu", itoa(a.QueueID), "00000000000000000000")} {
		if !fileExists(t, filepath.Join(store, f)) {
			t.Errorf("store/%s missing while the engine runs", f)
		}
	}
	idx, err := os.ReadDir(filepath.Join(store, "index"))
	if err != nil || len(idx) != 1 || !regexp.MustCompile(`^\d{17}$`).MatchString(idx[0].Name()) {
		t.Errorf("store/index holds %v (%v), want one <yyyyMMddHHmmssSSS> file", idx, err)
	}
	e.stop()
	if fileExists(t, filepath.Join(store, "abort")) {
		t.Fatal("abort left after a clean stop")
	}
	topics := mustCLI(t, append([]string{"topics", "--json"}, offline(store)[:2]...)...)
	if strings.Contains(topics, "INBOX") || strings.Contains(topics, "E2E") || !strings.Contains(topics, "orders_eu") {
		t.Fatalf("topics after publishing to an inbox, a $-subject and orders.eu:\n%s", topics)
	}
}

// equalStrings says whether v, a JSON array, holds exactly want.
func equalStrings(v any, want ...string) bool {
	a, _ := v.([]any)
	if len(a) != len(want) {
		return false
	}
	for i := range a {
		if a[i] != want[i] {
			return false
		}
	}
	return true
}

// TestCleanStopAndRestart: SIGTERM (and SIGINT) drains, syncs, writes the checkpoint and exits
// 0; the next start is a clean one (clean_exit true, from the checkpoint, nothing rescanned),
// keeps every acked message and continues every queue.
func TestCleanStopAndRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := startEngine(t, dir)
	subjects := []string{"clean.a", "clean.b", "clean.c"}
	first := publishAcked(t, e.url, "one", subjects, 20)
	e.stop()
	if fileExists(t, filepath.Join(dir, "abort")) {
		t.Fatal("abort left after a clean stop")
	}
	e = e.restart(t)
	if r := e.recovered; r["clean_exit"] != true || r["from_checkpoint"] != true || r["records"] != float64(0) {
		t.Fatalf("the start after a clean stop: %v, want clean_exit and from_checkpoint with 0 records rescanned", r)
	}
	second := publishAcked(t, e.url, "two", subjects, 10)
	e.send(syscall.SIGINT) // the same graceful stop as SIGTERM
	if code := e.wait(); code != 0 {
		t.Fatalf("exit code %d after SIGINT, want 0", code)
	}
	e.waitLog("stopped cleanly")
	all := append(first, second...)
	if n := checkAcked(t, offline(dir), all); n != len(all) {
		t.Fatalf("the store holds %d messages, %d were acked", n, len(all))
	}
}

// TestSIGKILLKeepsAcked: in both flush modes, a SIGKILL while publishers are sending loses
// nothing acked (sync: on disk; async: in the page cache, which a crash of the process does not
// take), the next start says the last exit was not clean, and every queue goes on without a gap.
func TestSIGKILLKeepsAcked(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"sync", "async"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			subjects := []string{"kill.a", "kill.b", "kill.c", "kill.d"}
			e := startEngine(t, dir, "--flush", mode)
			if running := e.waitLog("engine running"); running["flush"] != mode {
				t.Fatalf("engine running: %v, want flush %s", running, mode)
			}
			var acked []sentMsg
			kills := 3
			if testing.Short() {
				kills = 2
			}
			for k := range kills {
				acked = append(acked, publishUntilKilled(t, e, "k"+itoa(k), subjects, 40+30*k)...)
				if fileExists(t, filepath.Join(dir, "abort")) != true {
					t.Fatal("no abort file after a SIGKILL: the next start would not recover")
				}
				e = e.restart(t)
				if e.recovered["clean_exit"] != false {
					t.Fatalf("the start after a SIGKILL: %v, want clean_exit false", e.recovered)
				}
			}
			acked = append(acked, publishAcked(t, e.url, "after", subjects, 5)...)
			e.stop()
			n := checkAcked(t, offline(dir), acked)
			t.Logf("%s: %d kills, %d acked, %d stored (the rest were in flight)", mode, kills, len(acked), n)
		})
	}
}

// TestSecondSignal: a second SIGTERM during the drain exits at once with code 1 (before the
// drain ends, which it cannot for 10 s) and leaves the abort file; /readyz says 503 while the
// engine stops; the next start recovers everything acked. The drain is made to last: the engine
// uses an external server behind a proxy that holds what the server sends once the test says
// so, so the drain's flush waits for a PONG that does not come.
func TestSecondSignal(t *testing.T) {
	t.Parallel()
	ns := startNATS(t, 0)
	proxy := newStallProxy(t, ns.Addr().String())
	dir := t.TempDir()
	args := append([]string{"run", "--store", dir, "--log-format", "json", "--server", proxy.url(), "--http", "127.0.0.1:0"}, sizeArgs...)
	e := startEngineOpts(t, dir, procOpts{args: args})
	acked := publishAcked(t, clientURL(ns), "before", []string{"sig.a", "sig.b"}, 20)

	proxy.stalled.Store(true)
	e.send(syscall.SIGTERM)
	_, at := e.waitLogAfter(0, "stopping: draining")
	if code, body := httpGet(t, e.http+"/readyz"); code != 503 || !strings.Contains(body, "stopping") {
		t.Errorf("/readyz while stopping: %d %q, want 503 stopping", code, body)
	}
	e.send(syscall.SIGTERM)
	if code := e.wait(); code != 1 {
		t.Fatalf("exit code %d after a second signal, want 1", code)
	}
	// It exited on the second signal, not at the end of the drain (which is held): the drain
	// never logged its end.
	e.waitLogAfter(at, "second signal")
	for _, end := range []string{"stopped cleanly", "engine failed"} {
		if _, _, ok := e.findLog(at, end); ok {
			t.Fatalf("the drain ended (%q): the second signal did not exit at once", end)
		}
	}
	if !fileExists(t, filepath.Join(dir, "abort")) {
		t.Fatal("no abort file after exiting without a drain")
	}
	e = startEngine(t, dir)
	if e.recovered["clean_exit"] != false {
		t.Fatalf("the start after a second signal: %v, want clean_exit false", e.recovered)
	}
	e.stop()
	checkAcked(t, offline(dir), acked)
}

// TestStoreLocked: a second engine on a store that an engine holds fails to start (exit 1) with
// an error that names the lock and its holder, and leaves the first one running; reading the
// store offline needs no lock.
func TestStoreLocked(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := startEngine(t, dir)
	a := stored(t, connect(t, e.url), msg("lock.a", "x"))
	second := startProc(t, procOpts{args: runArgs(dir)})
	if code := second.wait(); code != 1 {
		t.Fatalf("a second engine on a held store: exit %d, want 1", code)
	}
	failed := second.waitLog("engine failed")
	if errText, _ := failed["error"].(string); !strings.Contains(errText, "lock") || !strings.Contains(errText, "pid") {
		t.Errorf("the error does not name the lock and its holder: %v", failed)
	}
	waitReadable(t, connect(t, e.url), a)
	if got := readQueue(t, offline(dir), a.Topic, a.QueueID); len(got) != 1 {
		t.Fatalf("offline read of a held store: %v", got)
	}
	stored(t, connect(t, e.url), msg("lock.a", "still running"))
	e.stop()
}
