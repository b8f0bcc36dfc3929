package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketstore/engine/internal/reader"
	"github.com/rocketstore/engine/internal/vfs"
	"github.com/rocketstore/engine/internal/wire"
	"github.com/rocketstore/engine/stages/ingress"
)

// Tests of the disk-full guard (engine/retention) on an open engine: writes refused above
// DiskWarningRatio and while a new segment cannot be made, and resumed when space returns.
// The clock and disk use helpers are retention_test.go's.

// TestDiskFullRefusesWrites: above DiskWarningRatio every message gets the 507 error and
// nothing is written; writes resume within a second of the use falling back, and a pass that
// frees space resumes them at once.
func TestDiskFullRefusesWrites(t *testing.T) { synctest.Test(t, testDiskFullRefusesWrites) }

// testDiskFullRefusesWrites runs in a synctest bubble so that it can wait (synctest.Wait) for
// the pass a refusal asks for at once (the stage's, on its own goroutine) before it changes the
// disk use: that pass would otherwise see the use fall back and admit writes before the gate's
// re-check this test is about.
func testDiskFullRefusesWrites(t *testing.T) {
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
	synctest.Wait()             // the pass the refusal asked for has run
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
		case ingress.ReplyCode(r.Err) != wire.CodeDiskFull:
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
	synctest.Wait()
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
				if !errors.Is(r.Err, syscall.ENOSPC) || ingress.ReplyCode(r.Err) != wire.CodeDiskFull {
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

// TestNoSpaceForASegmentRunsAPass: the disk filled since it was last measured (below the limit
// then) and the CommitLog cannot make its next segment (ENOSPC): the record is refused with
// ENOSPC, and a retention pass runs at once instead of at the next CleanInterval: it measures
// the disk (refusing writes) and deletes the oldest segments.
func TestNoSpaceForASegmentRunsAPass(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var full atomic.Bool
		usage := newUsageFS(vfs.NewMem(), 50)
		fsys := vfs.NewFaulty(usage, func(op vfs.Op, name string) error {
			if op == vfs.OpCreateSegment && full.Load() && strings.Contains(name, "commitlog") {
				return syscall.ENOSPC
			}
			return nil
		})
		o := testOptions(t, "/store")
		o.FS = fsys
		o.CommitLogFileSize = 8 << 10 // default retention options: 10 s, first after 60 s
		e := mustOpen(t, o)
		retPut(t, e, "T", 200, 0)
		if err := e.Close(); err != nil { // its last checkpoint covers every segment
			t.Fatal(err)
		}
		e = mustOpen(t, o)
		defer e.Close()
		synctest.Wait()
		if st := e.Stats(); st.RefusingWrites || st.SegmentsDeleted != 0 {
			t.Fatalf("before the disk filled: refusing %v, %d segments deleted", st.RefusingWrites, st.SegmentsDeleted)
		}
		usage.pct.Store(95) // filled by someone else; not measured yet
		full.Store(true)
		var refused error
		for i := 0; refused == nil && i < 100; i++ { // fills the active segment, then needs a new one
			res, err := e.Put(context.Background(), Message{Topic: "T", Body: make([]byte, 1000)})
			if err != nil {
				t.Fatal(err)
			}
			refused = res[0].Err
		}
		if !errors.Is(refused, syscall.ENOSPC) {
			t.Fatalf("refused with %v, want ENOSPC", refused)
		}
		synctest.Wait() // no time passes: only what runs at once
		if st := e.Stats(); !st.RefusingWrites || st.SegmentsDeleted == 0 {
			t.Fatalf("after ENOSPC on a new segment: refusing %v, %d segments deleted", st.RefusingWrites, st.SegmentsDeleted)
		}
		full.Store(false)
		usage.pct.Store(50)
	})
}
