package consumequeue

import (
	"crypto/sha256"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/rocketstore/engine/internal/store/segment"
	"github.com/rocketstore/engine/internal/vfs"
)

func openReadOnly(t testing.TB, fsys vfs.FS, root string, units, maxMapped int) *Store {
	t.Helper()
	s, err := Open(Options{FS: fsys, Root: root, UnitsPerFile: units, ReadOnly: true, MaxMapped: maxMapped})
	noErr(t, err)
	if _, err := s.Load(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// treeSum hashes every path, size and content under root, so a test can tell that a reader
// changed nothing on disk.
func treeSum(t *testing.T, root string) [32]byte {
	t.Helper()
	h := sha256.New()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		h.Write([]byte(p))
		if d.IsDir() {
			return nil
		}
		b, err := os.ReadFile(p)
		h.Write(b)
		return err
	})
	noErr(t, err)
	return [32]byte(h.Sum(nil))
}

// checkQueue reads [lo, hi) of cq and compares it with unitFor.
func checkQueue(t *testing.T, cq *ConsumeQueue, lo, hi int64) {
	t.Helper()
	if got := cq.MinOffset(); got != lo {
		t.Fatalf("%s: min offset %d, want %d", cq, got, lo)
	}
	if got := cq.MaxOffset(); got != hi {
		t.Fatalf("%s: max offset %d, want %d", cq, got, hi)
	}
	checkUnits(t, cq, lo, hi)
}

func TestReadOnlyLoadsWhatRecoverWould(t *testing.T) {
	root := t.TempDir()
	w := openStore(t, vfs.Default, root, tinyUnits)
	putRange(t, queue(t, w, "a", 0), 0, 37)          // across four files, the last partly full
	putRange(t, queue(t, w, "a", 1), 0, 2*tinyUnits) // ends exactly at a file's end
	putRange(t, queue(t, w, "b", 3), 25, 31)         // starts with a pre-blank fill
	noErr(t, w.FlushAll(0))
	noErr(t, w.Close())
	before := treeSum(t, root)

	ro := openReadOnly(t, vfs.Default, root, tinyUnits, 0)
	checkQueue(t, ro.Find("a", 0), 0, 37)
	checkQueue(t, ro.Find("a", 1), 0, 2*tinyUnits)
	checkQueue(t, ro.Find("b", 3), 25, 31)
	if got := ro.Find("a", 0).MaxPhysicalOffset(); got != unitFor(36).End() {
		t.Fatalf("max physical offset %d, want %d", got, unitFor(36).End())
	}
	cq := ro.Find("a", 0)
	if st := cq.PullStatus(37); st != OffsetOverflowOne {
		t.Fatalf("pull status at the end: %v", st)
	}
	if _, err := cq.Read(37, make([]Unit, 1)); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("read at the end: %v", err)
	}
	off, err := cq.OffsetByTime(20, func(phys int64, _ int32) (int64, error) { return (phys - 1000) / 200, nil })
	if err != nil || off != 20 {
		t.Fatalf("OffsetByTime = %d, %v", off, err)
	}

	// Every writer-side operation is refused; flushing has nothing to do.
	for name, err := range map[string]error{
		"put":      cq.Put(37, unitFor(37)),
		"truncate": cq.TruncateDirty(0),
		"verify":   cq.TruncateUnverified(0, func(int64, Unit) bool { return false }),
		"flush":    ro.FlushAll(0),
	} {
		if name == "flush" {
			noErr(t, err)
			continue
		}
		if !errors.Is(err, ErrReadOnly) {
			t.Fatalf("%s: %v, want ErrReadOnly", name, err)
		}
	}
	if _, err := cq.Recover(); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("recover: %v", err)
	}
	if _, err := cq.DeleteExpired(1 << 40); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("delete expired: %v", err)
	}
	// CorrectMinOffset only moves the min offset in memory.
	noErr(t, cq.CorrectMinOffset(unitFor(12).Phys))
	if got := cq.MinOffset(); got != 12 {
		t.Fatalf("min offset after correction %d, want 12", got)
	}
	if _, err := ro.FindOrCreate("new", 0); err != nil {
		t.Fatal(err)
	}
	if err := ro.Find("new", 0).Put(0, unitFor(0)); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("put to a new queue: %v", err)
	}
	noErr(t, ro.Close())
	if treeSum(t, root) != before {
		t.Fatal("a read-only store changed the directory")
	}

	// A missing directory is an empty store, and stays missing.
	empty := openReadOnly(t, vfs.Default, filepath.Join(root, "nothing"), tinyUnits, 0)
	if len(empty.Queues()) != 0 {
		t.Fatal("queues in an empty store")
	}
	if _, err := os.Stat(filepath.Join(root, "nothing")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("read-only Open created the root: %v", err)
	}
}

func TestReadOnlyStopsAtInvalidUnit(t *testing.T) {
	fsys := vfs.NewMem()
	w := openStore(t, fsys, "/s", tinyUnits)
	putRange(t, queue(t, w, "t", 0), 0, 25)
	noErr(t, w.FlushAll(0))
	noErr(t, w.Close())
	// A lost page: unit 17 reads as zeros; the valid units after it do not count.
	seg, err := fsys.OpenSegment("/s/consumequeue/t/0/"+segment.Name(10*UnitSize), tinyUnits*UnitSize, vfs.ReadWrite)
	noErr(t, err)
	clear(seg.Data()[7*UnitSize : 8*UnitSize])
	noErr(t, seg.Close())

	ro := openReadOnly(t, fsys, "/s", tinyUnits, 0)
	checkQueue(t, ro.Find("t", 0), 0, 17)
}

func TestReadOnlyRefresh(t *testing.T) {
	fsys := vfs.NewMem()
	w := openStore(t, fsys, "/s", tinyUnits)
	a := queue(t, w, "a", 0)
	putRange(t, a, 0, 5)
	// MaxMapped 1: with two queues in use, refreshes meet unmapped queues too.
	ro := openReadOnly(t, fsys, "/s", tinyUnits, 1)
	checkQueue(t, ro.Find("a", 0), 0, 5)

	putRange(t, a, 5, 8)                   // same file
	putRange(t, queue(t, w, "b", 2), 0, 3) // a new queue
	checkQueue(t, ro.Find("a", 0), 0, 5)   // nothing seen before Refresh
	noErr(t, ro.Refresh())
	checkQueue(t, ro.Find("a", 0), 0, 8)
	checkQueue(t, ro.Find("b", 2), 0, 3)

	putRange(t, a, 8, 33) // rolls three times
	putRange(t, w.Find("b", 2), 3, 4)
	noErr(t, ro.Refresh())
	checkQueue(t, ro.Find("a", 0), 0, 33)
	checkQueue(t, ro.Find("b", 2), 0, 4)

	// The writer rolls: the new file is empty for now, then being created (zero length).
	putRange(t, a, 33, 40)
	noErr(t, ro.Refresh())
	checkQueue(t, ro.Find("a", 0), 0, 40)
	f, err := fsys.Create("/s/consumequeue/a/0/" + segment.Name(40*UnitSize))
	noErr(t, err)
	noErr(t, f.Close())
	noErr(t, ro.Refresh())
	checkQueue(t, ro.Find("a", 0), 0, 40)
	noErr(t, fsys.Remove("/s/consumequeue/a/0/"+segment.Name(40*UnitSize)))

	// Retention deletes old files: the reader's min offset follows.
	noErr(t, w.FlushAll(0))
	if n, err := a.DeleteExpired(unitFor(20).Phys); err != nil || n != 2 {
		t.Fatalf("delete expired: %d, %v", n, err)
	}
	noErr(t, ro.Refresh())
	checkQueue(t, ro.Find("a", 0), 20, 40)

	writable, err := Open(Options{FS: fsys, Root: "/s", UnitsPerFile: tinyUnits})
	noErr(t, err)
	if err := writable.Refresh(); err == nil {
		t.Fatal("Refresh of a writable store succeeded")
	}
	noErr(t, w.Close())
}

// TestReadOnlyWhileWriting reads a directory on the real file system while another Store in
// the same process writes it: every unit the reader sees is whole and in place, the ends it
// sees only grow, and after the writer stops one Refresh shows everything.
func TestReadOnlyWhileWriting(t *testing.T) {
	root := t.TempDir()
	w := openStore(t, vfs.Default, root, tinyUnits)
	const queues, units = 3, 400
	for id := range int32(queues) {
		putRange(t, queue(t, w, "t", id), 0, 1) // so that the reader's Load finds them
	}
	ro := openReadOnly(t, vfs.Default, root, tinyUnits, 2)

	var wg sync.WaitGroup
	done := make(chan struct{})
	wg.Go(func() {
		defer close(done)
		for n := int64(1); n < units; n++ {
			for id := range int32(queues) {
				if err := w.Find("t", id).Put(n, unitFor(n)); err != nil {
					t.Error(err)
					return
				}
			}
			if n%37 == 0 {
				if err := w.FlushAll(2); err != nil {
					t.Error(err)
					return
				}
			}
		}
	})
	last := make([]int64, queues)
	buf := make([]Unit, 16)
	check := func(final bool) {
		noErr(t, ro.Refresh())
		for id := range int32(queues) {
			cq := ro.Find("t", id)
			hi := cq.MaxOffset()
			if hi < last[id] {
				t.Fatalf("queue %d: end went back from %d to %d", id, last[id], hi)
			}
			last[id] = hi
			for n := max(0, hi-40); n < hi; {
				k, err := cq.Read(n, buf)
				noErr(t, err)
				for i := range k {
					got, want := buf[i], unitFor(n+int64(i))
					// The newest unit may have been seen in the middle of its write: its
					// tags code is stored last.
					if newest := n+int64(i) == hi-1 && !final; newest {
						got.TagsCode, want.TagsCode = 0, 0
					}
					if got != want {
						t.Fatalf("queue %d unit %d = %+v, want %+v", id, n+int64(i), buf[i], unitFor(n+int64(i)))
					}
				}
				n += int64(k)
			}
		}
	}
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
			check(false)
		}
	}
	wg.Wait()
	check(true)
	for id := range int32(queues) {
		checkQueue(t, ro.Find("t", id), 0, units)
	}
	if !slices.Equal(last, []int64{units, units, units}) {
		t.Fatalf("final ends %v", last)
	}
	noErr(t, w.Close())
}
