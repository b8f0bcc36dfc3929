package consumequeue

import (
	"errors"
	"testing"

	"github.com/rocketstore/engine/internal/store/segment"
	"github.com/rocketstore/engine/internal/vfs"
)

// TestQueueAtMaxOffset: a queue started at its last offsets (Put of an empty queue at an offset
// is the seam: a partition taken over starts there) holds them up to Store.MaxQueueOffset, whose
// file ends at segment.MaxEnd, for file sizes that divide 2^63-1's neighbourhood differently;
// the offset after it is refused before anything is written; and after a restart the queue keeps
// its bounds and reads back (with a bound of MaxInt64/20, the last file of a default queue ended
// past 2^63-1 and the reopened queue's MaxOffset was negative).
func TestQueueAtMaxOffset(t *testing.T) {
	for _, units := range []int{tinyUnits, 7, DefaultUnitsPerFile} {
		root := t.TempDir()
		s := openStore(t, vfs.Default, root, units)
		last := s.MaxQueueOffset()
		fileSize := int64(units) * UnitSize
		if (last+1)*UnitSize != segment.MaxEnd(fileSize) {
			t.Fatalf("%d units: the last offset %d ends at %d, the last file at %d", units, last, (last+1)*UnitSize, segment.MaxEnd(fileSize))
		}
		cq := queue(t, s, "T", 0)
		for i := range int64(3) {
			if err := cq.Put(last-2+i, Unit{Phys: 100 * (i + 1), Size: 10}); err != nil {
				t.Fatalf("%d units: put %d: %v", units, last-2+i, err)
			}
		}
		if err := cq.Put(last+1, Unit{Phys: 400, Size: 10}); !errors.Is(err, ErrInvalidUnit) {
			t.Fatalf("%d units: put past the last offset: %v", units, err)
		}
		if cq.MinOffset() != last-2 || cq.MaxOffset() != last+1 {
			t.Fatalf("%d units: [%d, %d), want [%d, %d)", units, cq.MinOffset(), cq.MaxOffset(), last-2, last+1)
		}
		if err := s.FlushAll(0); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}

		s = openStore(t, vfs.Default, root, units)
		if _, err := s.Load(); err != nil {
			t.Fatal(err)
		}
		if maxPhys, err := s.RecoverAll(); err != nil || maxPhys != 310 {
			t.Fatalf("%d units: recovered to %d, %v", units, maxPhys, err)
		}
		cq = s.Find("T", 0)
		if cq.MinOffset() != last-2 || cq.MaxOffset() != last+1 {
			t.Fatalf("%d units: reopened [%d, %d), want [%d, %d)", units, cq.MinOffset(), cq.MaxOffset(), last-2, last+1)
		}
		buf := make([]Unit, 4)
		if n, err := cq.Read(last-2, buf); err != nil || n != 3 || buf[2].Phys != 300 {
			t.Fatalf("%d units: read back %d units %+v, %v", units, n, buf[:n], err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
