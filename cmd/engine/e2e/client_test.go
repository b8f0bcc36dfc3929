package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// The harness's other half: the engine's commands run to their end and their output parsed,
// and a client of the documented wire format (plain nats.go and encoding/json).

// result is what a command printed and its exit code.
type result struct {
	stdout, stderr string
	code           int
}

// runCLI runs the binary to its end (bounded) with args and returns what it printed.
func runCLI(t *testing.T, args ...string) result {
	t.Helper()
	return runCLIEnv(t, nil, args...)
}

func runCLIEnv(t *testing.T, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, engineBin, args...)
	cmd.Env = childEnv(env)
	cmd.Dir = t.TempDir()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("engine %v did not end within %v; stderr:\n%s", args, waitTimeout, errb.String())
	}
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("engine %v: %v", args, err)
	}
	r := result{stdout: out.String(), stderr: errb.String(), code: cmd.ProcessState.ExitCode()}
	if strings.Contains(r.stderr, "WARNING: DATA RACE") {
		t.Errorf("engine %v reported a data race:\n%s", args, r.stderr)
	}
	return r
}

// mustCLI runs a command that must succeed (exit 0) and returns its stdout.
func mustCLI(t *testing.T, args ...string) string {
	t.Helper()
	r := runCLI(t, args...)
	if r.code != 0 {
		t.Fatalf("engine %v: exit %d, stderr:\n%s", args, r.code, r.stderr)
	}
	return r.stdout
}

// ndjson parses one JSON object per line.
func ndjson(t *testing.T, out string) []map[string]any {
	t.Helper()
	var objs []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("not a JSON object: %q: %v", line, err)
		}
		objs = append(objs, m)
	}
	return objs
}

// offline are the read commands' arguments for a store directory written with sizeArgs.
func offline(dir string) []string {
	return append([]string{"--store", dir}, sizeArgs...)
}

// online are the read commands' arguments for a running engine.
func online(url string) []string { return []string{"--nats", url} }

// connect is a plain nats.go connection, closed at the end of the test.
func connect(t *testing.T, url string) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(url, nats.MaxReconnects(0), nats.Timeout(waitTimeout))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// ack is the reply to a published request, as README.md documents it: the position of the
// stored message, or an error.
type ack struct {
	Topic           string     `json:"topic"`
	QueueID         int32      `json:"queueId"`
	QueueOffset     int64      `json:"queueOffset"`
	MsgID           string     `json:"msgId"`
	CommitLogOffset int64      `json:"commitLogOffset"`
	StoreTimestamp  int64      `json:"storeTimestamp"`
	Duplicate       bool       `json:"duplicate"`
	Error           *wireError `json:"error"`
}

// wireError is `{"error":{"code":N,"description":"..."}}`.
type wireError struct {
	Code        int    `json:"code"`
	Description string `json:"description"`
}

// msg is a NATS message with headers given as name, value pairs.
func msg(subject string, body string, hdr ...string) *nats.Msg {
	m := nats.NewMsg(subject)
	m.Data = []byte(body)
	for i := 0; i+1 < len(hdr); i += 2 {
		m.Header.Add(hdr[i], hdr[i+1])
	}
	return m
}

// request sends m as a request and decodes the reply; it also returns the reply's raw bytes.
func request(t *testing.T, nc *nats.Conn, m *nats.Msg) (ack, []byte) {
	t.Helper()
	reply, err := nc.RequestMsg(m, waitTimeout)
	if err != nil {
		t.Fatalf("request on %s: %v", m.Subject, err)
	}
	var a ack
	if err := json.Unmarshal(reply.Data, &a); err != nil {
		t.Fatalf("reply %q: %v", reply.Data, err)
	}
	return a, reply.Data
}

// stored sends m as a request that must be acked.
func stored(t *testing.T, nc *nats.Conn, m *nats.Msg) ack {
	t.Helper()
	a, raw := request(t, nc, m)
	if a.Error != nil || a.Topic == "" {
		t.Fatalf("request on %s: %s, want an ack", m.Subject, raw)
	}
	return a
}

// httpGet fetches url and returns the status code and the body.
func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	client := &http.Client{Timeout: waitTimeout}
	resp, err := client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// freePort is a loopback port nothing listens on right now.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// fileExists says whether a path exists.
func fileExists(t *testing.T, path string) bool {
	t.Helper()
	_, err := os.Stat(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return err == nil
}

// itoa is a number as a command-line argument.
func itoa[T ~int | ~int32 | ~int64](n T) string { return fmt.Sprint(n) }

// b64 is a body as the read API's JSON carries it.
func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// recv takes the next message from ch, or fails the test after waitTimeout.
func recv[T any](t *testing.T, what string, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitTimeout):
		t.Fatalf("%s: nothing within %v", what, waitTimeout)
		var zero T
		return zero
	}
}

// getNoFail fetches url; it returns the status code, or 0 when nothing answers (yet).
func getNoFail(url string) (int, string) {
	client := &http.Client{Timeout: waitTimeout}
	resp, err := client.Get(url)
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
