package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/nats-io/nats.go"
)

// runCLI runs the command with args in a child process, as a user runs it, and returns its
// standard output; it fails the test unless the command exits 0.
func runCLI(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), childEnv+"=1", "GORACE=atexit_sleep_ms=0")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("engine %v: %v\nstdout:\n%s\nstderr:\n%s", args, err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// splitLines is the non-empty lines of out.
func splitLines(out string) []string {
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return lines
}

// wireAck is the ack JSON as README.md documents it, decoded without the engine's packages.
type wireAck struct {
	Topic       string `json:"topic"`
	QueueID     int32  `json:"queueId"`
	QueueOffset int64  `json:"queueOffset"`
	MsgID       string `json:"msgId"`
	Duplicate   bool   `json:"duplicate"`
	Error       *struct {
		Code        int    `json:"code"`
		Description string `json:"description"`
	} `json:"error"`
}

// requestWire sends body to subject with a Nats-Msg-Id and decodes the reply.
func requestWire(t *testing.T, url, subject, id, body string) wireAck {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	m := nats.NewMsg(subject)
	m.Header.Set("Nats-Msg-Id", id)
	m.Data = []byte(body)
	reply, err := nc.RequestMsg(m, waitTimeout)
	if err != nil {
		t.Fatal(err)
	}
	var a wireAck
	if err := json.Unmarshal(reply.Data, &a); err != nil {
		t.Fatalf("reply %q: %v", reply.Data, err)
	}
	if a.Error != nil {
		t.Fatalf("reply %q", reply.Data)
	}
	return a
}

// TestDedupeWindowSurvivesRestart: README promises that the same Nats-Msg-Id sent again within
// the dedupe window stores nothing; docs/SCALE-OUT.md tells publishers to retry with the same id
// while an engine restarts. So the window must hold across a restart, after a SIGKILL and after
// a clean SIGTERM alike: the resend is answered as a duplicate at the first copy's position,
// and the queue still holds one message (`engine offsets`).
func TestDedupeWindowSurvivesRestart(t *testing.T) {
	for _, stop := range []syscall.Signal{syscall.SIGKILL, syscall.SIGTERM} {
		t.Run(stop.String(), func(t *testing.T) {
			dir := t.TempDir()
			c, url, _ := runEmbedded(t, dir)
			first := requestWire(t, url, "orders.eu", "order-1", "hello")
			if first.Duplicate || first.QueueOffset != 0 {
				t.Fatalf("first send: %+v", first)
			}
			c.signal(stop)
			c.wait()
			c, url, _ = runEmbedded(t, dir)
			again := requestWire(t, url, "orders.eu", "order-1", "hello")
			if !again.Duplicate || again != (wireAck{Topic: first.Topic, QueueID: first.QueueID, QueueOffset: first.QueueOffset,
				MsgID: first.MsgID, Duplicate: true}) {
				t.Fatalf("resend after a restart: %+v, want the first copy %+v as a duplicate", again, first)
			}
			other := requestWire(t, url, "orders.eu", "order-2", "world")
			if other.Duplicate {
				t.Fatalf("a new id answered as a duplicate: %+v", other)
			}
			c.signal(syscall.SIGTERM)
			if code := c.wait(); code != 0 {
				t.Fatalf("exit %d", code)
			}
			out := runCLI(t, "offsets", "--store", dir, "--topic", "orders_eu", "--json", "--commit-log-size", fmt.Sprint(commitLogSize),
				"--cq-units", fmt.Sprint(cqUnits), "--index-slots", "1024", "--index-entries", "8192")
			var total int64
			for _, line := range splitLines(out) {
				var q struct{ MinOffset, MaxOffset int64 }
				if err := json.Unmarshal([]byte(line), &q); err != nil {
					t.Fatalf("offsets line %q: %v", line, err)
				}
				total += q.MaxOffset - q.MinOffset
			}
			if total != 2 {
				t.Fatalf("the topic holds %d messages, want 2 (order-1 once, order-2):\n%s", total, out)
			}
		})
	}
}
