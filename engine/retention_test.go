package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rocketstore/engine/internal/reader"
	"github.com/rocketstore/engine/internal/store/segment"
	"github.com/rocketstore/engine/internal/vfs"
)

// Retention tests drive passes directly (Stage.Pass with the store clock) on a fake clock
// and a disk use they set, so nothing waits on time: the stage's own timers are pushed out of
// the way with an hour-long CleanInterval and CleanFirstDelay.

// retClock is a store clock the test moves; it also stamps the Mem's mtimes.
type retClock struct {
	mu sync.Mutex
	t  time.Time
}

func newRetClock(t time.Time) *retClock { return &retClock{t: t} }

func (c *retClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *retClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

func (c *retClock) Add(d time.Duration) { c.Set(c.Now().Add(d)) }

// usageFS reports the disk use the test sets (in percent) instead of the real one, unless it
// is negative.
type usageFS struct {
	vfs.FS
	pct atomic.Int64
}

func newUsageFS(fs vfs.FS, pct int) *usageFS {
	u := &usageFS{FS: fs}
	u.pct.Store(int64(pct))
	return u
}

func (u *usageFS) DiskUsage(dir string) (vfs.Usage, error) {
	p := u.pct.Load()
	if p < 0 {
		return u.FS.DiskUsage(dir)
	}
	const total = 100 << 20
	free := uint64(100-p) << 20
	return vfs.Usage{Total: total, Free: free, Avail: free}, nil
}

// local is a time of day in the local zone, which DeleteWhen's hours are in.
func local(day, hour int) time.Time { return time.Date(2026, 3, day, hour, 0, 0, 0, time.Local) }

// retOptions: 8 KiB segments (about 30 messages), ConsumeQueue files of 10 units and index
// files of 64 entries, so that a few hundred messages make many files of each kind.
func retOptions(t testing.TB, fs vfs.FS, clock *retClock) Options {
	o := testOptions(t, "/store")
	o.FS = fs
	o.Now = clock.Now
	o.CommitLogFileSize = 8 << 10
	o.ConsumeQueueUnits = 10
	o.IndexSlots = 64
	o.IndexEntries = 64
	o.CleanInterval = time.Hour
	o.CleanFirstDelay = time.Hour
	o.CQFlushInterval = time.Hour // checkpoints only when retCheckpoint asks (and at Close)
	return o
}

// retCheckpoint flushes the derived files and writes a checkpoint, as the checkpointer does
// every 60 s: retention deletes only below the last checkpoint's dispatched offset.
func retCheckpoint(t testing.TB, e *Engine) {
	t.Helper()
	if err := e.checkpointer().Thorough(); err != nil {
		t.Fatal(err)
	}
}

// retPut stores n messages on topic/queue 0 in batches of 10 and returns their results; every
// one must succeed. Bodies are body(topic, 0, first+i).
// putUntilRefused puts one message at a time to topic T, numbered on from len(acked), until the
// store refuses one (a full disk), at most max messages; it returns acked with the messages
// stored before, and the refusal.
func putUntilRefused(t testing.TB, e *Engine, acked []Result, max int) ([]Result, []Result) {
	t.Helper()
	for k := len(acked); ; k++ {
		if k > max {
			t.Fatalf("no refusal after %d messages", max)
		}
		res, err := e.Put(context.Background(), Message{Topic: "T", Body: body("T", 0, k)})
		if err != nil {
			t.Fatal(err)
		}
		if res[0].Err != nil {
			return acked, res
		}
		acked = append(acked, res[0])
	}
}

func retPut(t testing.TB, e *Engine, topic string, n, first int) []Result {
	t.Helper()
	var out []Result
	for i := 0; i < n; {
		var msgs []Message
		for ; len(msgs) < 10 && i < n; i++ {
			k := first + i
			msgs = append(msgs, Message{Topic: topic, Body: body(topic, 0, k), Keys: []string{fmt.Sprintf("key-%d", k)}})
		}
		res, err := e.Put(context.Background(), msgs...)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Err != nil {
				t.Fatalf("put: %v", r.Err)
			}
		}
		out = append(out, res...)
	}
	if err := e.WaitDispatched(context.Background(), e.Offsets().Written); err != nil {
		t.Fatal(err)
	}
	return out
}

func segNames(e *Engine) []string {
	var out []string
	for _, f := range e.log.Queue().Files() {
		out = append(out, filepath.Base(f.Name()))
	}
	return out
}

func deletedNames(res RetentionResult) []string {
	var out []string
	for _, s := range res.Segments {
		out = append(out, s.Name)
	}
	return out
}

func mustPass(t *testing.T, e *Engine, now time.Time) RetentionResult {
	t.Helper()
	res, err := e.retention.Pass(now)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestRetentionByAge: expired segments go at the deletion hour only, at any hour above
// DiskMaxUsedRatio, never before FileReservedTime, oldest first, stopping at the first one kept.
func TestRetentionByAge(t *testing.T) {
	clock := newRetClock(local(1, 10))
	fs := newUsageFS(vfs.NewMem(vfs.WithClock(clock.Now)), 50)
	o := retOptions(t, fs, clock)
	o.DeleteWhen = "04;23"
	e := mustOpen(t, o)
	defer e.Close()

	retPut(t, e, "T", 200, 0) // day 1, 10:00: the old segments
	old := segNames(e)
	if len(old) < 4 {
		t.Fatalf("only %d segments", len(old))
	}
	clock.Set(local(2, 10))
	retPut(t, e, "T", 200, 200) // day 2, 10:00: younger ones
	retCheckpoint(t, e)
	if len(segNames(e)) < len(old)+3 {
		t.Fatalf("%d segments after the second fill", len(segNames(e)))
	}
	// The segment that was being written at the end of day 1 got its filler on day 2.
	expired := old[:len(old)-1]

	// 73 hours after day 1, but 11:00: not a deletion hour, disk at 50%.
	if res := mustPass(t, e, local(4, 11)); len(res.Segments) != 0 {
		t.Fatalf("deleted %v outside the deletion hours", deletedNames(res))
	}
	// Before the reserved time has passed, not even at a deletion hour.
	if res := mustPass(t, e, local(3, 23)); len(res.Segments) != 0 {
		t.Fatalf("deleted %v before 72 h", deletedNames(res))
	}
	// Day 5 04:00 (any minute of the hour): the day-1 segments go, the day-2 ones stay.
	res := mustPass(t, e, local(5, 4).Add(59*time.Minute))
	if got := deletedNames(res); strings.Join(got, ",") != strings.Join(expired, ",") {
		t.Fatalf("deleted %v, want %v", got, expired)
	}
	for _, s := range res.Segments {
		if s.Bytes != o.CommitLogFileSize || !strings.Contains(s.Reason, "deletion hour 04") {
			t.Fatalf("deleted %+v", s)
		}
	}
	if res.MinOffset != e.log.MinOffset() || res.MinOffset != int64(len(expired))*o.CommitLogFileSize {
		t.Fatalf("min offset %d, log %d", res.MinOffset, e.log.MinOffset())
	}
	if st := e.Stats(); st.SegmentsDeleted != int64(len(expired)) || st.BytesDeleted != res.Bytes() || st.MinOffset != res.MinOffset {
		t.Fatalf("stats: %d segments, %d bytes, min %d", st.SegmentsDeleted, st.BytesDeleted, st.MinOffset)
	}
	// Above DiskMaxUsedRatio, at any hour: the day-2 segments once they are 72 h old.
	fs.pct.Store(76)
	if res := mustPass(t, e, local(5, 9)); len(res.Segments) != 0 {
		t.Fatalf("deleted %v younger than 72 h", deletedNames(res))
	}
	n := len(segNames(e))
	res = mustPass(t, e, local(5, 9).Add(24*time.Hour))
	if len(res.Segments) != min(n-1, 10) || !strings.Contains(res.Segments[0].Reason, "76% is above 75%") {
		t.Fatalf("deleted %v of %d: %+v", deletedNames(res), n, res.Segments)
	}
}

// TestRetentionForced: above DiskCleanForciblyRatio the oldest segments go whatever their age,
// at most DeleteFilesPerPass per pass, never the last, never one dispatch or the flusher still
// needs; at or below the ratio nothing young goes.
func TestRetentionForced(t *testing.T) {
	clock := newRetClock(local(1, 10))
	fs := newUsageFS(vfs.NewMem(vfs.WithClock(clock.Now)), 85)
	o := retOptions(t, fs, clock)
	o.DeleteFilesPerPass = 3
	e := mustOpen(t, o)
	defer e.Close()
	retPut(t, e, "T", 250, 0)
	n := len(segNames(e))
	if n < 8 {
		t.Fatalf("only %d segments", n)
	}
	// Nothing goes that a crash could still need: not before a checkpoint covers it.
	fs.pct.Store(86)
	if res := mustPass(t, e, clock.Now()); len(res.Segments) != 0 {
		t.Fatalf("deleted %v before a checkpoint", deletedNames(res))
	}
	retCheckpoint(t, e)
	fs.pct.Store(85)
	if res := mustPass(t, e, clock.Now()); len(res.Segments) != 0 {
		t.Fatalf("deleted %v at 85%%", deletedNames(res))
	}
	fs.pct.Store(86)
	before := segNames(e)
	res := mustPass(t, e, clock.Now())
	if got := deletedNames(res); strings.Join(got, ",") != strings.Join(before[:3], ",") {
		t.Fatalf("deleted %v, want %v", got, before[:3])
	}
	if !strings.Contains(res.Segments[0].Reason, "whatever the age") {
		t.Fatalf("reason %q", res.Segments[0].Reason)
	}
	for len(segNames(e)) > 1 {
		if res := mustPass(t, e, clock.Now()); len(res.Segments) == 0 || len(res.Segments) > 3 {
			t.Fatalf("a pass deleted %v with %d segments left", deletedNames(res), len(segNames(e)))
		}
	}
	if res := mustPass(t, e, clock.Now()); len(res.Segments) != 0 {
		t.Fatalf("deleted the last segment: %v", deletedNames(res))
	}
	// Writing goes on in the last segment and past it.
	retPut(t, e, "T", 50, 250)
	if e.Stats().RefusingWrites {
		t.Fatal("refusing writes at 86%")
	}
}

// TestRetentionDerivedFiles: ConsumeQueue and index files below the new start go with the
// segments, queue min offsets move, reads of deleted offsets say OffsetTooSmall with the new
// min, and what is left reads back intact.
func TestRetentionDerivedFiles(t *testing.T) {
	clock := newRetClock(local(1, 10))
	fs := newUsageFS(vfs.NewMem(vfs.WithClock(clock.Now)), 50)
	o := retOptions(t, fs, clock)
	e := mustOpen(t, o)
	defer e.Close()
	acked := retPut(t, e, "T", 200, 0)
	acked = append(acked, retPut(t, e, "U", 30, 0)...)
	cqFiles := func() int {
		ents, _ := fs.ReadDir("/store/consumequeue/T/0")
		return len(ents)
	}
	indexFiles := func() int {
		ents, _ := fs.ReadDir("/store/index")
		return len(ents)
	}
	cqBefore, idxBefore := cqFiles(), indexFiles()
	if cqBefore < 10 || idxBefore < 3 {
		t.Fatalf("%d consumequeue files, %d index files", cqBefore, idxBefore)
	}

	retCheckpoint(t, e)
	res, err := e.DeleteExpired(context.Background()) // manual: any hour, but only expired ones
	if err != nil || len(res.Segments) != 0 {
		t.Fatalf("manual delete of young segments: %v: %v", deletedNames(res), err)
	}
	clock.Add(73 * time.Hour)
	res, err = e.DeleteExpired(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	segs := len(segNames(e))
	if len(res.Segments) == 0 || segs != 1 {
		t.Fatalf("manual delete: %d deleted, %d left", len(res.Segments), segs)
	}
	if res.ConsumeQueueFiles == 0 || len(res.IndexFiles) == 0 {
		t.Fatalf("derived files deleted: %d consumequeue, %v index", res.ConsumeQueueFiles, res.IndexFiles)
	}
	if cqFiles() >= cqBefore || indexFiles() >= idxBefore {
		t.Fatalf("consumequeue files %d -> %d, index files %d -> %d", cqBefore, cqFiles(), idxBefore, indexFiles())
	}
	st := e.Stats()
	if st.ConsumeQueueFilesDeleted != int64(res.ConsumeQueueFiles) || st.IndexFilesDeleted != int64(len(res.IndexFiles)) {
		t.Fatalf("stats %+v", st)
	}

	// Every acked message is either readable as stored or below its queue's new min.
	minPhys := e.log.MinOffset()
	for _, topic := range []string{"T", "U"} {
		qo, err := e.QueueOffsets(topic)
		if err != nil {
			t.Fatal(err)
		}
		lo := qo[0].Min
		for _, r := range acked {
			if r.Topic != topic {
				continue
			}
			gone := r.PhysOffset < minPhys
			if gone != (r.QueueOffset < lo) {
				t.Fatalf("%s@%d at %d: min offset %d, commitlog min %d", topic, r.QueueOffset, r.PhysOffset, lo, minPhys)
			}
		}
		got, err := e.Get(context.Background(), GetRequest{Topic: topic, Offset: 0, Max: 1})
		if err != nil {
			t.Fatal(err)
		}
		if lo > 0 && (got.Status != reader.OffsetTooSmall || got.NextOffset != lo || got.MinOffset != lo) {
			t.Fatalf("%s: get at 0 = %v next %d min %d, want OffsetTooSmall next %d", topic, got.Status, got.NextOffset, got.MinOffset, lo)
		}
		for off := lo; off < qo[0].Max; {
			got, err := e.Get(context.Background(), GetRequest{Topic: topic, Offset: off, Max: 32})
			if err != nil || got.Status != reader.Found {
				t.Fatalf("%s@%d: %v %v", topic, off, got.Status, err)
			}
			for _, m := range got.Messages {
				if want := body(topic, 0, int(m.QueueOffset)); !bytes.Equal(m.Body, want) {
					t.Fatalf("%s@%d: body %q", topic, m.QueueOffset, m.Body)
				}
			}
			off = got.NextOffset
		}
	}
	// Lookup of a deleted message by key finds nothing; a kept one is found.
	found, err := e.Query(context.Background(), QueryRequest{Topic: "T", Key: "key-0"})
	if err != nil || len(found) != 0 {
		t.Fatalf("query of a deleted message: %d found, %v", len(found), err)
	}
	last := acked[len(acked)-1] // U's last: in the segment being written, which stays
	found, err = e.Query(context.Background(), QueryRequest{Topic: "U", Key: "key-29"})
	if err != nil || len(found) != 1 || found[0].PhysicalOffset != last.PhysOffset {
		t.Fatalf("query of a kept message: %d found, %v", len(found), err)
	}

	// Closed and reopened, the store keeps its new start and continues the queues.
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e2 := mustOpen(t, o)
	defer e2.Close()
	if e2.log.MinOffset() != minPhys {
		t.Fatalf("min offset %d after reopen, want %d", e2.log.MinOffset(), minPhys)
	}
	more := retPut(t, e2, "T", 5, 200)
	if more[0].QueueOffset != 200 {
		t.Fatalf("queue continues at %d, want 200", more[0].QueueOffset)
	}
}

// TestRetentionReadersDuringDelete: on the real file system, where an early munmap would
// fault, readers that hold a segment while it is deleted keep reading valid bytes, and
// concurrent Gets see either the message or OffsetTooSmall, never garbage or a crash.
func TestRetentionReadersDuringDelete(t *testing.T) {
	clock := newRetClock(local(1, 10))
	fs := newUsageFS(vfs.Default, 86) // forced cleaning: the segments' real mtimes do not matter
	o := retOptions(t, fs, clock)
	o.Dir = t.TempDir()
	o.DeleteFilesPerPass = 2
	e := mustOpen(t, o)
	defer e.Close()
	acked := retPut(t, e, "T", 300, 0)
	retCheckpoint(t, e)

	// A reader holds the first record's segment across its deletion.
	v, release, err := e.log.Read(acked[0].PhysOffset)
	if err != nil {
		t.Fatal(err)
	}
	want := bytes.Clone(v.Bytes())
	firstSeg := filepath.Join(o.Dir, "commitlog", segment.Name(0))

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var reads atomic.Int64
	for g := range 4 {
		wg.Go(func() {
			for off := int64(g * 7); ctx.Err() == nil; off = (off + 13) % 300 {
				got, err := e.Get(ctx, GetRequest{Topic: "T", Offset: off, Max: 16})
				if err != nil {
					if ctx.Err() == nil {
						t.Error(err)
					}
					return
				}
				switch got.Status {
				case reader.Found:
					for _, m := range got.Messages {
						if !bytes.Equal(m.Body, body("T", 0, int(m.QueueOffset))) {
							t.Errorf("T@%d: body %q", m.QueueOffset, m.Body)
						}
					}
				case reader.OffsetTooSmall, reader.OffsetFoundNull:
				default:
					t.Errorf("T@%d: %v", off, got.Status)
				}
				reads.Add(1)
			}
		})
	}
	for len(segNames(e)) > 1 {
		if _, err := e.DeleteExpired(ctx); err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	wg.Wait()
	if _, err := vfs.Default.Stat(firstSeg); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("first segment still on disk: %v", err)
	}
	if !bytes.Equal(v.Bytes(), want) {
		t.Fatal("the record changed under its reader")
	}
	release()
	if _, _, err := e.log.Read(acked[0].PhysOffset); !errors.Is(err, segment.ErrOutOfRange) {
		t.Fatalf("read of a deleted record: %v", err)
	}
	t.Logf("%d concurrent reads", reads.Load())
}

// TestRetentionThenCrash: after retention deleted every record of a queue, a crash and
// recovery keep the queue's offsets and its new start (an idle queue), continue it after
// messages written since (a queue whose only units left name deleted records), and rebuild
// the units a crash lost; garbage a crash left in unsynced units is not taken for units of
// deleted records.
func TestRetentionThenCrash(t *testing.T) {
	for _, ckpt := range []string{"before", "after"} {
		for seed := range uint64(8) {
			t.Run(fmt.Sprintf("checkpoint=%s/%d", ckpt, seed), func(t *testing.T) { retentionThenCrash(t, ckpt, seed) })
		}
	}
}

// retentionThenCrash crashes with the last checkpoint written before the deletion, or after it
// and more writes.
func retentionThenCrash(t *testing.T, ckpt string, seed uint64) {
	clock := newRetClock(local(1, 10))
	mem := vfs.NewMem(vfs.WithClock(clock.Now))
	o := retOptions(t, newUsageFS(mem, 86), clock)
	e := mustOpen(t, o)
	old := retPut(t, e, "Old", 60, 0)
	idle := retPut(t, e, "Idle", 20, 0)
	retPut(t, e, "New", 200, 0)
	if res, err := e.DeleteExpired(context.Background()); err != nil || len(res.Segments) != 0 {
		t.Fatalf("deleted %v before a checkpoint: %v", deletedNames(res), err)
	}
	retCheckpoint(t, e)
	for len(segNames(e)) > 1 {
		if _, err := e.DeleteExpired(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if start := e.log.MinOffset(); start <= max(old[len(old)-1].PhysOffset, idle[len(idle)-1].PhysOffset) {
		t.Fatalf("min offset %d: Old and Idle not deleted", start)
	}
	retPut(t, e, "New", 5, 200)
	retPut(t, e, "Old", 2, 60)
	if ckpt == "after" {
		retCheckpoint(t, e)
	}
	if err := e.Abort(); err != nil {
		t.Fatal(err)
	}
	img := mem.CrashImage(rand.New(rand.NewPCG(seed, 3)), vfs.CrashOptions{UnsyncedDirChanges: true, GarbageProb: 0.5})
	o.FS = newUsageFS(img, 50)
	e2 := mustOpen(t, o)
	defer e2.Close()
	for _, c := range []struct {
		topic    string
		min, max int64
	}{{"Idle", 20, 20}, {"Old", 60, 62}, {"New", -1, 205}} {
		qo, err := e2.QueueOffsets(c.topic)
		if err != nil {
			t.Fatal(err)
		}
		if qo[0].Max != c.max || (c.min >= 0 && qo[0].Min != c.min) {
			t.Fatalf("%s after the crash: [%d, %d), want [%d, %d)", c.topic, qo[0].Min, qo[0].Max, c.min, c.max)
		}
		lo := qo[0].Min
		if got, err := e2.Get(context.Background(), GetRequest{Topic: c.topic, Offset: 0}); err != nil ||
			got.Status != reader.OffsetTooSmall || got.NextOffset != lo {
			t.Fatalf("get %s@0: %v next %d: %v", c.topic, got.Status, got.NextOffset, err)
		}
		for off := lo; off < c.max; {
			got, err := e2.Get(context.Background(), GetRequest{Topic: c.topic, Offset: off})
			if err != nil || got.Status != reader.Found {
				t.Fatalf("%s@%d: %v %v", c.topic, off, got.Status, err)
			}
			for _, m := range got.Messages {
				if !bytes.Equal(m.Body, body(c.topic, 0, int(m.QueueOffset))) {
					t.Fatalf("%s@%d: %q", c.topic, m.QueueOffset, m.Body)
				}
			}
			off = got.NextOffset
		}
		if more := retPut(t, e2, c.topic, 1, int(c.max)); more[0].QueueOffset != c.max {
			t.Fatalf("%s continues at %d, want %d", c.topic, more[0].QueueOffset, c.max)
		}
	}
}

// TestRetentionStage runs the stage on its own timers, in a synctest bubble (fake time): disk
// checks on every CleanInterval tick before CleanFirstDelay, the first deletions after it, and
// a clean stop with the engine.
func TestRetentionStage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := newUsageFS(vfs.NewMem(), 50) // the Mem's clock is the bubble's
		o := testOptions(t, "/store")
		o.FS = fs
		o.CommitLogFileSize = 8 << 10 // default retention options: 10 s, first after 60 s, 72 h
		e := mustOpen(t, o)
		retPut(t, e, "T", 200, 0)
		segs := len(segNames(e))

		fs.pct.Store(95)
		time.Sleep(10*time.Second + time.Millisecond) // the first tick: a disk check only
		synctest.Wait()
		if st := e.Stats(); !st.RefusingWrites || st.DiskUsedRatio != 0.95 || st.SegmentsDeleted != 0 {
			t.Fatalf("after 10 s: refusing %v at %v, %d deleted", st.RefusingWrites, st.DiskUsedRatio, st.SegmentsDeleted)
		}
		fs.pct.Store(50)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if st := e.Stats(); st.RefusingWrites || st.DiskUsedRatio != 0.5 {
			t.Fatalf("after 20 s: refusing %v at %v", st.RefusingWrites, st.DiskUsedRatio)
		}

		// Past 60 s the checkpointer has written a checkpoint and passes delete: at 86% the
		// oldest segments go whatever their age, 10 a pass.
		fs.pct.Store(86)
		time.Sleep(55 * time.Second)
		synctest.Wait()
		st := e.Stats()
		if st.SegmentsDeleted == 0 || st.SegmentsDeleted > 20 || st.MinOffset == 0 {
			t.Fatalf("after 75 s: %d of %d segments deleted, min %d", st.SegmentsDeleted, segs, st.MinOffset)
		}
		fs.pct.Store(50)
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
	})
}
