package segment

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rocketstore/engine/internal/vfs"
)

const testSize = 64 << 10

func openQueue(t *testing.T, fsys vfs.FS, dir string, step int64) *Queue {
	t.Helper()
	q, err := Open(Options{FS: fsys, Dir: dir, FileSize: testSize, ReserveStep: step, Prefault: true})
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// fill writes n bytes of pattern into the queue, rolling files as they fill up.
func fill(t *testing.T, q *Queue, n int) {
	t.Helper()
	for n > 0 {
		f := q.Last()
		if f == nil || f.Full() {
			base := int64(0)
			if f != nil {
				base = f.End()
			}
			var err error
			if f, err = q.Roll(base); err != nil {
				t.Fatal(err)
			}
		}
		pos := f.Wrote()
		k := min(int64(n), f.Size()-pos)
		if err := f.Reserve(pos + k); err != nil {
			t.Fatal(err)
		}
		for i := range k {
			f.Data()[pos+i] = pattern(f.Base() + pos + i)
		}
		f.SetWrote(pos + k)
		n -= int(k)
	}
}

func pattern(off int64) byte { return byte(off*7 + off>>8) }

func TestNameRoundTrip(t *testing.T) {
	for _, base := range []int64{0, 1073741824, 6_000_000 * 3, 1<<62 + 5} {
		n := Name(base)
		if len(n) != NameLen {
			t.Fatalf("%q", n)
		}
		if got, ok := ParseName(n); !ok || got != base {
			t.Fatalf("ParseName(%q) = %d, %v", n, got, ok)
		}
	}
	for _, bad := range []string{"", "123", "0000000000000000000a", "-0000000000000000001", "00000000000000000000.tmp"} {
		if _, ok := ParseName(bad); ok {
			t.Fatalf("ParseName(%q) accepted", bad)
		}
	}
}

func TestRollFlushReopen(t *testing.T) {
	dir := t.TempDir()
	q := openQueue(t, vfs.Default, dir, 0)
	fill(t, q, 3*testSize+100)
	if got := len(q.Files()); got != 4 {
		t.Fatalf("%d files", got)
	}
	if q.MaxOffset() != 3*testSize+100 {
		t.Fatalf("max offset %d", q.MaxOffset())
	}
	if err := q.Flush(q.MaxOffset()); err != nil {
		t.Fatal(err)
	}
	if q.FlushedWhere() != q.MaxOffset() {
		t.Fatalf("flushed %d of %d", q.FlushedWhere(), q.MaxOffset())
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}

	q = openQueue(t, vfs.Default, dir, 0)
	defer q.Close()
	if len(q.Files()) != 4 || q.MaxOffset() != 4*testSize {
		t.Fatalf("reopened: %d files, max %d (loaded files start full)", len(q.Files()), q.MaxOffset())
	}
	if err := q.TruncateTo(3*testSize + 100); err != nil {
		t.Fatal(err)
	}
	for off := int64(0); off < q.MaxOffset(); off += 997 {
		f, err := q.Acquire(off)
		if err != nil {
			t.Fatal(err)
		}
		if got := f.Data()[off-f.Base()]; got != pattern(off) {
			t.Fatalf("byte at %d = %d, want %d", off, got, pattern(off))
		}
		f.Release()
	}
	if _, err := q.Acquire(q.MaxOffset() + testSize); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("acquire past the end: %v", err)
	}
	// The writer continues where the data ends after a reopen.
	fill(t, q, testSize)
	if q.MaxOffset() != 4*testSize+100 {
		t.Fatalf("max after refill %d", q.MaxOffset())
	}
}

func TestOpenRejectsGapsAndWrongSizes(t *testing.T) {
	dir := t.TempDir()
	q := openQueue(t, vfs.Default, dir, 0)
	fill(t, q, 3*testSize)
	q.Close()
	if err := vfs.Default.Remove(filepath.Join(dir, Name(testSize))); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(Options{FS: vfs.Default, Dir: dir, FileSize: testSize}); err == nil {
		t.Fatal("opened a queue with a missing middle file")
	}
	if _, err := Open(Options{FS: vfs.Default, Dir: dir, FileSize: 2 * testSize}); err == nil {
		t.Fatal("opened files of the wrong size")
	}
}

func TestTruncateDeletesLaterFiles(t *testing.T) {
	q := openQueue(t, vfs.Default, t.TempDir(), 0)
	defer q.Close()
	fill(t, q, 3*testSize+10)
	if err := q.TruncateTo(testSize + 5); err != nil {
		t.Fatal(err)
	}
	if len(q.Files()) != 2 || q.MaxOffset() != testSize+5 || q.FlushedWhere() != testSize+5 {
		t.Fatalf("%d files, max %d, flushed %d", len(q.Files()), q.MaxOffset(), q.FlushedWhere())
	}
	ents, _ := vfs.Default.ReadDir(q.Dir())
	if len(ents) != 2 {
		t.Fatalf("%d files on disk after truncation", len(ents))
	}
}

func TestPrepareNextIsUsedByRoll(t *testing.T) {
	q := openQueue(t, vfs.Default, t.TempDir(), 0)
	defer q.Close()
	fill(t, q, 10)
	if err := q.PrepareNext(); err != nil {
		t.Fatal(err)
	}
	if !q.Prepared() {
		t.Fatal("not prepared")
	}
	fill(t, q, testSize)
	if q.Prepared() {
		t.Fatal("the roll did not take the prepared file")
	}
	if len(q.Files()) != 2 {
		t.Fatalf("%d files", len(q.Files()))
	}
}

// TestPrepareNextConcurrentWithWriter runs the allocator and the writer at once, as the
// pipeline does; the race detector checks the hand-over.
func TestPrepareNextConcurrentWithWriter(t *testing.T) {
	q := openQueue(t, vfs.Default, t.TempDir(), 0)
	defer q.Close()
	fill(t, q, 1)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			if err := q.PrepareNext(); err != nil {
				t.Error(err)
				return
			}
		}
	})
	fill(t, q, 20*testSize)
	close(done)
	wg.Wait()
	if got := q.MaxOffset(); got != 20*testSize+1 {
		t.Fatalf("max %d", got)
	}
}

// TestReserveInSteps: a file reserves a step at creation, then grows in steps or by what it has
// reserved already, whichever is more, never past its end; a request for more than that gets it.
func TestReserveInSteps(t *testing.T) {
	q := openQueue(t, vfs.Default, t.TempDir(), 4096)
	defer q.Close()
	f, err := q.Roll(0)
	if err != nil {
		t.Fatal(err)
	}
	if f.Reserved() != 4096 {
		t.Fatalf("reserved %d at creation", f.Reserved())
	}
	for _, c := range []struct{ upTo, want int64 }{
		{4096, 4096},      // reserved already
		{4097, 8192},      // a step (nothing was reserved since the creation's)
		{30000, 32768},    // more than a step or what was reserved since: what is asked for
		{32769, 61440},    // what was reserved since the creation (28 KiB), more than a step
		{61441, testSize}, // the same, but not past the end
	} {
		if err := f.Reserve(c.upTo); err != nil || f.Reserved() != c.want {
			t.Fatalf("Reserve(%d): %v, reserved %d, want %d", c.upTo, err, f.Reserved(), c.want)
		}
	}
}

func TestZeroFrom(t *testing.T) {
	q := openQueue(t, vfs.Default, t.TempDir(), 0)
	defer q.Close()
	fill(t, q, testSize)
	f := q.First()
	if err := f.ZeroFrom(5000); err != nil {
		t.Fatal(err)
	}
	if !allZero(f.Data()[5000:]) {
		t.Fatal("bytes left after ZeroFrom")
	}
	if f.Data()[4999] != pattern(4999) {
		t.Fatal("ZeroFrom cleared a byte before its start")
	}
}

// TestDeleteUnderLiveReaders deletes files while readers hold them: a reader that holds a file
// keeps reading the bytes it had, one that comes later gets an error, and nothing faults.
func TestDeleteUnderLiveReaders(t *testing.T) {
	q := openQueue(t, vfs.Default, t.TempDir(), 0)
	defer q.Close()
	fill(t, q, 8*testSize+1)

	held, err := q.Acquire(10)
	if err != nil {
		t.Fatal(err)
	}
	want := bytes.Clone(held.Data()[:testSize])
	names, err := q.DeleteFirst(3, func(*File) bool { return true })
	if err != nil || len(names) != 3 {
		t.Fatalf("deleted %v: %v", names, err)
	}
	if !bytes.Equal(held.Data()[:testSize], want) {
		t.Fatal("a held file changed under its reader")
	}
	if err := held.Release(); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Acquire(10); err == nil {
		t.Fatal("acquired a deleted offset")
	}
	if held.Acquire() {
		t.Fatal("re-acquired a file after it was unmapped")
	}

	// Many readers against a deleter: each read either sees the pattern or is refused.
	var wg sync.WaitGroup
	for r := range 4 {
		wg.Go(func() {
			for i := range 2000 {
				off := int64((i*7919 + r*104729) % (8 * testSize))
				f, err := q.Acquire(off)
				if err != nil {
					if !errors.Is(err, ErrOutOfRange) && !errors.Is(err, ErrDeleted) {
						t.Error(err)
					}
					continue
				}
				if got := f.Data()[off-f.Base()]; got != pattern(off) {
					t.Errorf("read %d at %d, want %d", got, off, pattern(off))
				}
				f.Release()
			}
		})
	}
	for range 4 {
		if _, err := q.DeleteFirst(1, func(*File) bool { return true }); err != nil {
			t.Error(err)
		}
	}
	wg.Wait()
	if got := len(q.Files()); got != 2 {
		t.Fatalf("%d files left", got)
	}
	// The last file is never deleted.
	if names, _ := q.DeleteFirst(10, func(*File) bool { return true }); len(names) != 1 {
		t.Fatalf("deleted %v, want only the one before the last", names)
	}
}

func TestReadOnlyQueue(t *testing.T) {
	dir := t.TempDir()
	q := openQueue(t, vfs.Default, dir, 0)
	fill(t, q, testSize+3)
	q.Close()
	ro, err := Open(Options{FS: vfs.Default, Dir: dir, FileSize: testSize, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if _, err := ro.Roll(ro.Last().End()); err == nil {
		t.Fatal("rolled a read-only queue")
	}
	missing, err := Open(Options{FS: vfs.Default, Dir: filepath.Join(dir, "nope"), FileSize: testSize, ReadOnly: true})
	if err != nil || len(missing.Files()) != 0 {
		t.Fatalf("read-only open of a missing dir: %v", err)
	}
}

func BenchmarkCopyIntoSegment(b *testing.B) {
	for _, warm := range []bool{false, true} {
		b.Run(fmt.Sprintf("prefault=%v", warm), func(b *testing.B) {
			q, err := Open(Options{FS: vfs.Default, Dir: b.TempDir(), FileSize: 256 << 20, Prefault: warm})
			if err != nil {
				b.Fatal(err)
			}
			defer q.Close()
			rec := bytes.Repeat([]byte{1}, 128)
			var f *File
			roll := func() {
				base := int64(0)
				if f != nil {
					base = f.End()
				}
				if warm {
					if f == nil {
						if f, err = q.Roll(0); err != nil {
							b.Fatal(err)
						}
						base = f.End()
					}
					if err := q.PrepareNext(); err != nil {
						b.Fatal(err)
					}
				}
				if f, err = q.Roll(base); err != nil {
					b.Fatal(err)
				}
			}
			b.SetBytes(int64(len(rec)))
			b.ReportAllocs()
			b.StopTimer()
			roll()
			b.StartTimer()
			pos := int64(0)
			for b.Loop() {
				if pos+int64(len(rec)) > f.Size() {
					b.StopTimer()
					roll()
					pos = 0
					b.StartTimer()
				}
				copy(f.Data()[pos:], rec)
				pos += int64(len(rec))
			}
		})
	}
}

// Deleting files that were not flushed yet moves the flushed offset past them, so flushing
// neither stalls below the queue's start nor fails on a deleted file.
func TestDeleteUnflushedMovesFlushed(t *testing.T) {
	q := openQueue(t, vfs.NewMem(), "/q", 0)
	defer q.Close()
	fill(t, q, 4*testSize+10)
	if q.FlushedWhere() != 0 {
		t.Fatalf("flushed %d before any flush", q.FlushedWhere())
	}
	if _, err := q.DeleteFirst(2, func(*File) bool { return true }); err != nil {
		t.Fatal(err)
	}
	if q.FlushedWhere() != 2*testSize {
		t.Fatalf("flushed %d after deleting two files, want %d", q.FlushedWhere(), 2*testSize)
	}
	if err := q.Flush(q.MaxOffset()); err != nil || q.FlushedWhere() != q.MaxOffset() {
		t.Fatalf("flushed to %d of %d: %v", q.FlushedWhere(), q.MaxOffset(), err)
	}
	// Deleting flushed files never moves it back.
	if _, err := q.DeleteFirst(1, func(*File) bool { return true }); err != nil {
		t.Fatal(err)
	}
	if q.FlushedWhere() != q.MaxOffset() {
		t.Fatalf("flushed %d, want %d", q.FlushedWhere(), q.MaxOffset())
	}
}

// A flusher and a deleter race: flushing never fails and ends at the end.
func TestFlushConcurrentWithDelete(t *testing.T) {
	for range 20 {
		q := openQueue(t, vfs.NewMem(), "/q", 0)
		fill(t, q, 12*testSize+10)
		var wg sync.WaitGroup
		wg.Go(func() {
			for range 6 {
				if _, err := q.DeleteFirst(2, func(*File) bool { return true }); err != nil {
					t.Error(err)
				}
			}
		})
		if err := q.Flush(q.MaxOffset()); err != nil {
			t.Error(err)
		}
		wg.Wait()
		if err := q.Flush(q.MaxOffset()); err != nil || q.FlushedWhere() != q.MaxOffset() {
			t.Fatalf("flushed to %d of %d: %v", q.FlushedWhere(), q.MaxOffset(), err)
		}
		q.Close()
	}
}

func TestModTime(t *testing.T) {
	now := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	q := openQueue(t, vfs.NewMem(vfs.WithClock(func() time.Time { return now })), "/q", 0)
	defer q.Close()
	fill(t, q, 10)
	if mt, err := q.ModTime(q.First()); err != nil || !mt.Equal(now) {
		t.Fatalf("mtime %v: %v", mt, err)
	}
}

// recordFS records the removals and directory syncs made through it.
type recordFS struct {
	vfs.FS
	mu  sync.Mutex
	ops []string
}

func (r *recordFS) Remove(name string) error {
	r.mu.Lock()
	r.ops = append(r.ops, "remove "+filepath.Base(name))
	r.mu.Unlock()
	return r.FS.Remove(name)
}

func (r *recordFS) SyncDir(dir string) error {
	r.mu.Lock()
	r.ops = append(r.ops, "syncdir")
	r.mu.Unlock()
	return r.FS.SyncDir(dir)
}

// Files are unlinked oldest first, each unlink durable before the next, so that a crash in
// the middle leaves the remaining files contiguous.
func TestDeleteFirstUnlinksInOrder(t *testing.T) {
	rec := &recordFS{FS: vfs.NewMem()}
	q := openQueue(t, rec, "/q", 0)
	defer q.Close()
	fill(t, q, 5*testSize+1)
	rec.ops = nil
	names, err := q.DeleteFirst(3, func(*File) bool { return true })
	if err != nil || len(names) != 3 {
		t.Fatalf("deleted %v: %v", names, err)
	}
	want := []string{"remove " + Name(0), "syncdir", "remove " + Name(testSize), "syncdir", "remove " + Name(2*testSize), "syncdir"}
	if fmt.Sprint(rec.ops) != fmt.Sprint(want) {
		t.Fatalf("ops %v, want %v", rec.ops, want)
	}
}

// A failed unlink stops the deletion there: the files after it stay on disk, out of the
// queue, and the directory still opens (contiguous from the first file left).
func TestDeleteFirstStopsAtFailedUnlink(t *testing.T) {
	mem := vfs.NewMem()
	fsys := vfs.NewFaulty(mem, vfs.OnNth(vfs.OpRemove, 2, syscall.EIO))
	q := openQueue(t, fsys, "/q", 0)
	fill(t, q, 5*testSize+1)
	names, err := q.DeleteFirst(3, func(*File) bool { return true })
	if !errors.Is(err, syscall.EIO) || len(names) != 1 || names[0] != filepath.Join("/q", Name(0)) {
		t.Fatalf("deleted %v: %v", names, err)
	}
	if q.MinOffset() != 3*testSize {
		t.Fatalf("queue starts at %d", q.MinOffset())
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	q2 := openQueue(t, mem, "/q", 0)
	defer q2.Close()
	if q2.MinOffset() != testSize || len(q2.Files()) != 5 {
		t.Fatalf("reopened from %d with %d files", q2.MinOffset(), len(q2.Files()))
	}
}

// TestTruncateToLeavesNoHole: a truncation that removes three later files, with the power cut
// at each of its directory syncs in turn, and crash images that keep unsynced removals entry by
// entry: whatever survives opens, a gap-free run of files from the first (the later files go
// from the last back, each removal synced before the next).
func TestTruncateToLeavesNoHole(t *testing.T) {
	for cut := int64(1); cut <= 4; cut++ {
		for seed := range uint64(20) {
			fsys := vfs.NewMem()
			q := openQueue(t, fsys, "/q", 0)
			fill(t, q, 4*testSize-10)
			if err := q.Flush(q.MaxOffset()); err != nil {
				t.Fatal(err)
			}
			fsys.CutPowerAt(fsys.Syncs() + cut)
			_ = q.TruncateTo(5) // fails at the cut
			q.Close()
			img := fsys.CrashImage(rand.New(rand.NewPCG(seed, uint64(cut))), vfs.CrashOptions{UnsyncedDirChanges: true})
			r, err := Open(Options{FS: img, Dir: "/q", FileSize: testSize})
			if err != nil {
				ents, _ := img.ReadDir("/q")
				t.Fatalf("cut at the truncation's sync %d, seed %d: %v (files %v)", cut, seed, err, ents)
			}
			r.Close()
		}
	}
}
