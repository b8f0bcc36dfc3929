package consumequeue

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/rocketstore/engine/internal/vfs"
)

// first is the unit of the CommitLog's first record: offset 0, no tags (tagsCode 0), so that
// it differs from a Blank only by its size.
var first = Unit{Phys: 0, Size: 300, TagsCode: 0}

// firstThenRange puts first at start, then unitFor(n) for n in (start, end).
func firstThenRange(t *testing.T, cq *ConsumeQueue, start, end int64) {
	t.Helper()
	noErr(t, cq.Put(start, first))
	putRange(t, cq, start+1, end)
}

// checkFirstAt checks that cq holds first at start and unitFor after it, up to end, and that
// the min offset, the time search and CorrectMinOffset all start at start.
func checkFirstAt(t *testing.T, cq *ConsumeQueue, start, end int64, when string) {
	t.Helper()
	if cq.MinOffset() != start || cq.MaxOffset() != end {
		t.Fatalf("%s: [%d, %d), want [%d, %d)", when, cq.MinOffset(), cq.MaxOffset(), start, end)
	}
	if u, err := cq.Unit(start); err != nil || u != first {
		t.Fatalf("%s: unit %d = %+v, %v", when, start, u, err)
	}
	if end > start+1 {
		checkUnits(t, cq, start+1, end)
	}
	// Store times grow with Phys: every message is at or after time 0.
	off, err := cq.OffsetByTime(0, func(phys int64, _ int32) (int64, error) { return phys, nil })
	if err != nil || off != start {
		t.Fatalf("%s: offset for time 0: %d, %v", when, off, err)
	}
	if err := cq.CorrectMinOffset(0); err != nil || cq.MinOffset() != start {
		t.Fatalf("%s: after CorrectMinOffset(0): min %d, %v", when, cq.MinOffset(), err)
	}
}

// TestFirstUnitAtPhysZero: a queue whose first unit names the CommitLog's first record, at
// offset 0 (a queue started at offset 0), or above it after blank units (a queue taken over,
// started at 15, or at 10, where the fill is a whole file before it), is read from that unit:
// while written, after a restart (recovery skips only the blank units) and read-only.
func TestFirstUnitAtPhysZero(t *testing.T) {
	for _, start := range []int64{0, 15, 10, 19} {
		t.Run(fmt.Sprint(start), func(t *testing.T) {
			root := t.TempDir()
			s := openStore(t, vfs.Default, root, tinyUnits)
			cq := queue(t, s, "T", 0)
			firstThenRange(t, cq, start, start+3)
			checkFirstAt(t, cq, start, start+3, "written")
			s = reopen(t, s, vfs.Default, root, tinyUnits)
			defer s.Close()
			checkFirstAt(t, s.Find("T", 0), start, start+3, "recovered")
			checkFirstAt(t, openReadOnly(t, vfs.Default, root, tinyUnits, 0).Find("T", 0), start, start+3, "read-only")

			// The only unit of its queue, too: nothing after it tells it from a filler.
			root = t.TempDir()
			s2 := openStore(t, vfs.Default, root, tinyUnits)
			noErr(t, queue(t, s2, "T", 0).Put(start, first))
			s2 = reopen(t, s2, vfs.Default, root, tinyUnits)
			defer s2.Close()
			checkFirstAt(t, s2.Find("T", 0), start, start+1, "alone, recovered")
		})
	}
}

// patchSize overwrites the size field of unit n in the closed store at root.
func patchSize(t *testing.T, root string, n int64, size uint32) {
	t.Helper()
	b := make([]byte, 4)
	binary.BigEndian.PutUint32(b, size)
	full := make([]byte, 12)
	copy(full[8:], b)
	patchUnit(t, root, n, full) // Phys 0 and the size; TagsCode is already 0
}

// TestTornFillers: what a crash can leave of blank units (a size with some of its bytes lost)
// is told from a real unit by what follows it: each one followed by another unit at Phys 0 is a
// filler, so the queue still reads from its start, whether its first record is at Phys 0 or not;
// a torn filler that ends the queue (its first unit lost with it) leaves the queue empty for
// Put if it keeps the size's first byte, and otherwise passes for a unit that recovery's check
// against the CommitLog then cuts.
func TestTornFillers(t *testing.T) {
	const start = 19 // fill: units 10 to 18
	torn := []uint32{0x000000FF, 0x0000FFFF, 0x00FFFFFF, 0x7FFF0000, 0x7F0000FF}
	for _, atZero := range []bool{true, false} {
		t.Run(fmt.Sprint("first record at phys 0: ", atZero), func(t *testing.T) {
			root := t.TempDir()
			s := openStore(t, vfs.Default, root, tinyUnits)
			cq := queue(t, s, "T", 0)
			if atZero {
				firstThenRange(t, cq, start, start+4)
			} else {
				putRange(t, cq, start, start+4)
			}
			noErr(t, s.FlushAll(0))
			noErr(t, s.Close())
			for i, size := range torn { // units 10, 12, 14, 16 and 18 (the last before the start)
				patchSize(t, root, 10+2*int64(i), size)
			}
			s = load(t, vfs.Default, root, tinyUnits)
			defer s.Close()
			cq = s.Find("T", 0)
			if cq.MinOffset() != start {
				t.Fatalf("min offset %d, want %d", cq.MinOffset(), start)
			}
			if atZero {
				checkFirstAt(t, cq, start, start+4, "recovered")
			} else {
				checkQueue(t, cq, start, start+4)
			}
		})
	}

	// The first unit lost with the fill's last units torn: a size with its first byte is no
	// record's, so the queue holds only fillers and starts again where Put says.
	root := t.TempDir()
	s := openStore(t, vfs.Default, root, tinyUnits)
	firstThenRange(t, queue(t, s, "T", 0), start, start+1)
	noErr(t, s.FlushAll(0))
	noErr(t, s.Close())
	patchUnit(t, root, start, make([]byte, UnitSize))
	patchSize(t, root, start-1, 0x7FFFFF00)
	patchSize(t, root, start-3, 0xFF)
	s = load(t, vfs.Default, root, tinyUnits)
	cq := s.Find("T", 0)
	firstThenRange(t, cq, start, start+2)
	checkFirstAt(t, cq, start, start+2, "started again")
	noErr(t, s.Close())

	// Without it, the torn last filler is taken for a unit: recovery's check against the
	// CommitLog refuses it (no record has that size there), the queue is cut before it, and Put
	// starts the queue again.
	root = t.TempDir()
	s = openStore(t, vfs.Default, root, tinyUnits)
	firstThenRange(t, queue(t, s, "T", 0), start, start+1)
	noErr(t, s.FlushAll(0))
	noErr(t, s.Close())
	patchUnit(t, root, start, make([]byte, UnitSize))
	patchSize(t, root, start-1, 0xFFFF)
	s = load(t, vfs.Default, root, tinyUnits)
	defer s.Close()
	cq = s.Find("T", 0)
	if cq.MinOffset() != start-1 || cq.MaxOffset() != start {
		t.Fatalf("a torn last filler: [%d, %d)", cq.MinOffset(), cq.MaxOffset())
	}
	record := func(_ int64, u Unit) bool { return u == first } // the CommitLog's record at 0
	noErr(t, cq.TruncateUnverified(1000, record))
	if cq.MaxOffset() != start-1 {
		t.Fatalf("after the check: max %d, want %d", cq.MaxOffset(), start-1)
	}
	firstThenRange(t, cq, start, start+2)
	checkFirstAt(t, cq, start, start+2, "checked, started again")
}
