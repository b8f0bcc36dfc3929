package e2e

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// README.md "Run it as a service": monitoring over HTTP, the logs, SIGHUP (docs/CONFIG.md
// "Reload: SIGHUP").

// TestMonitoring: with --http, /healthz and /readyz answer ok while the engine runs, /metrics
// is Prometheus text with the engine's names under rocketstore_, /status is JSON, and
// /debug/pprof is there with --pprof only.
func TestMonitoring(t *testing.T) {
	t.Parallel()
	e := startEngine(t, t.TempDir(), "--http", "127.0.0.1:0", "--pprof")
	if e.http == "" {
		t.Fatal("no monitoring address logged")
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, body := httpGet(t, e.http+path); code != 200 || strings.TrimSpace(body) != "ok" {
			t.Errorf("%s: %d %q, want 200 ok", path, code, body)
		}
	}
	nc := connect(t, e.url)
	for i := range 3 {
		stored(t, nc, msg("mon.a", fmt.Sprint(i)))
	}
	code, metrics := httpGet(t, e.http+"/metrics")
	if code != 200 {
		t.Fatalf("/metrics: %d", code)
	}
	names := map[string]bool{}
	for _, line := range strings.Split(metrics, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name := line[:strings.IndexAny(line, "{ ")]
		names[name] = true
		// The Prometheus Go client's standard collectors come along (the README's "every
		// name" is about the engine's own): everything else is under rocketstore_.
		if strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_") || strings.HasPrefix(name, "promhttp_") {
			continue
		}
		if !strings.HasPrefix(name, "rocketstore_") {
			t.Errorf("/metrics: %q is not under rocketstore_", name)
		}
	}
	if !strings.Contains(metrics, "\nrocketstore_append_records_total 3\n") {
		t.Fatalf("/metrics does not count the 3 messages stored:\n%s", metrics)
	}
	code, status := httpGet(t, e.http+"/status")
	var st map[string]any
	if code != 200 || json.Unmarshal([]byte(status), &st) != nil || len(st) == 0 {
		t.Fatalf("/status: %d %q, want a JSON object", code, status)
	}
	if code, _ := httpGet(t, e.http+"/debug/pprof/"); code != 200 {
		t.Errorf("/debug/pprof/ with --pprof: %d", code)
	}
	e.stop()

	e = startEngine(t, t.TempDir(), "--http", "127.0.0.1:0")
	if code, _ := httpGet(t, e.http+"/debug/pprof/"); code != 404 {
		t.Errorf("/debug/pprof/ without --pprof: %d, want 404", code)
	}
	e.stop()
}

// TestLogFormatAndLevel: --log-format console writes human-readable lines (not JSON), and
// --log-level warn leaves out the info lines; the engine runs all the same (/readyz).
func TestLogFormatAndLevel(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	port := freePort(t)
	p := startProc(t, procOpts{args: append([]string{"run", "--store", dir, "--listen", "127.0.0.1:-1", "--log-format", "console",
		"--log-level", "warn", "--http", fmt.Sprintf("127.0.0.1:%d", port)}, sizeArgs...)})
	untilDeadline(t, "/readyz ok", func() bool {
		code, _ := getNoFail(fmt.Sprintf("http://127.0.0.1:%d/readyz", port))
		return code == 200
	})
	p.send(syscall.SIGTERM)
	if code := p.wait(); code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, l := range p.snapshot() {
		if l.fields != nil {
			t.Errorf("a JSON line with --log-format console: %q", l.raw)
		}
		if strings.Contains(l.raw, "INF") || strings.Contains(l.raw, "engine running") {
			t.Errorf("an info line at --log-level warn: %q", l.raw)
		}
	}

	console := startProc(t, procOpts{args: append([]string{"run", "--store", t.TempDir(), "--listen", "127.0.0.1:-1", "--log-format", "console"}, sizeArgs...)})
	line := console.waitRaw("engine running")
	if strings.HasPrefix(line, "{") || !strings.Contains(line, "INF") {
		t.Errorf("a console line: %q", line)
	}
	console.send(syscall.SIGTERM)
	console.wait()
}

// TestSIGHUP: a real SIGHUP reads the file again: the log level and a retention setting are
// applied at once (logged, shown by /status), a setting that needs a restart is refused with a
// warning and reported again at each SIGHUP, an invalid file changes nothing, and the engine
// keeps running; a flag still beats the file after a reload.
func TestSIGHUP(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	conf := writeFile(t, filepath.Join(dir, "engine.conf"), "log_level: info\nfile_reserved_time: \"72h\"\nqueues: 4\n")
	e := startEngine(t, filepath.Join(dir, "store"), "-c", conf, "--http", "127.0.0.1:0", "--delete-when", "05")
	if got := retention(t, e.http); got["file_reserved_time"] != "72h0m0s" {
		t.Fatalf("retention before the reload: %v", got)
	}
	writeFile(t, conf, "log_level: debug\nfile_reserved_time: \"48h\"\nqueues: 8\ndelete_when: \"07\"\n")
	mark := e.nlines()
	e.send(syscall.SIGHUP)
	reloaded, at := e.waitLogAfter(mark, "config reloaded")
	if !equalStrings(reloaded["applied"], "log_level", "file_reserved_time") || !equalStrings(reloaded["refused"], "queues") {
		t.Fatalf("config reloaded: %v, want log_level and file_reserved_time applied, queues refused", reloaded)
	}
	if l, _, ok := e.findLog(mark, "reload: not applied, this setting needs a restart"); !ok || l["level"] != "warn" {
		t.Errorf("no warning for queues: %v", l)
	}
	if l, _, ok := e.findLog(mark, "reload: applied"); !ok || l["key"] != "log_level" {
		t.Errorf("the applied change is not logged with its key: %v", l)
	}
	got := retention(t, e.http)
	if got["file_reserved_time"] != "48h0m0s" || got["delete_when"] != "05" {
		t.Fatalf("retention after the reload: %v, want 48h from the file and 05 from the flag", got)
	}
	// debug is in force: a refused message now gets a debug line.
	nc := connect(t, e.url)
	request(t, nc, msg("hup.a", "x", "DELAY", "1"))
	if l, _ := e.waitLogAfter(at, "ingress: message rejected"); l["level"] != "debug" {
		if l2, _ := e.waitLogAfter(at+1, "ingress: message rejected"); l2["level"] != "debug" {
			t.Fatalf("rejections logged at %v and %v, want a debug line", l["level"], l2["level"])
		}
	}

	// An invalid file: nothing changes, the engine runs on.
	writeFile(t, conf, "log_level: info\nqueues: \"many\"\n")
	mark = e.nlines()
	e.send(syscall.SIGHUP)
	if l, _ := e.waitLogAfter(mark, "reload refused"); l["level"] != "error" {
		t.Errorf("reload of an invalid file: %v", l)
	}
	if got := retention(t, e.http); got["file_reserved_time"] != "48h0m0s" {
		t.Fatalf("retention after an invalid reload: %v", got)
	}
	stored(t, nc, msg("hup.a", "still running"))

	// The refused change keeps being reported at each SIGHUP.
	writeFile(t, conf, "log_level: debug\nfile_reserved_time: \"48h\"\nqueues: 8\n")
	mark = e.nlines()
	e.send(syscall.SIGHUP)
	if reloaded, _ := e.waitLogAfter(mark, "config reloaded"); !equalStrings(reloaded["refused"], "queues") {
		t.Fatalf("the second reload: %v, want queues refused again", reloaded)
	}
	e.stop()
}

// retention is the retention part of /status.
func retention(t *testing.T, base string) map[string]any {
	t.Helper()
	code, body := httpGet(t, base+"/status")
	var st struct {
		Retention map[string]any `json:"retention"`
	}
	if code != 200 || json.Unmarshal([]byte(body), &st) != nil || st.Retention == nil {
		t.Fatalf("/status: %d %s", code, body)
	}
	return st.Retention
}
