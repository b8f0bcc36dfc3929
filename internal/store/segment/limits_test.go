package segment

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/rocketstore/engine/internal/vfs"
)

// TestQueueAtMaxEnd: a queue started at its last file (the seam: a file named there, as a store
// near 2^63 bytes would have) writes it to its end, at MaxEnd; the next file, which would end
// past 2^63-1, is refused with ErrEnd by Roll and PrepareNext and by Open when it is on disk, and
// nothing is created for it. Reopened, the last file still ends at MaxEnd and TruncateTo sets
// its position (a wrapped end made TruncateTo skip it: the queue's end went negative).
func TestQueueAtMaxEnd(t *testing.T) {
	dir := t.TempDir()
	last := MaxEnd(testSize) - testSize
	if MaxEnd(testSize) > math.MaxInt64-testSize+1 || MaxEnd(testSize)%testSize != 0 {
		t.Fatalf("MaxEnd(%d) = %d", testSize, MaxEnd(testSize))
	}
	q := openQueue(t, vfs.Default, dir, 0)
	f, err := q.Roll(last)
	if err != nil {
		t.Fatal(err)
	}
	if f.End() != MaxEnd(testSize) || f.Name() != filepath.Join(dir, "09223372036854644736") {
		t.Fatalf("last file %s ends at %d", f.Name(), f.End())
	}
	fill(t, q, testSize)
	if q.MaxOffset() != MaxEnd(testSize) {
		t.Fatalf("MaxOffset %d, want %d", q.MaxOffset(), MaxEnd(testSize))
	}
	if _, err := q.Roll(f.End()); !errors.Is(err, ErrEnd) {
		t.Fatalf("roll past the last file: %v", err)
	}
	if err := q.PrepareNext(); !errors.Is(err, ErrEnd) {
		t.Fatalf("prepare past the last file: %v", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("%d files, want the last one alone", len(ents))
	}
	if err := q.Flush(q.MaxOffset()); err != nil {
		t.Fatal(err)
	}
	q.Close()

	q = openQueue(t, vfs.Default, dir, 0)
	if l := q.Last(); l == nil || l.Base() != last || l.End() != MaxEnd(testSize) {
		t.Fatalf("reopened: last file %v", l)
	}
	if err := q.TruncateTo(last + 100); err != nil {
		t.Fatal(err)
	}
	if q.MaxOffset() != last+100 || q.Last().Wrote() != 100 {
		t.Fatalf("truncated to %d: MaxOffset %d, wrote %d", last+100, q.MaxOffset(), q.Last().Wrote())
	}
	q.Close()

	// A file on disk that would end past 2^63-1 (a name another writer chose) is refused.
	past := filepath.Join(t.TempDir(), Name(MaxEnd(testSize)))
	if err := os.WriteFile(past, make([]byte, testSize), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(Options{FS: vfs.Default, Dir: filepath.Dir(past), FileSize: testSize}); !errors.Is(err, ErrEnd) {
		t.Fatalf("opened a file that ends past 2^63-1: %v", err)
	}
}
