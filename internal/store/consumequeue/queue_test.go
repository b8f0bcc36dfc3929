package consumequeue

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"github.com/rocketstore/engine/internal/store/segment"
	"github.com/rocketstore/engine/internal/vfs"
)

func fileNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

func TestPutReadAcrossFiles(t *testing.T) {
	root := t.TempDir()
	s := openStore(t, vfs.Default, root, tinyUnits)
	defer s.Close()
	cq := queue(t, s, "T", 3)
	if cq.MaxOffset() != 0 || cq.MinOffset() != 0 || cq.MaxPhysicalOffset() != -1 {
		t.Fatalf("empty queue: min %d max %d phys %d", cq.MinOffset(), cq.MaxOffset(), cq.MaxPhysicalOffset())
	}
	putRange(t, cq, 0, 95)
	if cq.MaxOffset() != 95 || cq.MinOffset() != 0 || cq.MaxPhysicalOffset() != unitFor(94).End() {
		t.Fatalf("min %d max %d phys %d", cq.MinOffset(), cq.MaxOffset(), cq.MaxPhysicalOffset())
	}
	names := fileNames(t, filepath.Join(root, "consumequeue", "T", "3"))
	if len(names) != 10 || names[0] != "00000000000000000000" || names[9] != segment.Name(9*tinyUnits*UnitSize) {
		t.Fatalf("files %v", names)
	}
	checkUnits(t, cq, 0, 95)
	// A read as long as the queue, from the middle of a file, crosses every file.
	buf := make([]Unit, 200)
	if n, err := cq.Read(3, buf); err != nil || n != 92 {
		t.Fatalf("Read(3) = %d, %v", n, err)
	}
	for _, n := range []int64{-1, 95, 96, 1 << 62} {
		if _, err := cq.Unit(n); !errors.Is(err, ErrOutOfRange) {
			t.Errorf("Unit(%d): %v", n, err)
		}
	}
	if n, err := cq.Read(10, nil); n != 0 || err != nil {
		t.Errorf("Read into nothing: %d, %v", n, err)
	}
}

func TestPreBlankFill(t *testing.T) {
	for _, start := range []int64{7, 10, 23, 49} {
		t.Run(fmt.Sprint(start), func(t *testing.T) {
			root := t.TempDir()
			s := openStore(t, vfs.Default, root, tinyUnits)
			cq := queue(t, s, "T", 0)
			if st := cq.PullStatus(0); st != NoMessageInQueue {
				t.Fatalf("status %v", st)
			}
			putRange(t, cq, start, start+15)
			if cq.MinOffset() != start || cq.MaxOffset() != start+15 {
				t.Fatalf("min %d max %d", cq.MinOffset(), cq.MaxOffset())
			}
			base := start / tinyUnits * tinyUnits * UnitSize
			names := fileNames(t, filepath.Join(root, "consumequeue", "T", "0"))
			if names[0] != segment.Name(base) {
				t.Fatalf("first file %v, want %s", names, segment.Name(base))
			}
			noErr(t, s.FlushAll(0))
			data, err := os.ReadFile(filepath.Join(root, "consumequeue", "T", "0", names[0]))
			noErr(t, err)
			for p := int64(0); p < start*UnitSize-base; p += UnitSize {
				if DecodeUnit(data[p:]) != Blank {
					t.Fatalf("no blank at %d", p)
				}
			}
			if _, err := cq.Unit(start - 1); !errors.Is(err, ErrOutOfRange) {
				t.Fatalf("unit before the start: %v", err)
			}
			checkUnits(t, cq, start, start+15)
			for off, want := range map[int64]PullStatus{
				start - 1: OffsetTooSmall, start: Found, start + 14: Found,
				start + 15: OffsetOverflowOne, start + 16: OffsetOverflowBadly,
			} {
				if st := cq.PullStatus(off); st != want {
					t.Errorf("PullStatus(%d) = %v, want %v", off, st, want)
				}
			}
			// After a restart the queue still starts at start, blanks or not.
			s = reopen(t, s, vfs.Default, root, tinyUnits)
			defer s.Close()
			cq = s.Find("T", 0)
			if cq.MinOffset() != start || cq.MaxOffset() != start+15 || cq.MaxPhysicalOffset() != unitFor(start+14).End() {
				t.Fatalf("after reload: min %d max %d phys %d", cq.MinOffset(), cq.MaxOffset(), cq.MaxPhysicalOffset())
			}
			noErr(t, cq.CorrectMinOffset(0))
			if cq.MinOffset() != start {
				t.Fatalf("CorrectMinOffset(0) moved min to %d", cq.MinOffset())
			}
			checkUnits(t, cq, start, start+15)
		})
	}
}

func TestPutSkipsAndRefuses(t *testing.T) {
	s := openStore(t, vfs.Default, t.TempDir(), tinyUnits)
	defer s.Close()
	cq := queue(t, s, "T", 0)
	putRange(t, cq, 0, 12)

	// Already built: ends at or below the max physical offset. Skipped, whatever the offset.
	for _, off := range []int64{3, 12, 500} {
		noErr(t, cq.Put(off, unitFor(11)))
	}
	// Below the write position, with a new physical offset: skipped too.
	noErr(t, cq.Put(5, Unit{Phys: 1 << 40, Size: 10}))
	if cq.MaxOffset() != 12 || cq.MaxPhysicalOffset() != unitFor(11).End() {
		t.Fatalf("skips changed the queue: max %d phys %d", cq.MaxOffset(), cq.MaxPhysicalOffset())
	}
	checkUnits(t, cq, 0, 12)

	// Past the write position: a gap, refused, nothing written.
	if err := cq.Put(13, unitFor(13)); !errors.Is(err, ErrGap) {
		t.Fatalf("gap: %v", err)
	}
	for _, u := range []Unit{{Phys: -1, Size: 5}, {Phys: 5, Size: 0}, {Phys: 1<<63 - 10, Size: 100}} {
		if err := cq.Put(12, u); !errors.Is(err, ErrInvalidUnit) {
			t.Fatalf("Put(%+v): %v", u, err)
		}
	}
	if err := cq.Put(-1, unitFor(12)); !errors.Is(err, ErrInvalidUnit) {
		t.Fatalf("negative offset: %v", err)
	}
	if cq.MaxOffset() != 12 {
		t.Fatalf("max %d", cq.MaxOffset())
	}
	putRange(t, cq, 12, 25)
	checkUnits(t, cq, 0, 25)
}

func TestFlushPageAccounting(t *testing.T) {
	const units = 1000 // 20,000 bytes: four whole pages and a bit
	s := openStore(t, vfs.Default, t.TempDir(), units)
	defer s.Close()
	cq := queue(t, s, "T", 0)
	flushed := func() int64 { return cq.seg.FlushedWhere() }

	putRange(t, cq, 0, 300) // 6,000 bytes: page 1
	noErr(t, cq.Flush(2))
	if flushed() != 0 {
		t.Fatalf("flushed %d with one page written, 2 asked", flushed())
	}
	noErr(t, cq.Flush(1))
	if flushed() != 6000 {
		t.Fatalf("flushed %d, want 6000", flushed())
	}
	putRange(t, cq, 300, 400) // 8,000 bytes: still page 1
	noErr(t, cq.Flush(1))
	if flushed() != 6000 {
		t.Fatalf("flushed %d within the page", flushed())
	}
	noErr(t, cq.Flush(0))
	if flushed() != 8000 {
		t.Fatalf("flushed %d, want 8000", flushed())
	}
	// A full file is flushed whatever leastPages says, and the next one after it.
	putRange(t, cq, 400, 2100)
	noErr(t, cq.Flush(100))
	if flushed() != 40000 {
		t.Fatalf("flushed %d, want both full files (40000)", flushed())
	}
	noErr(t, cq.Flush(0))
	if flushed() != 42000 {
		t.Fatalf("flushed %d, want 42000", flushed())
	}
	noErr(t, cq.Flush(0)) // nothing to do
}

func TestOffsetByTime(t *testing.T) {
	s := openStore(t, vfs.Default, t.TempDir(), tinyUnits)
	defer s.Close()
	cq := queue(t, s, "T", 0)
	// Three messages per millisecond: queue offset n was stored at 5000 + n/3.
	storeTime := func(phys int64, size int32) (int64, error) {
		n := (phys - 1000) / 200
		if unitFor(n).Phys != phys || unitFor(n).Size != size {
			return 0, fmt.Errorf("no record at %d/%d", phys, size)
		}
		return 5000 + n/3, nil
	}
	if off, err := cq.OffsetByTime(1, storeTime); err != nil || off != 0 {
		t.Fatalf("empty queue: %d, %v", off, err)
	}
	putRange(t, cq, 4, 64) // starts at 4, after a pre-blank fill
	for _, c := range []struct{ t, want int64 }{
		{0, 4}, {5000, 4}, {5001, 4}, {5002, 6}, {5010, 30}, {5020, 60}, {5021, 63}, {5022, 64}, {9999, 64},
	} {
		if off, err := cq.OffsetByTime(c.t, storeTime); err != nil || off != c.want {
			t.Errorf("OffsetByTime(%d) = %d, %v; want %d", c.t, off, err, c.want)
		}
	}
	boom := errors.New("boom")
	if _, err := cq.OffsetByTime(5010, func(int64, int32) (int64, error) { return 0, boom }); !errors.Is(err, boom) {
		t.Fatalf("error not passed on: %v", err)
	}
}

// TestConcurrentReaders runs readers, a flusher and a cleaner against the writer. Readers only
// ever see whole units below MaxOffset, each the one written at its offset.
func TestConcurrentReaders(t *testing.T) {
	s := openStore(t, vfs.Default, t.TempDir(), tinyUnits)
	defer s.Close()
	cq := queue(t, s, "T", 0)
	const total = 3000
	var wg sync.WaitGroup
	done := make(chan struct{})
	errc := make(chan error, 8)
	// Each background loop yields after every round, so that on a small machine the writer
	// still gets its share of the CPU.
	for r := range 2 {
		wg.Go(func() {
			buf := make([]Unit, 13)
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				runtime.Gosched()
				hi := cq.MaxOffset()
				if hi == 0 {
					continue
				}
				from := max(cq.MinOffset(), (int64(i)*7919+int64(r))%hi)
				n, err := cq.Read(from, buf)
				if err != nil {
					if errors.Is(err, ErrOutOfRange) {
						continue // the cleaner moved the min offset up meanwhile
					}
					errc <- err
					return
				}
				for k := range n {
					if buf[k] != unitFor(from+int64(k)) {
						errc <- fmt.Errorf("unit %d = %+v", from+int64(k), buf[k])
						return
					}
				}
			}
		})
	}
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			runtime.Gosched()
			if err := cq.Flush(1); err != nil {
				errc <- err
				return
			}
		}
	})
	wg.Go(func() {
		for i := int64(0); ; i++ {
			select {
			case <-done:
				return
			default:
			}
			runtime.Gosched()
			// Drop records older than half of what is written so far.
			if _, err := cq.DeleteExpired(unitFor(cq.MaxOffset() / 2).Phys); err != nil {
				errc <- err
				return
			}
		}
	})
	for n := int64(0); n < total; n++ {
		if err := cq.Put(n, unitFor(n)); err != nil {
			t.Fatal(err)
		}
	}
	close(done)
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
	noErr(t, cq.CorrectMinOffset(unitFor(total/2).Phys))
	if cq.MinOffset() != total/2 {
		t.Fatalf("min %d", cq.MinOffset())
	}
	checkUnits(t, cq, total/2, total)
}
