package consumequeue

import (
	"testing"

	"github.com/rocketstore/engine/internal/vfs"
)

// tinyUnits is the file size of most tests: 10 units (200 bytes) per file, so that a few dozen
// units cross several files.
const tinyUnits = 10

func openStore(t testing.TB, fsys vfs.FS, root string, units int) *Store {
	t.Helper()
	s, err := Open(Options{FS: fsys, Root: root, UnitsPerFile: units, ReserveUnits: 4})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func queue(t testing.TB, s *Store, topic string, id int32) *ConsumeQueue {
	t.Helper()
	cq, err := s.FindOrCreate(topic, id)
	if err != nil {
		t.Fatal(err)
	}
	return cq
}

// unitFor is the unit the tests write for queue offset n: records of 100 + n%7 bytes laid end
// to end from CommitLog offset 1000, so that Phys grows with n and every field differs.
func unitFor(n int64) Unit {
	return Unit{Phys: 1000 + n*200, Size: int32(100 + n%7), TagsCode: n*31 - 500}
}

func putRange(t testing.TB, cq *ConsumeQueue, from, to int64) {
	t.Helper()
	for n := from; n < to; n++ {
		if err := cq.Put(n, unitFor(n)); err != nil {
			t.Fatalf("put %d: %v", n, err)
		}
	}
}

func noErr(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// checkUnits reads [from, to) back and compares it with unitFor.
func checkUnits(t testing.TB, cq *ConsumeQueue, from, to int64) {
	t.Helper()
	buf := make([]Unit, 7)
	for n := from; n < to; {
		k, err := cq.Read(n, buf[:min(int64(len(buf)), to-n)])
		if err != nil {
			t.Fatalf("read %d: %v", n, err)
		}
		if k == 0 {
			t.Fatalf("read %d: nothing", n)
		}
		for i := range k {
			if buf[i] != unitFor(n+int64(i)) {
				t.Fatalf("unit %d = %+v, want %+v", n+int64(i), buf[i], unitFor(n+int64(i)))
			}
		}
		n += int64(k)
	}
}

// reopen closes s (after a full flush) and opens, loads and recovers a new Store on root.
func reopen(t testing.TB, s *Store, fsys vfs.FS, root string, units int) *Store {
	t.Helper()
	noErr(t, s.FlushAll(0))
	noErr(t, s.Close())
	return load(t, fsys, root, units)
}

// load opens, loads and recovers a Store on root.
func load(t testing.TB, fsys vfs.FS, root string, units int) *Store {
	t.Helper()
	s := openStore(t, fsys, root, units)
	if skipped, err := s.Load(); err != nil || len(skipped) > 0 {
		t.Fatalf("load: %v, skipped %v", err, skipped)
	}
	if _, err := s.RecoverAll(); err != nil {
		t.Fatal(err)
	}
	return s
}
