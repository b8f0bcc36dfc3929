package indexfile

import (
	"encoding/binary"
	"fmt"
	"slices"
	"testing"

	"github.com/rocketstore/engine/internal/vfs"
)

// wide has a slot table over three pages, so that the header's page and most slots' pages are
// written back apart.
var wide = Geometry{Slots: 2048, Entries: 300}

// imageWith returns a synced-only image of fsys in which the named file's bytes [from, to) are
// the current ones, as if only those pages had been written back when the power went.
func imageWith(t *testing.T, fsys *vfs.Mem, name string, from, to int64) *vfs.Mem {
	t.Helper()
	cur, err := fsys.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	img := fsys.SyncedImage()
	seg, err := img.OpenSegment(name, int64(len(cur)), vfs.ReadWrite)
	if err != nil {
		t.Fatal(err)
	}
	defer seg.Close()
	if err := seg.Reserve(to); err != nil {
		t.Fatal(err)
	}
	copy(seg.Data()[from:to], cur[from:to])
	if err := seg.Sync(from, to); err != nil {
		t.Fatal(err)
	}
	return img
}

// checkChains fails on an entry of the last file whose link does not go to an older entry, as
// `engine verify` reports it.
func checkChains(t *testing.T, s *Service) {
	t.Helper()
	f := s.Files()[len(s.Files())-1]
	for no := int32(1); no < f.Header().IndexCount; no++ {
		if e, _ := f.Entry(no); e.PrevIndex >= no || e.PrevIndex < 0 {
			t.Fatalf("entry %d links to %d", no, e.PrevIndex)
		}
	}
}

// TestRelinkLastSlotPageWithoutHeader: ten keys indexed and flushed, ten more indexed after the
// flush; the power goes when the slot table's pages have reached the disk and the header's has
// not (nor the new entries'). The slots name entries 11 to 20, past the header's count of 11.
// After RelinkLast and re-dispatch of the ten records, no entry links to itself (the writer
// would link entry 11 to the slot that names 11) and every key is found once.
func TestRelinkLastSlotPageWithoutHeader(t *testing.T) {
	fsys := vfs.NewMem()
	s := openService(t, Options{FS: fsys, Geometry: wide})
	for i := range int64(10) {
		build(t, s, 100*i, t0+1000*i, fmt.Sprint("k", i))
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	for i := int64(10); i < 20; i++ {
		build(t, s, 100*i, t0+1000*i, fmt.Sprint("k", i))
	}
	name := s.Files()[0].Name()
	img := imageWith(t, fsys, name, wide.SlotOffset(0), wide.EntryOffset(0))
	if h, _ := DecodeHeader(mustRead(t, img, name)); h.IndexCount != 11 {
		t.Fatalf("the image's header counts %d entries, want the flushed 11", h.IndexCount)
	}

	r := openService(t, Options{FS: img, Geometry: wide})
	if _, _, err := r.RelinkLast(1000, nil); err != nil { // re-dispatch starts at k10's record
		t.Fatal(err)
	}
	for i := int64(10); i < 20; i++ {
		build(t, r, 100*i, t0+1000*i, fmt.Sprint("k", i))
	}
	checkChains(t, r)
	for i := range int64(20) {
		if got := query(t, r, fmt.Sprint("k", i), 64, 0, 1<<62); !slices.Equal(got, []int64{100 * i}) {
			t.Errorf("k%d: %v", i, got)
		}
	}
}

// TestRelinkLastDistrustsTheHeader: the header is rewritten by every put, so a crash can leave
// it torn; here its count reads 3 although ten entries were flushed before. RelinkLast keeps the
// ten (they are sound and name records below the re-dispatch start) and every key is found.
func TestRelinkLastDistrustsTheHeader(t *testing.T) {
	fsys := vfs.NewMem()
	s := openService(t, Options{FS: fsys, Geometry: wide})
	for i := range int64(10) {
		build(t, s, 100*i, t0+1000*i, fmt.Sprint("k", i))
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	name := s.Files()[0].Name()
	img := fsys.SyncedImage()
	patchFile(t, img, name, func(b []byte) { binary.BigEndian.PutUint32(b[offIndexCount:], 3) })

	r := openService(t, Options{FS: img, Geometry: wide})
	rebuildFrom, dropped, err := r.RelinkLast(1000, nil)
	if err != nil || dropped != 0 || rebuildFrom != -1 {
		t.Fatalf("RelinkLast: rebuild from %d, %d dropped, %v; want nothing dropped", rebuildFrom, dropped, err)
	}
	for i := range int64(10) {
		if got := query(t, r, fmt.Sprint("k", i), 64, 0, 1<<62); !slices.Equal(got, []int64{100 * i}) {
			t.Errorf("k%d: %v", i, got)
		}
	}
	if h := r.Files()[0].Header(); h.IndexCount != 11 || h.EndPhyOffset != 900 {
		t.Fatalf("header after relink: %+v", h)
	}
}

// TestRollMakesTheFullFileDurable: a roll flushes the full file and the new file's header
// before the new file is used, so that a crash that keeps the new file keeps the full one whole
// and the new one's inherited end values (with which the writer skips what the full file
// indexed). Nothing is flushed here but by the roll.
func TestRollMakesTheFullFileDurable(t *testing.T) {
	fsys := vfs.NewMem()
	s := openService(t, Options{FS: fsys, Geometry: tiny})
	for i := range int64(5) { // four fill the first file, the fifth rolls
		build(t, s, 100*i, t0+1000*i, fmt.Sprint("k", i))
	}
	img := fsys.SyncedImage()
	r := openService(t, Options{FS: img, Geometry: tiny})
	files := r.Files()
	if len(files) != 2 {
		t.Fatalf("%d files after the crash", len(files))
	}
	if h := files[0].Header(); h.IndexCount != tiny.Entries || h.EndPhyOffset != 300 {
		t.Fatalf("the full file after the crash: %+v", h)
	}
	if h := files[1].Header(); h.BeginPhyOffset != 300 || h.EndPhyOffset != 300 || h.EndTimestamp != t0+3000 {
		t.Fatalf("the new file's inherited header after the crash: %+v", h)
	}
	for i := range int64(4) {
		if got := query(t, r, fmt.Sprint("k", i), 64, 0, 1<<62); !slices.Equal(got, []int64{100 * i}) {
			t.Errorf("k%d: %v", i, got)
		}
	}
}

func mustRead(t *testing.T, fsys vfs.FS, name string) []byte {
	t.Helper()
	b, err := fsys.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// patchFile changes the bytes of a file of a Mem image through a mapping, durably.
func patchFile(t *testing.T, fsys *vfs.Mem, name string, change func([]byte)) {
	t.Helper()
	size := int64(len(mustRead(t, fsys, name)))
	seg, err := fsys.OpenSegment(name, size, vfs.ReadWrite)
	if err != nil {
		t.Fatal(err)
	}
	defer seg.Close()
	if err := seg.Reserve(size); err != nil {
		t.Fatal(err)
	}
	change(seg.Data())
	if err := seg.Sync(0, size); err != nil {
		t.Fatal(err)
	}
}

// TestClearFromTornAcrossAHole: an entry past the kept ones whose first bytes reached disk and
// whose rest lies in a page that did not (a hole) is cleared too; clearFrom looked only at
// entries wholly inside a data extent, so this one stayed half written for the writer to reach.
// In wide, entry 202 spans bytes 12272 to 12292, across the page edge at 12288.
func TestClearFromTornAcrossAHole(t *testing.T) {
	fsys := vfs.NewMem()
	s := openService(t, Options{FS: fsys, Geometry: wide})
	for i := range int64(10) {
		build(t, s, 100*i, t0+1000*i, fmt.Sprint("k", i))
	}
	f := s.Files()[0]
	at := wide.EntryOffset(202)
	if at/4096 == (at+EntrySize-1)/4096 {
		t.Fatalf("entry 202 at %d does not cross a page edge", at)
	}
	edge := (at/4096 + 1) * 4096
	for i := at; i < edge; i++ {
		f.data[i] = 0xab // the torn entry's first bytes; the page after it stays a hole
	}
	f.wmu.Lock()
	cleared, err := f.clearFrom(11)
	f.wmu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if !allZero(f.data[at:edge]) || cleared != 1 {
		t.Fatalf("cleared %d; the entry across the hole holds % x", cleared, f.data[at:at+EntrySize])
	}
}
