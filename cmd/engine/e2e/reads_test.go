package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// README.md "Read it back": the read commands' options, their failures and exit codes, offline
// and online, and replay.

// TestReadErrors: a command that fails says why on stderr and exits 1 (an unknown topic, with
// the README's hint; an offset out of range, with the queue's range; a message not found; no
// engine answering); usage errors exit 2 (a bad flag, a malformed message id or time).
func TestReadErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := startEngine(t, dir)
	nc := connect(t, e.url)
	a := stored(t, nc, readmeMsgs()[0])
	waitReadable(t, nc, a)
	noEngine := fmt.Sprintf("nats://127.0.0.1:%d", freePort(t))
	for _, src := range [][]string{offline(dir), online(e.url)} {
		for _, c := range []struct {
			name string
			args []string
			code int
			want []string
		}{
			{"unknown topic", []string{"get", "--topic", "orders.eu", "--queue", "2"}, 1, []string{`topic "orders.eu" has no queues`, `did you mean "orders_eu"`}},
			{"offset out of range", []string{"get", "--topic", "orders_eu", "--queue", "2", "--offset", "5"}, 1, []string{"0 to 0"}},
			{"message not found", []string{"msg", "7F00000100002A9F00000000000FFFFF"}, 1, []string{"not found"}},
			{"bad flag", []string{"get", "--topic", "orders_eu", "--queue", "2", "--no-such-flag"}, 2, []string{"--no-such-flag"}},
			{"malformed message id", []string{"msg", "not-a-message-id"}, 2, []string{"not-a-message-id"}},
			{"malformed time", []string{"query", "--topic", "orders_eu", "--key", "order-1", "--begin=yesterday"}, 2, []string{"yesterday"}},
		} {
			r := runCLI(t, append(c.args, src...)...)
			if r.code != c.code {
				t.Errorf("%s (%s): exit %d, want %d; stderr %q", c.name, src[0], r.code, c.code, r.stderr)
			}
			for _, w := range c.want {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("%s (%s): stderr %q does not say %q", c.name, src[0], r.stderr, w)
				}
			}
		}
	}
	if r := runCLI(t, "get", "--topic", "orders_eu", "--queue", "2", "--nats", noEngine); r.code != 1 || r.stderr == "" {
		t.Errorf("no engine answering: exit %d, stderr %q, want 1 and why", r.code, r.stderr)
	}
	// $NATS_URL, as with the NATS CLI, when neither --store nor --nats is given.
	r := runCLIEnv(t, []string{"NATS_URL=" + e.url}, "get", "--topic", "orders_eu", "--queue", "2", "--json")
	if got := ndjson(t, r.stdout); r.code != 0 || len(got) != 1 || got[0]["msgId"] != a.MsgID {
		t.Errorf("get with $NATS_URL: exit %d, %s %s", r.code, r.stdout, r.stderr)
	}
}

// TestGetOptions: get --offset N, --count K, --tags a,b, and --wait at the head of the queue,
// which returns as soon as the next message is stored.
func TestGetOptions(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := startEngine(t, dir)
	nc := connect(t, e.url)
	var acks []ack
	for i := range 10 {
		acks = append(acks, stored(t, nc, msg("opts.a", fmt.Sprint(i), "Rmq-Keys", "one", "Rmq-Tags", []string{"a", "b", "c"}[i%3])))
	}
	waitReadable(t, nc, acks[len(acks)-1])
	q := acks[0].QueueID
	get := func(src []string, args ...string) []map[string]any {
		return ndjson(t, mustCLI(t, append(append([]string{"get", "--topic", "opts_a", "--queue", itoa(q), "--json"}, args...), src...)...))
	}
	bodies := func(ms []map[string]any) string {
		var b []string
		for _, m := range ms {
			b = append(b, m["body"].(string))
		}
		return strings.Join(b, ",")
	}
	for _, src := range [][]string{offline(dir), online(e.url)} {
		if got := get(src, "--offset", "4", "--count", "3"); bodies(got) != strings.Join([]string{b64("4"), b64("5"), b64("6")}, ",") {
			t.Errorf("--offset 4 --count 3 (%s): %v", src[0], got)
		}
		if got := get(src, "--tags", "a,c"); len(got) != 7 {
			t.Errorf("--tags a,c (%s): %d messages, want 7", src[0], len(got))
		}
		if got := get(src, "--count", "100"); len(got) != 10 {
			t.Errorf("--count 100 (%s): %d messages", src[0], len(got))
		}
	}

	// --wait at the head: the message is published once the command's request is on its way
	// (seen by a plain subscriber to the API's subject, beside the engine's queue group), so the
	// command asked before the message existed.
	seen := make(chan *nats.Msg, 4)
	spy, err := nc.ChanSubscribe("$RS.API.get", seen)
	if err != nil {
		t.Fatal(err)
	}
	defer spy.Unsubscribe()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, engineBin, "get", "--topic", "opts_a", "--queue", itoa(q), "--offset", "10", "--wait", "50s", "--json", "--nats", e.url)
	cmd.Env = childEnv(nil)
	out := make(chan []byte, 1)
	go func() {
		b, _ := cmd.Output()
		out <- b
	}()
	for {
		req := recv(t, "get --wait's request", seen)
		var r struct {
			WaitMs int64 `json:"waitMs"`
		}
		if json.Unmarshal(req.Data, &r) == nil && r.WaitMs > 0 {
			break
		}
	}
	late := stored(t, nc, msg("opts.a", "late", "Rmq-Keys", "one"))
	got := ndjson(t, string(recv(t, "get --wait's output", out)))
	if len(got) != 1 || got[0]["body"] != b64("late") || got[0]["queueOffset"] != float64(late.QueueOffset) {
		t.Fatalf("get --wait: %v, want the message stored after it started", got)
	}
}

// TestQueryAndOffsetsTimes: query --begin/--end take RFC 3339, Unix ms, now and durations
// relative to now (bounds on the IndexFile's times, which keep whole seconds: the bounds here
// are seconds away from the store times); offsets --time gives each queue's first offset at or
// after a time.
func TestQueryAndOffsetsTimes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := startEngine(t, dir)
	nc := connect(t, e.url)
	first := stored(t, nc, msg("times.a", "1", "Rmq-Keys", "k"))
	second := stored(t, nc, msg("times.a", "2", "Rmq-Keys", "k"))
	waitReadable(t, nc, first, second)
	query := func(args ...string) []map[string]any {
		return ndjson(t, mustCLI(t, append(append([]string{"query", "--topic", "times_a", "--key", "k", "--json"}, args...), online(e.url)...)...))
	}
	hourAgo := time.UnixMilli(first.StoreTimestamp).Add(-time.Hour)
	for _, c := range []struct {
		args []string
		n    int
	}{
		{[]string{"--begin=-1h"}, 2},
		{[]string{"--begin=-1h", "--end=now"}, 2},
		{[]string{"--begin", fmt.Sprint(hourAgo.UnixMilli())}, 2},
		{[]string{"--begin", hourAgo.UTC().Format(time.RFC3339)}, 2},
		{[]string{"--begin", hourAgo.Format(time.RFC3339Nano), "--end", fmt.Sprint(first.StoreTimestamp - 5000)}, 0},
		{[]string{"--begin=+1h"}, 0}, // from an hour ahead: nothing yet
		{[]string{"--begin", hourAgo.Add(2 * time.Hour).Format(time.RFC3339)}, 0},
	} {
		if got := query(c.args...); len(got) != c.n {
			t.Errorf("query %v: %d messages, want %d: %v", c.args, len(got), c.n, got)
		}
	}
	// Newest first.
	if got := query("--begin=-1h"); len(got) != 2 || got[0]["msgId"] != second.MsgID || got[1]["msgId"] != first.MsgID {
		t.Errorf("query: not newest first: %v", got)
	}
	// offsets: each queue's bounds and its first and last store times. Messages on one key (one
	// queue) until the engine's clock has moved on, so that the two times differ.
	b := []ack{stored(t, nc, msg("times.b", "0", "Rmq-Keys", "k"))}
	for i := 1; b[len(b)-1].StoreTimestamp == b[0].StoreTimestamp; i++ {
		if i == 100_000 {
			t.Fatal("the store time did not move in 100,000 messages")
		}
		b = append(b, stored(t, nc, msg("times.b", fmt.Sprint(i), "Rmq-Keys", "k")))
	}
	last := b[len(b)-1]
	waitReadable(t, nc, last)
	offs := ndjson(t, mustCLI(t, append([]string{"offsets", "--topic", "times_b", "--json"}, online(e.url)...)...))
	if len(offs) != 1 || offs[0]["minOffset"] != 0.0 || offs[0]["maxOffset"] != float64(len(b)) ||
		offs[0]["minStoreTime"] != float64(b[0].StoreTimestamp) || offs[0]["maxStoreTime"] != float64(last.StoreTimestamp) {
		t.Errorf("offsets: %v, want [0, %d) stored from %d to %d", offs, len(b), b[0].StoreTimestamp, last.StoreTimestamp)
	}
	// offsets --time: from an hour ago, each queue's first offset; an hour ahead, the end.
	for _, c := range []struct {
		at   string
		want float64
	}{{"-1h", 0}, {"+1h", 2}} {
		offs := ndjson(t, mustCLI(t, append([]string{"offsets", "--topic", "times_a", "--time=" + c.at, "--json"}, online(e.url)...)...))
		if len(offs) != 1 || offs[0]["queueId"] != float64(first.QueueID) || offs[0]["offset"] != c.want {
			t.Errorf("offsets --time=%s: %v, want queue %d at offset %v", c.at, offs, first.QueueID, c.want)
		}
	}
}

// TestReplayPaced: `engine replay --topic T --offset 0 --to SUBJECT --rate R` has the engine
// publish the topic onto SUBJECT (online only: offline it is a usage error), and the command
// follows it to its end.
func TestReplayPaced(t *testing.T) {
	t.Parallel()
	e := startEngine(t, t.TempDir(), "--subjects", "orders.>")
	nc := connect(t, e.url)
	var acks []ack
	for i := range 6 {
		acks = append(acks, stored(t, nc, msg("orders.replay", fmt.Sprint(i), "Rmq-Keys", "one")))
	}
	waitReadable(t, nc, acks[5])
	got := make(chan *nats.Msg, 16)
	sub, err := nc.ChanSubscribe("replayed.orders", got)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	out := mustCLI(t, "replay", "--topic", "orders_replay", "--offset", "0", "--to", "replayed.orders", "--rate", "1000", "--json", "--nats", e.url)
	var outcome map[string]any
	if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &outcome); err != nil {
		t.Fatalf("replay --json: %q: %v", out, err)
	}
	for i := range 6 {
		m := recv(t, "a replayed message", got)
		if string(m.Data) != fmt.Sprint(i) {
			t.Fatalf("replayed message %d: %q", i, m.Data)
		}
	}
	if r := runCLI(t, "replay", "--topic", "orders_replay", "--offset", "0", "--to", "x", "--store", e.dir); r.code != 2 || !strings.Contains(r.stderr, "online only") {
		t.Errorf("offline replay: exit %d %q, want 2 and online only", r.code, r.stderr)
	}
}
