package engine

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketstore/engine/internal/reader"
	"github.com/rocketstore/engine/internal/store/checkpoint"
	"github.com/rocketstore/engine/internal/store/meta"
	"github.com/rocketstore/engine/internal/store/subjecttags"
	"github.com/rocketstore/engine/internal/vfs"
	"github.com/rocketstore/engine/internal/wire"
	"github.com/rocketstore/engine/stages/ingress"
	"github.com/rocketstore/engine/stages/ingress/route"
)

// Each file the engine writes on its own, periodically or at a start or stop, at the limit: a
// disk with no space for it (ENOSPC through the vfs seam, for that file alone). None may stop
// the engine, fail a start, or make a stop unclean. TestDiskFullZeroFreeTmpfs does the same on
// a real file system with no byte free.

// noSpaceFS is a Mem behind a Faulty that fails with ENOSPC every operation match selects while
// it is on, and tells each one refused or let through on those channels, so that a test waits
// for the engine to have tried.
type noSpaceFS struct {
	*vfs.Faulty
	mem             *vfs.Mem
	on              atomic.Bool
	refused, passed chan string
}

func newNoSpaceFS(match func(op vfs.Op, name string) bool) *noSpaceFS {
	f := &noSpaceFS{mem: vfs.NewMem(), refused: make(chan string, 4096), passed: make(chan string, 4096)}
	f.Faulty = vfs.NewFaulty(f.mem, func(op vfs.Op, name string) error {
		if !match(op, name) {
			return nil
		}
		what := op.String() + " " + name
		if f.on.Load() {
			tell(f.refused, what)
			return fmt.Errorf("%s: %w", name, syscall.ENOSPC)
		}
		tell(f.passed, what)
		return nil
	})
	return f
}

func tell(ch chan string, what string) {
	select {
	case ch <- what:
	default:
	}
}

// drain forgets what ch was told so far.
func drain(ch chan string) {
	for len(ch) > 0 {
		<-ch
	}
}

// waitOps waits until ch was told n more operations, failing if the engine stops first.
func waitOps(t *testing.T, e *Engine, ch chan string, n int) {
	t.Helper()
	deadline := time.After(time.Minute)
	for i := 0; i < n; i++ {
		select {
		case <-ch:
		case <-e.Done():
			t.Fatalf("the engine stopped: %v", e.Err())
		case <-deadline:
			t.Fatalf("%d of %d operations within a minute", i, n)
		}
	}
}

func noSpaceOptions(t *testing.T, fs vfs.FS, logs *lockedLog) Options {
	o := testOptions(t, "/store")
	o.FS = fs
	o.Logger = zerolog.New(zerolog.MultiLevelWriter(logs, zerolog.NewTestWriter(t))).Level(zerolog.WarnLevel)
	return o
}

// lockedLog is the log lines so far, safe for the engine's goroutines and the test.
type lockedLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestCheckpointNoSpace: the checkpoint cannot be written (ENOSPC on every write of it, as on a
// file system that copies on write): the engine goes on, acks writes, logs it once, and writes
// the checkpoint as soon as it can again; the stop is clean and the next start has everything.
func TestCheckpointNoSpace(t *testing.T) {
	cp := "/store/" + checkpoint.FileName
	fs := newNoSpaceFS(func(op vfs.Op, name string) bool {
		return (op == vfs.OpWrite || op == vfs.OpFileSync) && strings.HasPrefix(name, cp)
	})
	var logs lockedLog
	o := noSpaceOptions(t, fs, &logs)
	o.CQFlushInterval, o.CQFlushThoroughInterval = 2*time.Millisecond, 2*time.Millisecond
	e := mustOpen(t, o)
	defer func() { e.Close() }()
	acked := retPut(t, e, "T", 10, 0)
	fs.on.Store(true)
	waitOps(t, e, fs.refused, 5)
	acked = append(acked, retPut(t, e, "T", 10, len(acked))...)
	waitOps(t, e, fs.refused, 5)
	if err := e.Failure(); err != nil {
		t.Fatalf("the engine failed: %v", err)
	}
	if n := strings.Count(logs.String(), "no disk space to write the checkpoint"); n != 1 {
		t.Fatalf("logged %d times:\n%s", n, logs.String())
	}
	fs.on.Store(false)
	drain(fs.passed)
	waitOps(t, e, fs.passed, 4) // a whole save: two writes, two fsyncs
	if c, err := checkpoint.Load(fs.mem.SyncedImage(), cp); err != nil || c.Ext.DurableOffset < acked[len(acked)-1].PhysOffset {
		t.Fatalf("checkpoint once space is back: %+v, %v", c, err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e = mustOpen(t, o)
	checkAckedOnly(t, e, acked)
}

// TestConsumerOffsetsNoSpace: the consumer offsets (config/consumerOffset.journal, folded into
// consumerOffset.json at a stop) cannot be written: a commit is refused to whoever made it, the
// engine goes on, the stop is clean although the journal cannot be folded (it is kept, and says
// so), and the next start finds every commit that was answered.
func TestConsumerOffsetsNoSpace(t *testing.T) {
	fs := newNoSpaceFS(func(op vfs.Op, name string) bool {
		return op == vfs.OpWrite && strings.Contains(name, "consumerOffset")
	})
	var logs lockedLog
	o := noSpaceOptions(t, fs, &logs)
	e := mustOpen(t, o)
	retPut(t, e, "T", 5, 0)
	if err := e.CommitOffset("g", "T", 0, 3); err != nil {
		t.Fatal(err)
	}
	fs.on.Store(true)
	if err := e.CommitOffset("g", "T", 0, 4); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("a commit with no space for it: %v, want ENOSPC", err)
	}
	if err := e.Failure(); err != nil {
		t.Fatalf("the engine failed: %v", err)
	}
	if err := e.Close(); err != nil {
		t.Fatalf("stop with no space for the consumer offsets: %v", err)
	}
	if !strings.Contains(logs.String(), "no disk space to fold the consumer offsets journal") {
		t.Fatalf("not logged:\n%s", logs.String())
	}
	if ok, err := meta.AbortExists(fs.mem, "/store"); ok || err != nil {
		t.Fatalf("abort marker after the stop: %v, %v; want a clean stop", ok, err)
	}
	fs.on.Store(false)
	e = mustOpen(t, o)
	defer e.Close()
	if off, ok := e.FetchOffset("g", "T", 0); !ok || off != 3 {
		t.Fatalf("offset %d, %v after the restart; want 3, the last commit answered", off, ok)
	}
}

// TestSubjectTagsNoSpaceAtServe: a topic declared at serve is new to the store, and
// config/subjectTags.json, which must record it under the subject-tag rule, cannot be written:
// the serve starts anyway with the rule in force, and the file is written once it can be.
func TestSubjectTagsNoSpaceAtServe(t *testing.T) {
	fs := newNoSpaceFS(func(op vfs.Op, name string) bool {
		return op == vfs.OpCreate && strings.Contains(name, subjecttags.FileName)
	})
	var logs lockedLog
	o := noSpaceOptions(t, fs, &logs)
	o.Dir = "/store"
	o.OffsetPersistInterval = 2 * time.Millisecond
	fs.on.Store(true)
	srv := serve(t, o, NATSOptions{Topics: []route.TopicPattern{{Subjects: "device.*.temp", Topic: "device"}}})
	e := srv.Engine
	if !strings.Contains(logs.String(), "no disk space to save the subject-tag rule") {
		t.Fatalf("not logged:\n%s", logs.String())
	}
	res, err := e.Put(t.Context(), Message{Topic: "device", Body: []byte("b"), Tags: "hot",
		Properties: map[string]string{"NATS_SUBJECT": "device.7.temp"}})
	if err != nil || !errors.Is(res[0].Err, subjecttags.ErrTagsNotSubject) {
		t.Fatalf("TAGS other than the subject in a declared topic: %v, %v; want the rule in force", res, err)
	}
	waitOps(t, e, fs.refused, 2) // the retries
	fs.on.Store(false)
	drain(fs.passed)
	waitOps(t, e, fs.passed, 1) // the save began; the stop waits for it (the same stage)
	if err := srv.shutdown(); err != nil {
		t.Fatal(err)
	}
	set, err := subjecttags.Load(fs.mem, "/store")
	if err != nil || !set.Has("device") {
		t.Fatalf("saved set %v, %v; want device", set.Topics(), err)
	}
}

// TestAbortNoSpaceAtOpen: the abort marker's pid cannot be written: the start goes on with an
// empty marker (a crash is still seen as one), and says so.
func TestAbortNoSpaceAtOpen(t *testing.T) {
	fs := newNoSpaceFS(func(op vfs.Op, name string) bool {
		return op == vfs.OpWrite && strings.HasPrefix(path.Base(name), meta.AbortFileName)
	})
	var logs lockedLog
	o := noSpaceOptions(t, fs, &logs)
	fs.on.Store(true)
	e := mustOpen(t, o)
	if ok, err := meta.AbortExists(fs.mem.SyncedImage(), "/store"); !ok || err != nil {
		t.Fatalf("no durable abort marker while running: %v, %v", ok, err)
	}
	if !strings.Contains(logs.String(), "no disk space to write this process's pid into the abort marker") {
		t.Fatalf("not logged:\n%s", logs.String())
	}
	acked := retPut(t, e, "T", 5, 0)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if ok, _ := meta.AbortExists(fs.mem, "/store"); ok {
		t.Fatal("marker left after a clean stop")
	}
	e = mustOpen(t, o)
	defer e.Close()
	checkAckedOnly(t, e, acked)
}

// TestCheckpointNoSpaceAtOpen: a store without a checkpoint file (RocketMQ may leave none) on a
// full disk: the one Open writes after recovery cannot be, and the start goes on.
func TestCheckpointNoSpaceAtOpen(t *testing.T) {
	fs := newNoSpaceFS(func(op vfs.Op, name string) bool {
		return op == vfs.OpWrite && strings.HasPrefix(name, "/store/"+checkpoint.FileName)
	})
	var logs lockedLog
	o := noSpaceOptions(t, fs, &logs)
	e := mustOpen(t, o)
	acked := retPut(t, e, "T", 5, 0)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if err := fs.mem.Remove("/store/" + checkpoint.FileName); err != nil {
		t.Fatal(err)
	}
	fs.on.Store(true)
	e = mustOpen(t, o)
	checkAckedOnly(t, e, acked)
	acked = append(acked, retPut(t, e, "T", 5, len(acked))...)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	fs.on.Store(false)
	e = mustOpen(t, o)
	defer e.Close()
	checkAckedOnly(t, e, acked)
}

// TestRecoveryNoSpace: what recovery must re-dispatch needs a ConsumeQueue file the full disk
// cannot give (its files were lost, the checkpoint says to dispatch from the start): the start
// goes on with dispatch behind, writes are refused (507, and Ready says why) while it waits,
// and once space is back dispatch catches up and new messages take the queue offsets after the
// ones the CommitLog holds, each offset once.
func TestRecoveryNoSpace(t *testing.T) {
	fs := newNoSpaceFS(func(op vfs.Op, name string) bool {
		return op == vfs.OpCreateSegment && strings.HasPrefix(name, "/store/consumequeue/B/")
	})
	var logs lockedLog
	o := noSpaceOptions(t, fs, &logs)
	e := mustOpen(t, o)
	retPut(t, e, "T", 5, 0)
	b := retPut(t, e, "B", 7, 0)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"/store/consumequeue/B/0/00000000000000000000", "/store/consumequeue/B/0", "/store/consumequeue/B"} {
		if err := fs.mem.Remove(name); err != nil {
			t.Fatal(err)
		}
	}
	cpPath := "/store/" + checkpoint.FileName
	c, err := checkpoint.Load(fs.mem, cpPath)
	if err != nil {
		t.Fatal(err)
	}
	c.Ext.DispatchedOffset = 0
	if err := checkpoint.Save(fs.mem, cpPath, c); err != nil {
		t.Fatal(err)
	}

	fs.on.Store(true)
	e = mustOpen(t, o)
	defer func() { e.Close() }()
	r := e.Recovery()
	if r.NoSpace == "" || r.Dispatched != b[0].PhysOffset || e.Offsets().Dispatched != b[0].PhysOffset {
		t.Fatalf("recovery %+v, dispatched %d; want it stopped at B's first record %d", r, e.Offsets().Dispatched, b[0].PhysOffset)
	}
	if !strings.Contains(logs.String(), "no disk space to rebuild the ConsumeQueues") {
		t.Fatalf("not logged:\n%s", logs.String())
	}
	drain(fs.refused)            // recovery's try
	waitOps(t, e, fs.refused, 2) // live dispatch's first two: the first told NoSpace before the retry
	if err := e.Ready(); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("ready while dispatch waits for space: %v", err)
	}
	if res, err := e.Put(t.Context(), Message{Topic: "B", Body: body("B", 0, 7)}); err != nil || ingress.ReplyCode(res[0].Err) != wire.CodeDiskFull {
		t.Fatalf("a write while dispatch waits for space: %+v, %v", res, err)
	}

	fs.on.Store(false)
	if err := e.WaitDispatched(context.Background(), e.Offsets().Written); err != nil {
		t.Fatal(err)
	}
	b = append(b, retPut(t, e, "B", 3, len(b))...)
	for i, r := range b {
		if r.QueueOffset != int64(i) {
			t.Fatalf("B message %d took queue offset %d", i, r.QueueOffset)
		}
	}
	got, err := e.Get(t.Context(), GetRequest{Topic: "B", Max: 64})
	if err != nil || got.Status != reader.Found || len(got.Messages) != len(b) {
		t.Fatalf("B: %v, %d messages, %v; want %d", got.Status, len(got.Messages), err, len(b))
	}
	for i, m := range got.Messages {
		if m.QueueOffset != int64(i) || m.PhysicalOffset != b[i].PhysOffset {
			t.Fatalf("B@%d: offset %d at %d, want at %d", i, m.QueueOffset, m.PhysicalOffset, b[i].PhysOffset)
		}
	}
}
