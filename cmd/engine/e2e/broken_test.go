package e2e

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rocketstore/engine/internal/rmqfixture"
)

// Promises issue 16 listed as broken. Each test was written from the promise and failed against
// the code it was written on; the fixes are in, and the tests keep them (docs/PROMISES.md lists
// them).

// TestDedupeAcrossRestart: README: "Sending the same Nats-Msg-Id again within the dedupe window
// (2 minutes) stores nothing and answers "duplicate":true with the first copy's position", and
// docs/SCALE-OUT.md tells publishers to retry with the same id exactly when an engine restarts.
func TestDedupeAcrossRestart(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"SIGKILL", "SIGTERM"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			e := startEngine(t, t.TempDir())
			first := stored(t, connect(t, e.url), readmeMsgs()[0])
			if how == "SIGKILL" {
				e.kill()
			} else {
				e.stop()
			}
			e = e.restart(t)
			again, raw := request(t, connect(t, e.url), readmeMsgs()[0])
			if !again.Duplicate || again.MsgID != first.MsgID || again.QueueOffset != first.QueueOffset {
				t.Fatalf("the same Nats-Msg-Id after a %s: %s, want a duplicate of %+v", how, raw, first)
			}
			e.stop()
			if got := readQueue(t, offline(e.dir), first.Topic, first.QueueID); len(got) != 1 {
				t.Fatalf("after a %s and a resend, the queue holds %d messages, want 1", how, len(got))
			}
		})
	}
}

// TestOfflineReadsWithoutSizeFlags: README: offline "every read command works"; issue 16 item 12:
// a segment's size is its file's size, so an offline read needs no size flag. Today `get` on a
// store written with small segments prints "no messages" (exit 0) without the flags, while
// `offsets` says the queue holds the message. A size flag that contradicts the files exits 2.
func TestOfflineReadsWithoutSizeFlags(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := startEngine(t, dir)
	a := stored(t, connect(t, e.url), readmeMsgs()[0])
	e.stop()
	for _, args := range [][]string{
		{"get", "--topic", a.Topic, "--queue", itoa(a.QueueID), "--json"},
		{"msg", a.MsgID, "--json"},
		{"query", "--topic", a.Topic, "--key", "order-1", "--begin=-1h", "--json"},
	} {
		got := ndjson(t, mustCLI(t, append(args, "--store", dir)...))
		if len(got) != 1 || got[0]["msgId"] != a.MsgID {
			t.Errorf("%v --store without size flags: %v, want the message", args, got)
		}
	}
	// A size flag that contradicts the files is a usage error naming the size.
	r := runCLI(t, "get", "--topic", a.Topic, "--queue", itoa(a.QueueID), "--store", dir, "--commit-log-size", "1GiB")
	if r.code != 2 || !strings.Contains(r.stderr, "4194304") {
		t.Errorf("get --commit-log-size 1GiB on a store of 4 MiB segments: exit %d, %q; want 2 naming the size", r.code, r.stderr)
	}
}

// TestVerifyRocketMQStore: README "Compatible" and issue 16 item 7: `engine verify` on a store
// RocketMQ wrote (no __CRC32# property) says it is consistent, and `engine repair` removes
// nothing of it; `engine run` keeps every record.
func TestVerifyRocketMQStore(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rmqfixture.Copy(t, "store-5000", dir)
	sizes := []string{"--commit-log-size", "4MiB", "--cq-units", "500", "--index-slots", "2000", "--index-entries", "8000"}
	if r := runCLI(t, append([]string{"verify", "--store", dir}, sizes...)...); r.code != 0 {
		t.Fatalf("verify of RocketMQ's store: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	before := ndjson(t, mustCLI(t, append([]string{"offsets", "--topic", "jrev_a", "--json", "--store", dir}, sizes...)...))
	if r := runCLI(t, append([]string{"repair", "--store", dir}, sizes...)...); r.code != 0 {
		t.Fatalf("repair of RocketMQ's store: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	after := ndjson(t, mustCLI(t, append([]string{"offsets", "--topic", "jrev_a", "--json", "--store", dir}, sizes...)...))
	if fmt.Sprint(before) != fmt.Sprint(after) {
		t.Fatalf("repair changed RocketMQ's queues: %v, then %v", before, after)
	}
}

// TestCheckpointRewrittenByRocketMQ: issue 16 item 8: RocketMQ rewrites bytes 0-39 of the
// checkpoint and keeps the rest; a checkpoint RocketMQ rewrote is a valid checkpoint: verify
// accepts it and the next start keeps every index file.
func TestCheckpointRewrittenByRocketMQ(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := startEngine(t, dir)
	a := stored(t, connect(t, e.url), readmeMsgs()[0])
	e.stop()
	// As RocketMQ's shutdown does: its five timestamps again, here its confirmPhyOffset (bytes
	// 32-39) set to the CommitLog's end; bytes 40 on as they were.
	path := filepath.Join(dir, "checkpoint")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	binary.BigEndian.PutUint64(b[32:40], uint64(a.CommitLogOffset+184))
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if r := runCLI(t, append([]string{"verify", "--store", dir}, sizeArgs...)...); r.code != 0 {
		t.Fatalf("verify after RocketMQ rewrote the checkpoint: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	e = startEngine(t, dir)
	if dropped, _ := e.recovered["index_dropped"].([]any); len(dropped) != 0 || e.recovered["from_checkpoint"] != true {
		t.Fatalf("the start after RocketMQ rewrote the checkpoint dropped index files or did not use its offsets: %v", e.recovered)
	}
	e.stop()
}
