package consumequeue

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/rocketstore/engine/internal/store/segment"
	"github.com/rocketstore/engine/internal/vfs"
)

// TestZeroPastEnd: units stranded behind a lost unit are left alone by Recover; ZeroPastEnd
// clears them, so that appending up to them does not join them to the queue at the next start.
func TestZeroPastEnd(t *testing.T) {
	root := t.TempDir()
	s := openStore(t, vfs.Default, root, 64)
	cq := queue(t, s, "T", 0)
	putRange(t, cq, 0, 20)
	noErr(t, s.FlushAll(0))
	noErr(t, s.Close())

	// A lost page: unit 5 reads as zeros; units 6 to 19 stay behind it.
	name := filepath.Join(root, "consumequeue", "T", "0", segment.Name(0))
	f, err := os.OpenFile(name, os.O_WRONLY, 0)
	noErr(t, err)
	_, err = f.WriteAt(make([]byte, UnitSize), 5*UnitSize)
	noErr(t, err)
	noErr(t, f.Close())

	s = openStore(t, vfs.Default, root, 64)
	_, err = s.Load()
	noErr(t, err)
	cq = s.Find("T", 0)
	_, err = cq.Recover()
	noErr(t, err)
	if cq.MaxOffset() != 5 {
		t.Fatalf("recovered max %d, want 5", cq.MaxOffset())
	}
	noErr(t, cq.ZeroPastEnd())
	if cq.MaxOffset() != 5 {
		t.Fatalf("max %d after ZeroPastEnd, want 5", cq.MaxOffset())
	}
	putRange(t, cq, 5, 8) // the rebuild appends up to the stranded units
	noErr(t, s.FlushAll(0))
	noErr(t, s.Close())

	s = openStore(t, vfs.Default, root, 64)
	defer s.Close()
	_, err = s.Load()
	noErr(t, err)
	cq = s.Find("T", 0)
	_, err = cq.Recover()
	noErr(t, err)
	if cq.MaxOffset() != 8 {
		t.Fatalf("max %d at the next start, want 8: the stranded units came back", cq.MaxOffset())
	}
	checkUnits(t, cq, 0, 8)
}

// TestZeroPastEndBehindALostPage: whole pages of units lost (zeros) with the units of the pages
// after them kept, as the kernel's writeback leaves a mapped file: ZeroPastEnd, which reads only
// what the file system maps as data, finds and clears them behind every zero page.
func TestZeroPastEndBehindALostPage(t *testing.T) {
	mem := vfs.NewMem()
	s := openStore(t, mem, "/s", 1000)
	cq := queue(t, s, "T", 0)
	putRange(t, cq, 0, 1000) // pages 0-4 of the file
	noErr(t, s.FlushAll(0))
	noErr(t, s.Close())
	img := mem.SyncedImage()
	name := filepath.Join("/s", "consumequeue", "T", "0", segment.Name(0))
	seg, err := img.OpenSegment(name, 1000*UnitSize, vfs.ReadWrite)
	noErr(t, err)
	noErr(t, seg.Reserve(1000*UnitSize))
	clear(seg.Data()[4096:8192])   // page 1 lost: units 204 to 409
	clear(seg.Data()[12288:16384]) // and page 3
	noErr(t, seg.Sync(4096, 16384))
	noErr(t, seg.Close())

	s = openStore(t, img, "/s", 1000)
	defer s.Close()
	_, err = s.Load()
	noErr(t, err)
	cq = s.Find("T", 0)
	_, err = cq.Recover()
	noErr(t, err)
	noErr(t, cq.ZeroPastEnd())
	b, err := img.ReadFile(name)
	noErr(t, err)
	end := cq.MaxOffset() * UnitSize
	for i := end; i < int64(len(b)); i++ {
		if b[i] != 0 {
			t.Fatalf("byte %d past the end %d is %#x after ZeroPastEnd", i, end, b[i])
		}
	}
}
