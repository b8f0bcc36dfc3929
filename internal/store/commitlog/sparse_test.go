package commitlog

import (
	"testing"

	"github.com/rocketstore/engine/internal/golden"
	"github.com/rocketstore/engine/internal/vfs"
)

// honestExtents maps seg as the strictest file system may: only pages with a non-zero byte.
func honestExtents(seg []byte) func(int64) []vfs.Extent {
	return func(from int64) []vfs.Extent {
		var out []vfs.Extent
		for p := from; p < int64(len(seg)); {
			end := min((p/4096+1)*4096, int64(len(seg)))
			if firstNonZero(seg[p:end]) >= 0 {
				if n := len(out); n > 0 && out[n-1].End == p {
					out[n-1].End = end
				} else {
					out = append(out, vfs.Extent{Off: p, End: end})
				}
			}
			p = end
		}
		return out
	}
}

// TestScanSparseReadsOnlyTheExtents: past the last record, ScanSparse looks for stray bytes
// only where the file system says data may be. Told the truth, it finds a stray byte anywhere
// in the segment, as Scan does; told that a part is a hole, it does not read that part (which
// is why the mapping must come from the file system, never from a guess). Whatever it is told,
// it reads every record in turn: an extent map cannot make it stop before a valid record.
func TestScanSparseReadsOnlyTheExtents(t *testing.T) {
	tv1 := golden.Load().TV1.Bytes()
	seg := make([]byte, 64<<10)
	n := 0
	for range 3 {
		n += copy(seg[n:], tv1)
	}
	for _, stray := range []int{n + 4, n + 100, 40000, len(seg) - 1} {
		seg[stray] = 7
		end, tail, err := ScanSparse(seg, 0, Check{}, honestExtents(seg), nil)
		if end != n || tail != TailCorrupt || reasonOf(err) != ReasonTornZero || err.(*CorruptError).Got != int64(stray-n) {
			t.Fatalf("stray byte at %d, true extents: %d, %v, %v", stray, end, tail, err)
		}
		wantEnd, wantTail, wantErr := Scan(seg, 0, Check{}, nil)
		if end != wantEnd || tail != wantTail || err.Error() != wantErr.Error() {
			t.Fatalf("stray byte at %d: ScanSparse %d %v %v, Scan %d %v %v", stray, end, tail, err, wantEnd, wantTail, wantErr)
		}
		seg[stray] = 0
	}

	seg[40000] = 7
	without := func(from int64) []vfs.Extent {
		return []vfs.Extent{{Off: from, End: 36 << 10}, {Off: 44 << 10, End: int64(len(seg))}}
	}
	if end, tail, err := ScanSparse(seg, 0, Check{}, without, nil); end != n || tail != TailClean || err != nil {
		t.Fatalf("stray byte in a part mapped as a hole: %d, %v, %v; want it unread", end, tail, err)
	}
	seg[40000] = 0

	none := func(int64) []vfs.Extent { return nil }
	var found []int
	end, tail, err := ScanSparse(seg, 0, Check{}, none, func(off int, v View) error {
		found = append(found, off)
		return nil
	})
	if end != n || tail != TailClean || err != nil || len(found) != 3 {
		t.Fatalf("a map with no data at all: %d, %v, %v, records at %v; want the 3 records", end, tail, err, found)
	}
}

// TestStartsAt: recovery trusts an offset another writer may have written past only where a
// record of that offset, the blank filler or nothing at all starts; inside a record it does
// not, even where eight zero bytes sit there.
func TestStartsAt(t *testing.T) {
	fsys := vfs.NewMem()
	l := openTestLog(t, fsys, "/s/commitlog", 1<<16)
	var starts []int64
	var zerosAt int64
	for seq := range 5 {
		m := &Message{Topic: "T", BornHost: testBorn, StoreHost: testStore, Body: make([]byte, 300)}
		m.Body[0] = 1 // then a run of zeros
		rec, err := AppendRecord(nil, m, EncodeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		phys, err := l.Append(rec, int64(seq), 1, false)
		if err != nil {
			t.Fatal(err)
		}
		starts = append(starts, phys)
		zerosAt = phys + int64(len(rec)) - 100
	}
	end := l.MaxOffset()
	for i, s := range starts {
		if !l.StartsAt(s) {
			t.Fatalf("record %d at %d: not a start", i, s)
		}
		for _, inside := range []int64{s + 1, s + 4, s + 200} {
			if l.StartsAt(inside) {
				t.Fatalf("%d, inside record %d: taken for a start", inside, i)
			}
		}
	}
	if !nothingAt(l.Queue().Last().Data(), int(zerosAt)) {
		t.Fatalf("no zeros at %d", zerosAt)
	}
	if l.StartsAt(zerosAt) {
		t.Fatalf("%d, in the zeros inside the last record: taken for a start", zerosAt)
	}
	for _, off := range []int64{end, end + 4096, 1 << 16, 1 << 20} {
		if !l.StartsAt(off) {
			t.Fatalf("%d, past the data: not a start", off)
		}
	}
}
