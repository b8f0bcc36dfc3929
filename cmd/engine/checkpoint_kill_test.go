package main

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// rocketMQCheckpoint reads the checkpoint as RocketMQ's StoreCheckpoint does: three big-endian
// longs (physicMsgTimestamp, logicsMsgTimestamp, indexMsgTimestamp) at the start of the file.
// Its abnormal recovery starts at the newest CommitLog file whose first record is no later than
// min(physic, logics) - 3 s, and drops every index file that ends after indexMsgTimestamp.
func rocketMQCheckpoint(t *testing.T, dir string) (physic, logics, index int64) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "checkpoint"))
	if err != nil {
		t.Fatalf("no checkpoint for RocketMQ to recover from: %v", err)
	}
	if len(b) < 24 {
		t.Fatalf("checkpoint of %d bytes", len(b))
	}
	be := binary.BigEndian
	return int64(be.Uint64(b)), int64(be.Uint64(b[8:])), int64(be.Uint64(b[16:]))
}

// storeTimestamps returns the earliest and latest store timestamps the acks gave.
func storeTimestamps(groups [][]sent) (first, last int64) {
	for _, g := range groups {
		for _, s := range g {
			if first == 0 || s.ack.StoreTimestamp < first {
				first = s.ack.StoreTimestamp
			}
			last = max(last, s.ack.StoreTimestamp)
		}
	}
	return first, last
}

// TestKillInTheFirstSecondsLeavesACheckpointForRocketMQ: a kill -9 within the first seconds of
// a run, long before the first thorough flush (set to an hour here), leaves a checkpoint whose
// RocketMQ fields are sound (no later than any message stored in that run, so RocketMQ's
// abnormal recovery re-dispatches them all) and, on a store that held messages before, usable:
// no earlier than the newest message of the runs before, so that RocketMQ neither goes back to
// the first file nor drops an index file it does not need to. Before, a run after a clean stop
// checkpointed zeros at start.
func TestKillInTheFirstSecondsLeavesACheckpointForRocketMQ(t *testing.T) {
	dir := t.TempDir()
	args := append(storeArgs(dir), "--listen", "127.0.0.1:-1", "--cq-flush-thorough-interval", "1h")
	start := func() (*child, string) {
		c := startChild(t, args...)
		running, _ := c.waitLog(0, "engine running")
		url, _ := running["nats"].(string)
		return c, url
	}
	kill := func(c *child) {
		c.signal(syscall.SIGKILL)
		if code := c.wait(); code == 0 {
			t.Fatal("exit code 0 after SIGKILL")
		}
	}
	sound := func(run string, stored [][]sent, before int64) {
		t.Helper()
		first, _ := storeTimestamps(stored)
		physic, logics, index := rocketMQCheckpoint(t, dir)
		for name, ts := range map[string]int64{"physicMsgTimestamp": physic, "logicsMsgTimestamp": logics, "indexMsgTimestamp": index} {
			if ts > first {
				t.Fatalf("%s: %s %d is later than the first message of the run (%d): RocketMQ would skip messages", run, name, ts, first)
			}
			if ts < before {
				t.Fatalf("%s: %s %d is earlier than the newest message stored before the run (%d): RocketMQ would recover "+
					"from further back than it needs, dropping index files", run, name, ts, before)
			}
		}
	}

	c, url := start()
	fresh := publish(t, url, 0, 4, 5)
	kill(c)
	sound("fresh store, kill -9", fresh, 0)

	c, url = start()
	c.signal(syscall.SIGTERM)
	if code := c.wait(); code != 0 {
		t.Fatalf("exit code %d after SIGTERM", code)
	}
	_, last := storeTimestamps(fresh)

	c, url = start()
	more := publish(t, url, 1, 4, 5)
	kill(c)
	sound("restart after a clean stop, kill -9", more, last)
}
