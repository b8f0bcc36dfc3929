package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/rocketstore/engine/engine/monitor"
)

// TestRunSIGHUPReloads: a real SIGHUP to `engine run` reads the configuration file again and
// applies the log level and the retention settings at once (the status page shows the new
// retention, and a refused message now gets its debug line), refuses a change that needs a
// restart, and keeps the engine running; SIGTERM then stops it cleanly.
func TestRunSIGHUPReloads(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "engine.conf")
	writeConf(t, conf, "log_level: info\nfile_reserved_time: \"72h\"\nqueues: 4\nmax_body: 1024\n")
	c := startChild(t, "run", "-c", conf, "--store", filepath.Join(dir, "store"), "--log-format", "json",
		"--commit-log-size", fmt.Sprint(commitLogSize), "--cq-units", fmt.Sprint(cqUnits),
		"--index-slots", "1024", "--index-entries", "8192", "--listen", "127.0.0.1:-1", "--http", "127.0.0.1:0")
	mon, _ := c.waitLog(0, "monitoring")
	running, _ := c.waitLog(0, "engine running")
	httpURL, _ := mon["http"].(string)
	natsURL, _ := running["nats"].(string)
	if got := retentionOf(t, httpURL); got.FileReservedTime != "72h0m0s" {
		t.Fatalf("retention before the reload: %+v", got)
	}

	writeConf(t, conf, "log_level: debug\nfile_reserved_time: \"48h\"\nqueues: 8\nmax_body: 1024\n")
	c.signal(syscall.SIGHUP)
	reloaded, at := c.waitLog(0, "config reloaded")
	if applied := strs(reloaded["applied"]); !slices.Equal(applied, []string{"log_level", "file_reserved_time"}) {
		t.Fatalf("applied %v", applied)
	}
	if refused := strs(reloaded["refused"]); !slices.Equal(refused, []string{"queues"}) {
		t.Fatalf("refused %v", refused)
	}
	if got := retentionOf(t, httpURL); got.FileReservedTime != "48h0m0s" {
		t.Fatalf("retention after the reload: %+v", got)
	}

	// The debug level is in force: an oversized body is refused with a debug line of its own.
	nc, err := nats.Connect(natsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	reply, err := nc.Request("orders.eu", make([]byte, 2048), waitTimeout)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(reply.Data), `"error"`) {
		t.Fatalf("an oversized body got %s", reply.Data)
	}
	// The first refusal also gets the (rate-limited) warning: look for the debug line among
	// the first two.
	line, i := c.waitLog(at, "ingress: message rejected")
	if line["level"] != "debug" {
		line, _ = c.waitLog(i+1, "ingress: message rejected")
	}
	if line["level"] != "debug" {
		t.Fatalf("rejection logged as %v, want debug: %v", line["level"], line)
	}

	c.signal(syscall.SIGTERM)
	if code := c.wait(); code != 0 {
		t.Fatalf("exit code %d, want 0", code)
	}
}

// retentionOf reads the retention settings from the status page.
func retentionOf(t *testing.T, base string) monitor.StatusRetention {
	t.Helper()
	client := &http.Client{Timeout: waitTimeout}
	resp, err := client.Get(base + "/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st monitor.Status
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	if st.Retention == nil {
		t.Fatalf("the status has no retention: %+v", st)
	}
	return *st.Retention
}

// strs is a JSON array of strings.
func strs(v any) []string {
	a, _ := v.([]any)
	out := make([]string, 0, len(a))
	for _, s := range a {
		str, _ := s.(string)
		out = append(out, str)
	}
	return out
}

// TestLoggerLevels: a command's logger has the level asked for, so that what it does not log
// costs only a level check (an embedded nats-server traces only at trace level); `engine run`'s
// is left to its LevelWriter, whose level SIGHUP changes.
func TestLoggerLevels(t *testing.T) {
	log, levels := newLogger("warn", "json")
	if log.GetLevel() != zerolog.WarnLevel || levels.Level() != zerolog.WarnLevel {
		t.Fatalf("logger at %v, writer at %v; want warn", log.GetLevel(), levels.Level())
	}
	if dyn := dynamicLogger(log); dyn.GetLevel() != zerolog.TraceLevel {
		t.Fatalf("run's logger at %v, want trace (the writer filters)", dyn.GetLevel())
	}
}
