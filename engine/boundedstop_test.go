package engine

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketstore/engine/internal/vfs"
)

// TestBoundedStopWithDispatchBacklog: a stop ends within DispatchStopTimeout whatever dispatch
// still has to do. Here every ConsumeQueue file takes at least 10 ms to create (an injected
// latency standing for a slow disk, not a wait for anything), and 600 messages each open a
// topic of their own: at least 6 s of dispatch behind the writer. Close returns well before
// that, says how much it left, and writes a checkpoint that says so; the next start dispatches
// the rest from it, and every message is then in its ConsumeQueue.
func TestBoundedStopWithDispatchBacklog(t *testing.T) {
	const topics = 600
	const createLatency = 10 * time.Millisecond
	dir := t.TempDir()
	var logs bytes.Buffer
	opts := testOptions(t, dir)
	opts.Logger = zerolog.New(&logs).Level(zerolog.WarnLevel)
	opts.FS = vfs.NewFaulty(vfs.Default, func(op vfs.Op, name string) error {
		if op == vfs.OpCreateSegment && strings.Contains(name, "consumequeue") {
			time.Sleep(createLatency)
		}
		return nil
	})
	opts.DispatchStopTimeout = 200 * time.Millisecond
	e := mustOpen(t, opts)
	msgs := make([]Message, topics)
	for i := range msgs {
		msgs[i] = Message{Topic: fmt.Sprintf("dev_%04d", i), Body: []byte("21.5")}
	}
	putStart := time.Now()
	res, err := e.Put(context.Background(), msgs...)
	t.Logf("put in %v", time.Since(putStart))
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("message %d: %v", i, r.Err)
		}
	}
	start := time.Now()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	backlog := topics * createLatency
	t.Logf("closed in %v with at least %v of dispatch to do", took, backlog)
	if took >= backlog/2 {
		t.Fatalf("Close took %v: it waited for dispatch (at least %v) instead of stopping after %v", took, backlog,
			opts.DispatchStopTimeout)
	}
	if !strings.Contains(logs.String(), "stopped before dispatch caught up") {
		t.Fatalf("no word of what was left:\n%s", logs.String())
	}

	opts.FS = vfs.Default
	opts.Logger = zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	openStart := time.Now()
	e = mustOpen(t, opts)
	defer e.Close()
	t.Logf("reopened in %v", time.Since(openStart))
	rec := e.Recovery()
	if !rec.CleanExit || !rec.FromCheckpoint || rec.Records == 0 || rec.Records >= topics {
		t.Fatalf("recovery %+v: want a clean exit whose checkpoint leaves part (not all) of the records to dispatch", rec)
	}
	for i := range msgs {
		if q := e.cq.Find(msgs[i].Topic, 0); q == nil || q.MaxOffset() != 1 {
			t.Fatalf("topic %s: not dispatched after the restart", msgs[i].Topic)
		}
	}
}

// TestStopSyncsDoNotGrowWithNewTopics: issue 27, a stop after many new topics. Counted through
// the vfs seam, the syncs a stop makes (file, segment and directory syncs, syncs of the whole
// file system) are as many after 2,000 new topics as after 100: the last checkpoint makes the
// ConsumeQueues' files and their new directories durable with one sync of the file system
// rather than one sync each (4,001 of them for 2,000 topics, each a journal commit: 20,000
// topics made a stop take 7 to 18 s). The store stays whole: a crash right after the stop (only
// what was synced survives) keeps every message in its queue. And the log says what the stop
// waits on.
func TestStopSyncsDoNotGrowWithNewTopics(t *testing.T) {
	counts := map[int]int64{}
	for _, topics := range []int{100, 2000} {
		mem := vfs.NewMem()
		var counting atomic.Bool
		var syncs atomic.Int64
		var logs lockedLog
		opts := testOptions(t, "/store")
		opts.Logger = zerolog.New(&logs).Level(zerolog.InfoLevel)
		opts.CQFlushInterval, opts.CQFlushThoroughInterval = time.Hour, time.Hour // the stop's flush alone
		opts.FS = vfs.NewFaulty(mem, func(op vfs.Op, _ string) error {
			switch op {
			case vfs.OpSyncDir, vfs.OpSegmentSync, vfs.OpFileSync, vfs.OpSyncFS:
				if counting.Load() {
					syncs.Add(1)
				}
			}
			return nil
		})
		e := mustOpen(t, opts)
		msgs := make([]Message, topics)
		for i := range msgs {
			msgs[i] = Message{Topic: fmt.Sprintf("dev_%04d", i), Body: []byte("21.5")}
		}
		for i := 0; i < topics; i += 100 {
			res, err := e.Put(context.Background(), msgs[i:i+100]...)
			if err != nil {
				t.Fatal(err)
			}
			for j, r := range res {
				if r.Err != nil {
					t.Fatalf("message %d: %v", i+j, r.Err)
				}
			}
		}
		if err := e.WaitDispatched(context.Background(), e.Offsets().Written); err != nil {
			t.Fatal(err)
		}
		counting.Store(true)
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
		counting.Store(false)
		counts[topics] = syncs.Load()
		t.Logf("%d new topics: the stop made %d syncs", topics, counts[topics])
		if !strings.Contains(logs.String(), `"message":"stopping: waiting for the pipeline to drain"`) ||
			!strings.Contains(logs.String(), `"message":"store closed"`) {
			t.Fatalf("the stop did not say what it waits on:\n%s", logs.String())
		}

		opts.FS, opts.Logger = mem.SyncedImage(), zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
		e = mustOpen(t, opts)
		for i := range msgs {
			if q := e.cq.Find(msgs[i].Topic, 0); q == nil || q.MaxOffset() != 1 {
				t.Fatalf("%d topics: topic %s lost by a crash after the stop", topics, msgs[i].Topic)
			}
		}
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if counts[2000] > counts[100] {
		t.Fatalf("the stop's syncs grew with the new topics: %d for 100, %d for 2,000", counts[100], counts[2000])
	}
}
