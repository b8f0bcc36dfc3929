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

	"github.com/rs/zerolog"

	"github.com/rocketstore/engine/internal/reader"
	"github.com/rocketstore/engine/internal/store/segment"
	"github.com/rocketstore/engine/internal/vfs"
	"github.com/rocketstore/engine/stages/ingress"
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

// TestDiskFullRefusesWrites: above DiskWarningRatio every message gets the 507 error and
// nothing is written; writes resume within a second of the use falling back, and a pass that
// frees space resumes them at once.
func TestDiskFullRefusesWrites(t *testing.T) {
	clock := newRetClock(local(1, 10))
	fs := newUsageFS(vfs.NewMem(vfs.WithClock(clock.Now)), 50)
	o := retOptions(t, fs, clock)
	e := mustOpen(t, o)
	defer e.Close()
	retPut(t, e, "T", 100, 0)
	if err := e.Ready(); err != nil {
		t.Fatal(err)
	}

	fs.pct.Store(91)
	mustPass(t, e, clock.Now()) // also deletes (forced), but the fake use stays at 91%
	st := e.Stats()
	if !st.RefusingWrites || st.DiskUsedRatio != 0.91 {
		t.Fatalf("refusing %v at %v", st.RefusingWrites, st.DiskUsedRatio)
	}
	written := e.Offsets().Written
	res, err := e.Put(context.Background(), Message{Topic: "T", Body: []byte("a")}, Message{Topic: "T", Body: []byte("b")})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		var dfe *DiskFullError
		switch {
		case !errors.As(r.Err, &dfe), !errors.Is(r.Err, ErrDiskFull), !errors.Is(r.Err, syscall.ENOSPC):
			t.Fatalf("refused with %v", r.Err)
		case ingress.ReplyCode(r.Err) != ingress.CodeDiskFull:
			t.Fatalf("reply code %d", ingress.ReplyCode(r.Err))
		case r.Err.Error() != "engine: disk use 91% is above the 90% limit; writes resume below it":
			t.Fatalf("message %q", r.Err)
		}
	}
	if e.Offsets().Written != written {
		t.Fatal("a refused write was written")
	}
	if err := e.Ready(); !errors.Is(err, ErrDiskFull) {
		t.Fatalf("ready while refusing: %v", err)
	}

	// Space comes back: within a second (store clock) the gate sees it, without a pass.
	fs.pct.Store(90)
	if res, _ := e.Put(context.Background(), Message{Topic: "T", Body: []byte("c")}); !errors.Is(res[0].Err, syscall.ENOSPC) {
		t.Fatalf("resumed before the re-check: %v", res[0].Err)
	}
	clock.Add(time.Second)
	if res, _ := e.Put(context.Background(), Message{Topic: "T", Body: []byte("d")}); res[0].Err != nil {
		t.Fatalf("still refused at 90%%: %v", res[0].Err)
	}
	if err := e.Ready(); err != nil || e.Stats().RefusingWrites {
		t.Fatalf("not ready at 90%%: %v", err)
	}

	// Refused again; Ready re-checks too.
	fs.pct.Store(95)
	mustPass(t, e, clock.Now())
	if err := e.Ready(); !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "95%") {
		t.Fatalf("ready at 95%%: %v", err)
	}
	fs.pct.Store(20)
	clock.Add(time.Second)
	if err := e.Ready(); err != nil {
		t.Fatalf("not ready at 20%%: %v", err)
	}
}

// TestDiskFullAtOpen: an engine opened on a full disk refuses writes from the first batch.
func TestDiskFullAtOpen(t *testing.T) {
	clock := newRetClock(local(1, 10))
	fs := newUsageFS(vfs.NewMem(vfs.WithClock(clock.Now)), 99)
	e := mustOpen(t, retOptions(t, fs, clock))
	defer e.Close()
	res, err := e.Put(context.Background(), Message{Topic: "T", Body: []byte("a")})
	if err != nil || !errors.Is(res[0].Err, ErrDiskFull) {
		t.Fatalf("put on a full disk: %v %v", res, err)
	}
	if e.Offsets().Written != 0 {
		t.Fatal("written on a full disk")
	}
}

// TestDiskFullNewSegment: the disk fills below the refusal limit (a use the gate does not see
// as full), so the CommitLog cannot create its next segment: every message then gets ENOSPC
// (507) and nothing of it is stored, nothing faults, writing resumes when space returns, and
// after a crash or a restart only the acked messages are there.
func TestDiskFullNewSegment(t *testing.T) {
	for _, crash := range []int{-1, 0, 1, 2, 3, 4} { // -1: a clean restart; else a crash seed
		t.Run(fmt.Sprintf("crash=%d", crash), func(t *testing.T) {
			clock := newRetClock(local(1, 10))
			mem := vfs.NewMem(vfs.WithClock(clock.Now))
			fs := newUsageFS(mem, 10) // the gate never refuses: the file system itself runs out
			o := retOptions(t, fs, clock)
			// The allocator warns on every round it cannot allocate ahead.
			o.Logger = o.Logger.Level(zerolog.ErrorLevel)
			o.CommitLogFileSize = 64 << 10
			o.ConsumeQueueUnits = 1000 // whole files reserved at creation: only the CommitLog grows
			o.IndexEntries = 4096
			e := mustOpen(t, o)
			acked := retPut(t, e, "T", 20, 0)
			u, err := mem.DiskUsage("/store")
			if err != nil {
				t.Fatal(err)
			}
			mem.SetCapacity(int64(u.Total-u.Free) + 32<<10) // less than a segment left

			acked, failed := putUntilRefused(t, e, acked, 2000)
			// A whole batch is refused, message by message.
			var batch []Message
			for i := range 10 {
				batch = append(batch, Message{Topic: "T", Body: []byte(fmt.Sprintf("never %d", i))})
			}
			res, err := e.Put(context.Background(), batch...)
			if err != nil {
				t.Fatal(err)
			}
			failed = append(failed, res...)
			for _, r := range failed {
				if !errors.Is(r.Err, syscall.ENOSPC) || ingress.ReplyCode(r.Err) != ingress.CodeDiskFull {
					t.Fatalf("failed with %v (code %d)", r.Err, ingress.ReplyCode(r.Err))
				}
			}
			written := e.Offsets().Written
			if err := e.WaitDispatched(context.Background(), written); err != nil {
				t.Fatal(err)
			}
			if st := e.Stats(); st.AppendErrors != int64(len(failed)) {
				t.Fatalf("%d append errors, want %d", st.AppendErrors, len(failed))
			}

			checkAckedOnly(t, e, acked)

			if crash >= 0 {
				if err := e.Abort(); err != nil {
					t.Fatal(err)
				}
				rng := rand.New(rand.NewPCG(uint64(crash), 7))
				img := mem.CrashImage(rng, vfs.CrashOptions{UnsyncedDirChanges: true, GarbageProb: 0.5})
				img.SetCapacity(0)
				o.FS = newUsageFS(img, 10)
				e = mustOpen(t, o)
				checkAckedOnly(t, e, acked)
			} else {
				// Space returns: the same engine writes again, into a new segment.
				mem.SetCapacity(0)
				more := retPut(t, e, "T", 300, len(acked))
				acked = append(acked, more...)
				checkAckedOnly(t, e, acked)
				if err := e.Close(); err != nil {
					t.Fatal(err)
				}
				e = mustOpen(t, o)
				checkAckedOnly(t, e, acked)
			}
			more := retPut(t, e, "T", 5, len(acked))
			if more[0].QueueOffset != int64(len(acked)) {
				t.Fatalf("queue continues at %d, want %d", more[0].QueueOffset, len(acked))
			}
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
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

// TestOpenRefusesBadDeleteWhen: the settings are checked before anything is opened.
func TestOpenRefusesBadDeleteWhen(t *testing.T) {
	o := testOptions(t, t.TempDir())
	o.DeleteWhen = "25"
	if _, err := Open(o); err == nil || !strings.Contains(err.Error(), "DeleteWhen") {
		t.Fatalf("open with DeleteWhen 25: %v", err)
	}
}

func TestRetentionDefaults(t *testing.T) {
	o := Options{Dir: "x"}.withDefaults()
	if o.FileReservedTime != 72*time.Hour || o.DeleteWhen != "04" || o.CleanInterval != 10*time.Second ||
		o.CleanFirstDelay != time.Minute || o.DiskMaxUsedRatio != 0.75 || o.DiskCleanForciblyRatio != 0.85 ||
		o.DiskWarningRatio != 0.90 || o.DeleteFilesPerPass != 10 {
		t.Fatalf("%+v", o)
	}
	o = Options{Dir: "x", DiskWarningRatio: 0.99, DiskCleanForciblyRatio: 0.1, DiskMaxUsedRatio: 0.05}.withDefaults()
	if o.DiskWarningRatio != 0.90 || o.DiskCleanForciblyRatio != 0.30 || o.DiskMaxUsedRatio != 0.10 {
		t.Fatalf("not clamped: %v %v %v", o.DiskWarningRatio, o.DiskCleanForciblyRatio, o.DiskMaxUsedRatio)
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

// checkAckedOnly checks that queue T/0 holds exactly the acked messages, at their acked
// positions with their bodies, and that the CommitLog ends with the last of them: nothing
// refused or half-written is there.
func checkAckedOnly(t *testing.T, e *Engine, want []Result) {
	t.Helper()
	if err := e.WaitDispatched(context.Background(), e.Offsets().Written); err != nil {
		t.Fatal(err)
	}
	qo, err := e.QueueOffsets("T")
	if err != nil {
		t.Fatal(err)
	}
	if qo[0].Max != int64(len(want)) {
		t.Fatalf("queue holds %d, acked %d", qo[0].Max, len(want))
	}
	for off := int64(0); off < qo[0].Max; {
		got, err := e.Get(context.Background(), GetRequest{Topic: "T", Offset: off, Max: 64})
		if err != nil || got.Status != reader.Found {
			t.Fatalf("T@%d: %v %v", off, got.Status, err)
		}
		for _, m := range got.Messages {
			if r := want[m.QueueOffset]; m.PhysicalOffset != r.PhysOffset || !bytes.Equal(m.Body, body("T", 0, int(m.QueueOffset))) {
				t.Fatalf("T@%d: %q at %d", m.QueueOffset, m.Body, m.PhysicalOffset)
			}
		}
		off = got.NextOffset
	}
	if end, last := e.log.MaxOffset(), want[len(want)-1]; end != last.PhysOffset+int64(last.Size) {
		t.Fatalf("commitlog ends at %d, the last acked record at %d", end, last.PhysOffset+int64(last.Size))
	}
}

// TestDiskFullPassRunsAtOnce: writes refused for a full disk right after a start do not wait
// for the first pass (CleanFirstDelay, 60 s): the refusal runs one at once, which deletes what
// the last checkpoint covers (above 85%: oldest first, whatever the age).
func TestDiskFullPassRunsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := newUsageFS(vfs.NewMem(), 50)
		o := testOptions(t, "/store")
		o.FS = fs
		o.CommitLogFileSize = 8 << 10 // default retention options: 10 s, first after 60 s
		e := mustOpen(t, o)
		retPut(t, e, "T", 200, 0)
		segs := len(segNames(e))
		if err := e.Close(); err != nil { // its last checkpoint covers every segment
			t.Fatal(err)
		}
		fs.pct.Store(95)
		e = mustOpen(t, o)
		defer e.Close()
		synctest.Wait() // no time passes: only what runs at once
		st := e.Stats()
		if !st.RefusingWrites || st.SegmentsDeleted == 0 {
			t.Fatalf("right after a start on a full disk: refusing %v, %d of %d segments deleted", st.RefusingWrites,
				st.SegmentsDeleted, segs)
		}
		fs.pct.Store(50)
	})
}
