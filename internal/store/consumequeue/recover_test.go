package consumequeue

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/rocketstore/engine/internal/store/segment"
	"github.com/rocketstore/engine/internal/vfs"
)

// patchUnit overwrites the bytes of queue offset n in the closed store at root.
func patchUnit(t *testing.T, root string, n int64, b []byte) {
	t.Helper()
	fileSize := int64(tinyUnits * UnitSize)
	pos := n * UnitSize
	name := filepath.Join(root, "consumequeue", "T", "0", segment.Name(pos-pos%fileSize))
	f, err := os.OpenFile(name, os.O_WRONLY, 0)
	noErr(t, err)
	_, err = f.WriteAt(b, pos%fileSize)
	noErr(t, err)
	noErr(t, f.Close())
}

func TestRecoverAfterReopen(t *testing.T) {
	root := t.TempDir()
	s := openStore(t, vfs.Default, root, tinyUnits)
	cq := queue(t, s, "T", 0)
	putRange(t, cq, 0, 37)
	s = reopen(t, s, vfs.Default, root, tinyUnits)
	cq = s.Find("T", 0)
	if cq.MaxOffset() != 37 || cq.MaxPhysicalOffset() != unitFor(36).End() || s.MaxPhysicalOffset() != unitFor(36).End() {
		t.Fatalf("max %d phys %d", cq.MaxOffset(), cq.MaxPhysicalOffset())
	}
	if got := s.MaxOffsets()["T"][0]; got != 37 {
		t.Fatalf("MaxOffsets: %d", got)
	}
	checkUnits(t, cq, 0, 37)
	// Re-dispatch of what is there is skipped; the queue goes on where it ended.
	putRange(t, cq, 30, 45)
	checkUnits(t, cq, 0, 45)

	// A queue that ends exactly at a file boundary.
	putRange(t, cq, 45, 50)
	s = reopen(t, s, vfs.Default, root, tinyUnits)
	defer s.Close()
	cq = s.Find("T", 0)
	if cq.MaxOffset() != 50 {
		t.Fatalf("max %d", cq.MaxOffset())
	}
	putRange(t, cq, 50, 51)
	checkUnits(t, cq, 0, 51)
}

func TestRecoverStopsAtFirstInvalidUnit(t *testing.T) {
	for _, c := range []struct {
		name  string
		patch func(t *testing.T, root string)
		end   int64
	}{
		{"zeroed tail", func(t *testing.T, root string) {
			for n := int64(22); n < 25; n++ {
				patchUnit(t, root, n, make([]byte, UnitSize))
			}
		}, 22},
		{"hole then stale units", func(t *testing.T, root string) {
			patchUnit(t, root, 23, make([]byte, UnitSize))
		}, 23},
		{"torn unit, size lost", func(t *testing.T, root string) {
			patchUnit(t, root, 21, []byte{0, 0, 0, 0, 0, 0, 0x10, 0, 0, 0, 0, 0})
		}, 21},
		{"negative offset", func(t *testing.T, root string) {
			patchUnit(t, root, 24, []byte{0xff})
		}, 24},
		{"first unit of the last file", func(t *testing.T, root string) {
			for n := int64(20); n < 25; n++ {
				patchUnit(t, root, n, make([]byte, UnitSize))
			}
		}, 20},
		{"older than the third newest file", func(t *testing.T, root string) {
			patchUnit(t, root, 3, make([]byte, UnitSize)) // file 0 is not scanned with 3 files after it
		}, 25},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			s := openStore(t, vfs.Default, root, tinyUnits)
			cq := queue(t, s, "T", 0)
			putRange(t, cq, 0, 25)
			if c.name == "older than the third newest file" {
				putRange(t, cq, 25, 45)
				c.end = 45
			}
			noErr(t, s.FlushAll(0))
			noErr(t, s.Close())
			c.patch(t, root)
			s = load(t, vfs.Default, root, tinyUnits)
			defer s.Close()
			cq = s.Find("T", 0)
			if cq.MaxOffset() != c.end || cq.MaxPhysicalOffset() != unitFor(c.end-1).End() {
				t.Fatalf("end %d phys %d, want %d", cq.MaxOffset(), cq.MaxPhysicalOffset(), c.end)
			}
			if c.end >= 5 {
				checkUnits(t, cq, 5, c.end)
			}
			putRange(t, cq, c.end, c.end+12)
			checkUnits(t, cq, 5, c.end+12)
		})
	}
}

// TestRecoverLostFirstUnits: the pre-blank fill survived a crash but the queue's units did
// not, or nothing did; re-dispatch must be able to start the queue again.
func TestRecoverLostFirstUnits(t *testing.T) {
	for _, lost := range []int64{15, 10} { // the unit only, or the unit and the blanks
		t.Run(fmt.Sprint(lost), func(t *testing.T) {
			root := t.TempDir()
			s := openStore(t, vfs.Default, root, tinyUnits)
			putRange(t, queue(t, s, "T", 0), 15, 16)
			noErr(t, s.FlushAll(0))
			noErr(t, s.Close())
			for n := lost; n < 16; n++ {
				patchUnit(t, root, n, make([]byte, UnitSize))
			}
			s = load(t, vfs.Default, root, tinyUnits)
			defer s.Close()
			cq := s.Find("T", 0)
			if cq.MaxPhysicalOffset() != -1 || s.MaxPhysicalOffset() != -1 {
				t.Fatalf("a blank counted for the max physical offset: %d", cq.MaxPhysicalOffset())
			}
			putRange(t, cq, 15, 20)
			if cq.MinOffset() != 15 || cq.MaxOffset() != 20 {
				t.Fatalf("min %d max %d", cq.MinOffset(), cq.MaxOffset())
			}
			checkUnits(t, cq, 15, 20)
		})
	}
}

func TestTruncateDirty(t *testing.T) {
	for _, c := range []struct {
		name string
		keep int64 // units that stay
	}{
		{"inside a file", 33},
		{"at a file boundary", 30},
		{"inside the first file", 4},
		{"before everything", 0},
		{"after everything", 45},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			s := openStore(t, vfs.Default, root, tinyUnits)
			cq := queue(t, s, "T", 0)
			putRange(t, cq, 0, 45)
			s = reopen(t, s, vfs.Default, root, tinyUnits)
			cq = s.Find("T", 0)
			phy := unitFor(c.keep).Phys // the first dropped unit starts exactly there
			if c.keep == 45 {
				phy = unitFor(44).End()
			}
			noErr(t, s.TruncateDirtyAll(phy))
			want := c.keep
			if cq.MaxOffset() != want {
				t.Fatalf("max %d, want %d", cq.MaxOffset(), want)
			}
			wantPhys := int64(-1)
			if want > 0 {
				wantPhys = unitFor(want - 1).End()
				checkUnits(t, cq, 0, want)
			}
			if cq.MaxPhysicalOffset() != wantPhys {
				t.Fatalf("phys %d, want %d", cq.MaxPhysicalOffset(), wantPhys)
			}
			dir := filepath.Join(root, "consumequeue", "T", "0")
			files := (want + tinyUnits - 1) / tinyUnits
			if got := fileNames(t, dir); int64(len(got)) != files {
				t.Fatalf("files %v, want %d", got, files)
			}
			// The dropped units of the file that stays are zero on disk.
			if want%tinyUnits != 0 {
				data, err := os.ReadFile(filepath.Join(dir, segment.Name(want/tinyUnits*tinyUnits*UnitSize)))
				noErr(t, err)
				if !allZero(data[want%tinyUnits*UnitSize:]) {
					t.Fatal("dropped units left on disk")
				}
			}
			// Writing goes on at the new end, and a restart finds the same queue.
			putRange(t, cq, want, want+3)
			s = reopen(t, s, vfs.Default, root, tinyUnits)
			defer s.Close()
			cq = s.Find("T", 0)
			if cq.MaxOffset() != want+3 {
				t.Fatalf("after restart: max %d, want %d", cq.MaxOffset(), want+3)
			}
			checkUnits(t, cq, max(0, want-5), want+3)
		})
	}
}

func TestCorrectMinOffsetAndDeleteExpired(t *testing.T) {
	root := t.TempDir()
	s := openStore(t, vfs.Default, root, tinyUnits)
	defer s.Close()
	cq := queue(t, s, "T", 0)
	putRange(t, cq, 0, 45)
	dir := filepath.Join(root, "consumequeue", "T", "0")

	noErr(t, cq.CorrectMinOffset(0))
	if cq.MinOffset() != 0 {
		t.Fatalf("min %d", cq.MinOffset())
	}
	noErr(t, cq.CorrectMinOffset(unitFor(13).Phys-5)) // inside record 12: 13 is the first whole one
	if cq.MinOffset() != 13 {
		t.Fatalf("min %d, want 13", cq.MinOffset())
	}
	noErr(t, s.CorrectMinOffsetAll(unitFor(27).Phys)) // a later file: RocketMQ only searches the first
	if cq.MinOffset() != 27 {
		t.Fatalf("min %d, want 27", cq.MinOffset())
	}
	// Files 0 and 1 end below record 27; file 2 ends above it.
	n, err := s.DeleteExpiredAll(unitFor(27).Phys)
	noErr(t, err)
	if names := fileNames(t, dir); n != 2 || len(names) != 3 || names[0] != segment.Name(2*tinyUnits*UnitSize) {
		t.Fatalf("deleted %d, left %v", n, names)
	}
	if _, err := cq.Unit(19); err == nil {
		t.Fatal("read a unit of a deleted file")
	}
	checkUnits(t, cq, 27, 45)
	// Everything expired: the last file stays, the queue has no valid entry.
	n, err = cq.DeleteExpired(unitFor(45).Phys)
	noErr(t, err)
	if names := fileNames(t, dir); n != 2 || len(names) != 1 || cq.MinOffset() != 45 || cq.MaxOffset() != 45 {
		t.Fatalf("deleted %d, left %v, min %d max %d", n, names, cq.MinOffset(), cq.MaxOffset())
	}
	if st := cq.PullStatus(44); st != OffsetTooSmall {
		t.Fatalf("status %v", st)
	}
	// New messages are readable again.
	putRange(t, cq, 45, 47)
	noErr(t, cq.CorrectMinOffset(unitFor(45).Phys))
	if cq.MinOffset() != 45 {
		t.Fatalf("min %d", cq.MinOffset())
	}
	checkUnits(t, cq, 45, 47)
}
