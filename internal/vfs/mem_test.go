package vfs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"
)

// must returns v, or panics with err: a panic fails the test with a stack, and the call site
// stays one line (Go cannot pass t alongside a multi-value call).
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func noErr(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, fsys FS, name string, data []byte, sync bool) {
	t.Helper()
	f := must(fsys.Create(name))
	must(f.Write(data))
	if sync {
		noErr(t, f.Sync())
	}
	noErr(t, f.Close())
}

func exists(fsys FS, name string) bool {
	_, err := fsys.Stat(name)
	return err == nil
}

func TestMemSyncedImageKeepsSyncedLosesUnsynced(t *testing.T) {
	m := NewMem()
	noErr(t, m.MkdirAll("store/commitlog"))
	seg := must(m.CreateSegment("store/commitlog/0", 3*crashPageSize, 3*crashPageSize))
	data := seg.Data()
	for i := range 2 * crashPageSize {
		data[i] = byte(i%251 + 1)
	}
	// Sync a range that starts and ends inside pages: only exactly those bytes count.
	noErr(t, seg.Sync(100, crashPageSize+7))
	noErr(t, m.SyncDir("store/commitlog"))
	writeFile(t, m, "store/checkpoint", []byte("synced"), true)
	writeFile(t, m, "store/abort", []byte("unsynced"), false)
	noErr(t, m.SyncDir("store"))
	f := must(m.Create("store/checkpoint")) // truncation not synced: the old content survives
	must(f.Write([]byte("newer, unsynced")))

	img := m.SyncedImage()
	got := must(img.ReadFile("store/commitlog/0"))
	if len(got) != 3*crashPageSize {
		t.Fatalf("segment image has %d bytes", len(got))
	}
	for i, b := range got {
		want := byte(0)
		if i >= 100 && i < crashPageSize+7 {
			want = data[i]
		}
		if b != want {
			t.Fatalf("byte %d: got %d, want %d", i, b, want)
		}
	}
	if got := must(img.ReadFile("store/checkpoint")); string(got) != "synced" {
		t.Fatalf("checkpoint = %q", got)
	}
	if got := must(img.ReadFile("store/abort")); len(got) != 0 {
		t.Fatalf("unsynced abort content survived: %q", got)
	}
	// The original is untouched and the image is independent of it.
	if got := must(m.ReadFile("store/checkpoint")); string(got) != "newer, unsynced" {
		t.Fatalf("original checkpoint = %q", got)
	}
	s2 := must(img.OpenSegment("store/commitlog/0", 3*crashPageSize, ReadWrite))
	s2.Data()[0] = 0xFF
	if data[0] == 0xFF {
		t.Fatal("image shares bytes with the original")
	}
	noErr(t, f.Close())
	noErr(t, seg.Close())
}

func TestMemDirectoryDurability(t *testing.T) {
	m := NewMem()
	noErr(t, m.MkdirAll("a"))
	noErr(t, m.MkdirAll("b"))
	writeFile(t, m, "a/x", []byte("x"), true)
	writeFile(t, m, "a/y", []byte("y"), true)
	writeFile(t, m, "a/z", []byte("z"), true)
	noErr(t, m.SyncDir("a"))
	writeFile(t, m, "a/new", []byte("n"), true)

	noErr(t, m.Rename("a/x", "a/x2")) // never synced
	noErr(t, m.Remove("a/y"))         // never synced
	noErr(t, m.Rename("a/z", "b/z"))  // only the new directory synced
	noErr(t, m.SyncDir("b"))
	img := m.SyncedImage()
	for name, want := range map[string]bool{
		"a/x": true, "a/x2": false, "a/y": true, "a/new": false, "a/z": true, "b/z": true,
	} {
		if exists(img, name) != want {
			t.Errorf("%s exists = %v after crash, want %v", name, !want, want)
		}
	}
	// Both names of the renamed file are one node, as two links of one inode would be.
	if img.dirs["a"].files["z"] != img.dirs["b"].files["z"] {
		t.Error("a/z and b/z are different nodes in the image")
	}
	if got := must(img.ReadFile("a/x")); string(got) != "x" {
		t.Errorf("a/x = %q", got)
	}

	noErr(t, m.SyncDir("a"))
	img = m.SyncedImage()
	for name, want := range map[string]bool{
		"a/x": false, "a/x2": true, "a/y": false, "a/new": true, "a/z": false, "b/z": true,
	} {
		if exists(img, name) != want {
			t.Errorf("after SyncDir: %s exists = %v, want %v", name, !want, want)
		}
	}
}

// A directory Mkdir made is lost by a crash, with everything in it, until its parent is synced;
// syncing the directory itself keeps its entries, not it. With UnsyncedDirChanges it may land.
func TestMemMkdirDurableOnceParentSynced(t *testing.T) {
	m := NewMem()
	noErr(t, m.MkdirAll("q"))
	noErr(t, m.Mkdir("q/t"))
	noErr(t, m.Mkdir("q/t/0"))
	writeFile(t, m, "q/t/0/f", []byte("f"), true)
	noErr(t, m.SyncDir("q/t/0"))
	noErr(t, m.SyncDir("q/t")) // makes q/t/0 durable, but q/t itself is not
	if img := m.SyncedImage(); exists(img, "q/t") || exists(img, "q/t/0/f") {
		t.Fatal("an unsynced directory survived the crash")
	}
	if err := m.Mkdir("q/t"); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("Mkdir of an existing directory: %v", err)
	}
	if err := m.Mkdir("q/x/y"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Mkdir without its parent: %v", err)
	}
	seen := map[bool]int{}
	for seed := range uint64(32) {
		img := m.CrashImage(rand.New(rand.NewPCG(seed, 3)), CrashOptions{UnsyncedDirChanges: true})
		seen[exists(img, "q/t/0/f")]++
	}
	if len(seen) != 2 {
		t.Fatalf("with UnsyncedDirChanges q/t survived %v, want both outcomes", seen)
	}
	noErr(t, m.SyncDir("q"))
	if got := must(m.SyncedImage().ReadFile("q/t/0/f")); string(got) != "f" {
		t.Fatalf("q/t/0/f = %q after every parent was synced", got)
	}
}

func TestMemUnsyncedDirChangesMayLand(t *testing.T) {
	m := NewMem()
	writeFile(t, m, "old", []byte("o"), true)
	noErr(t, m.SyncDir("."))
	noErr(t, m.Rename("old", "new"))
	seen := map[[2]bool]int{}
	for seed := range uint64(64) {
		img := m.CrashImage(rand.New(rand.NewPCG(seed, 7)), CrashOptions{UnsyncedDirChanges: true})
		seen[[2]bool{exists(img, "old"), exists(img, "new")}]++
	}
	if len(seen) != 4 {
		t.Fatalf("outcomes %v, want all four combinations of old/new", seen)
	}
	img := m.CrashImage(rand.New(rand.NewPCG(1, 1)), CrashOptions{})
	if !exists(img, "old") || exists(img, "new") {
		t.Fatal("default options must lose the unsynced rename")
	}
}

func TestMemCapacity(t *testing.T) {
	m := NewMem(WithCapacity(10_000))
	noErr(t, m.MkdirAll("d"))
	usage := func() Usage { return must(m.DiskUsage("d")) }
	if u := usage(); u.Total != 10_000 || u.Free != 10_000 || u.Avail != 10_000 {
		t.Fatalf("empty usage %+v", u)
	}

	_, err := m.CreateSegment("d/big", 20_000, 10_001)
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("CreateSegment over capacity: %v", err)
	}
	if exists(m, "d/big") || len(must(m.ReadDir("d"))) != 0 || usage().Free != 10_000 {
		t.Fatal("failed CreateSegment left something behind")
	}

	seg := must(m.CreateSegment("d/seg", 20_000, 4_000))
	if u := usage(); u.Free != 6_000 {
		t.Fatalf("after reserving 4000: %+v", u)
	}
	if err := seg.Reserve(10_001); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Reserve over capacity: %v", err)
	}
	if seg.Reserved() != 4_000 || usage().Free != 6_000 {
		t.Fatalf("failed Reserve changed state: reserved %d, %+v", seg.Reserved(), usage())
	}
	noErr(t, seg.Reserve(9_000))
	if seg.Reserved() != 9_000 || usage().Free != 1_000 {
		t.Fatalf("after Reserve(9000): reserved %d, %+v", seg.Reserved(), usage())
	}

	f := must(m.Create("d/meta"))
	must(f.Write(make([]byte, 600)))
	if _, err := f.Write(make([]byte, 600)); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Write over capacity: %v", err)
	}
	if st := must(m.Stat("d/meta")); st.Size != 600 {
		t.Fatalf("failed write changed the size to %d", st.Size)
	}
	noErr(t, f.Close())

	// Removing a mapped file frees nothing until the mapping goes.
	noErr(t, m.Remove("d/seg"))
	if usage().Free != 400 {
		t.Fatalf("space freed while still mapped: %+v", usage())
	}
	noErr(t, seg.Close())
	if usage().Free != 9_400 {
		t.Fatalf("space not freed after Close: %+v", usage())
	}
	m.SetCapacity(500)
	if u := usage(); u.Free != 0 || u.UsedRatio() != 1 {
		t.Fatalf("over capacity: %+v", u)
	}
}

func TestMemSegmentOpenAndErrors(t *testing.T) {
	m := NewMem()
	if _, err := m.CreateSegment("nodir/s", 10, 10); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("create without parent: %v", err)
	}
	seg := must(m.CreateSegment("s", 8192, 0))
	if _, err := m.CreateSegment("s", 8192, 0); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("create existing: %v", err)
	}
	copy(seg.Data(), "hello")
	if _, err := m.OpenSegment("missing", 8192, ReadWrite); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("open missing: %v", err)
	}
	if _, err := m.OpenSegment("s", 4096, ReadWrite); err == nil {
		t.Fatal("open with the wrong size succeeded")
	}
	ro := must(m.OpenSegment("s", 8192, ReadOnly))
	if string(ro.Data()[:5]) != "hello" {
		t.Fatal("a second mapping does not share the bytes")
	}
	if err := ro.Reserve(10); err == nil {
		t.Fatal("Reserve on a read-only segment succeeded")
	}
	noErr(t, ro.Sync(0, 5))
	rw := must(m.OpenSegment("s", 8192, ReadWrite))
	if rw.Reserved() != 0 {
		t.Fatalf("read-write open reserved %d, want 0 (unknown until Reserve)", rw.Reserved())
	}
	noErr(t, rw.Reserve(8192))
	if rw.Reserved() != 8192 {
		t.Fatalf("reserved %d after Reserve", rw.Reserved())
	}
	if err := seg.Sync(5, 4); err == nil {
		t.Fatal("Sync with from > to succeeded")
	}
	if err := seg.Prefault(0, 1); err == nil {
		t.Fatal("Prefault past Reserved succeeded")
	}
	if _, err := m.Create("s"); !errors.Is(err, syscall.EBUSY) {
		t.Fatalf("truncating a mapped file: %v", err)
	}
	for _, s := range []Segment{seg, ro, rw} {
		noErr(t, s.Close())
	}
	if err := seg.Close(); !errors.Is(err, fs.ErrClosed) {
		t.Fatalf("second Close: %v", err)
	}
	if err := seg.Sync(0, 1); !errors.Is(err, fs.ErrClosed) {
		t.Fatalf("Sync after Close: %v", err)
	}
}

func TestMemLock(t *testing.T) {
	m := NewMem()
	l := must(m.Lock("lock"))
	if !exists(m, "lock") {
		t.Fatal("Lock did not create the file")
	}
	if _, err := m.Lock("lock"); !errors.Is(err, ErrLocked) {
		t.Fatalf("second Lock: %v", err)
	}
	noErr(t, m.Rename("lock", "moved"))
	if _, err := m.Lock("moved"); !errors.Is(err, ErrLocked) {
		t.Fatalf("lock did not follow the renamed file: %v", err)
	}
	noErr(t, l.Close())
	l2 := must(m.Lock("moved"))
	noErr(t, l2.Close())
	if err := l2.Close(); !errors.Is(err, fs.ErrClosed) {
		t.Fatalf("second Close: %v", err)
	}
}

func TestMemStatReadDirAndClock(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m := NewMem(WithClock(func() time.Time { return now }))
	noErr(t, m.MkdirAll("/data/cq/topic"))
	seg := must(m.CreateSegment("/data/seg", 4096, 4096))
	writeFile(t, m, "/data/b", []byte("12345"), false)
	writeFile(t, m, "/data/a", nil, false)

	got := must(m.ReadDir("/data"))
	want := []DirEntry{{Name: "a"}, {Name: "b"}, {Name: "cq", IsDir: true}, {Name: "seg"}}
	if !slices.Equal(got, want) {
		t.Fatalf("ReadDir = %v, want %v", got, want)
	}
	if st := must(m.Stat("/data/b")); st.Size != 5 || !st.ModTime.Equal(now) || st.IsDir {
		t.Fatalf("Stat b = %+v", st)
	}
	if st := must(m.Stat("/data/cq")); !st.IsDir {
		t.Fatalf("Stat cq = %+v", st)
	}
	created := now
	now = now.Add(time.Hour)
	noErr(t, seg.Sync(0, 0)) // an empty sync writes nothing, so no new mtime
	if st := must(m.Stat("/data/seg")); !st.ModTime.Equal(created) {
		t.Fatalf("empty Sync moved mtime to %v", st.ModTime)
	}
	noErr(t, seg.Sync(0, 10))
	if st := must(m.Stat("/data/seg")); !st.ModTime.Equal(now) {
		t.Fatalf("Sync left mtime at %v", st.ModTime)
	}
	noErr(t, seg.Close())

	if _, err := m.ReadDir("/data/b"); !errors.Is(err, syscall.ENOTDIR) {
		t.Fatalf("ReadDir of a file: %v", err)
	}
	if _, err := m.Create("/data/b/x"); !errors.Is(err, syscall.ENOTDIR) {
		t.Fatalf("create under a file: %v", err)
	}
	if err := m.Remove("/data/cq"); !errors.Is(err, syscall.ENOTEMPTY) {
		t.Fatalf("remove non-empty dir: %v", err)
	}
	noErr(t, m.Remove("/data/cq/topic"))
	if exists(m, "/data/cq/topic") {
		t.Fatal("empty directory not removed")
	}
}

func TestMemFileReadWrite(t *testing.T) {
	m := NewMem()
	writeFile(t, m, "f", []byte("hello world"), true)
	f := must(m.Open("f"))
	buf := make([]byte, 5)
	if n, err := f.ReadAt(buf, 6); n != 5 || err != nil || string(buf) != "world" {
		t.Fatalf("ReadAt = %d, %v, %q", n, err, buf)
	}
	all := must(io.ReadAll(f))
	if string(all) != "hello world" {
		t.Fatalf("ReadAll = %q", all)
	}
	if _, err := f.Write([]byte("x")); err == nil {
		t.Fatal("Write on a file opened for reading succeeded")
	}
	noErr(t, f.Close())
}

// TestMemOpenUpdate: OpenUpdate opens only an existing file, without truncating it; WriteAt
// rewrites bytes in place at no cost in space (so on a full Mem too), only growing the file can
// fail with ENOSPC, and the rewrite is durable once synced, not before.
func TestMemOpenUpdate(t *testing.T) {
	m := NewMem()
	if _, err := m.OpenUpdate("f"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("OpenUpdate of a missing file: %v", err)
	}
	writeFile(t, m, "f", []byte("hello world"), true)
	noErr(t, m.SyncDir("."))
	m.SetCapacity(11) // full
	f := must(m.OpenUpdate("f"))
	if n, err := f.WriteAt([]byte("HELLO"), 0); n != 5 || err != nil {
		t.Fatalf("WriteAt in place on a full Mem: %d, %v", n, err)
	}
	if got := must(m.ReadFile("f")); string(got) != "HELLO world" {
		t.Fatalf("after WriteAt: %q", got)
	}
	if got := must(m.SyncedImage().ReadFile("f")); string(got) != "hello world" {
		t.Fatalf("unsynced rewrite durable: %q", got)
	}
	if _, err := f.WriteAt([]byte("!!"), 10); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("WriteAt growing a full Mem: %v", err)
	}
	if _, err := f.WriteAt([]byte("x"), -1); err == nil {
		t.Fatal("WriteAt at a negative offset")
	}
	noErr(t, f.Sync())
	noErr(t, f.Close())
	if got := must(m.SyncedImage().ReadFile("f")); string(got) != "HELLO world" {
		t.Fatalf("synced rewrite: %q", got)
	}
	r := must(m.Open("f"))
	if _, err := r.WriteAt([]byte("x"), 0); err == nil {
		t.Fatal("WriteAt on a file opened for reading succeeded")
	}
	noErr(t, r.Close())
}

// TestMemSyncer: SyncAll makes durable every directory entry (Mkdir'd directories too) and every
// unmapped file under the directory it was opened on, and of mapped segments exactly the ranges
// named (the rest of a mapping is other goroutines' to write); nothing outside the directory.
func TestMemSyncer(t *testing.T) {
	m := NewMem()
	noErr(t, m.MkdirAll("root/old"))
	noErr(t, m.MkdirAll("other"))
	noErr(t, m.Mkdir("root/new"))
	writeFile(t, m, "root/new/file", []byte("plain"), false)
	writeFile(t, m, "other/file", []byte("outside"), false)
	seg := must(m.CreateSegment("root/old/seg", 8192, 8192))
	copy(seg.Data(), "named|not named")
	s := must(m.OpenSyncer("root"))
	before := m.Syncs()
	m.CutPowerAt(before + 1)
	if err := s.SyncAll([]SegmentRange{{Seg: seg, From: 0, To: 5}}); !errors.Is(err, ErrPowerCut) {
		t.Fatalf("SyncAll after the power cut: %v", err)
	}
	if exists(m.SyncedImage(), "root/new/file") {
		t.Fatal("SyncAll made something durable after the power cut")
	}
	m.CutPowerAt(0)
	noErr(t, s.SyncAll([]SegmentRange{{Seg: seg, From: 0, To: 5}}))
	if n := m.Syncs() - before; n != 2 {
		t.Fatalf("two SyncAll counted as %d syncs", n)
	}
	noErr(t, s.Close())
	img := m.SyncedImage()
	if got, ok := must(img.ReadFile("root/new/file")), exists(img, "root/new/file"); !ok || string(got) != "plain" {
		t.Fatalf("a file under the root: %q, exists %v", got, ok)
	}
	if data := must(img.ReadFile("root/old/seg")); string(data[:15]) != "named\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00" {
		t.Fatalf("the segment: %q, want only the range named", data[:15])
	}
	if exists(img, "other/file") {
		t.Fatal("a file outside the root synced")
	}
	noErr(t, seg.Close())
	if _, err := m.OpenSyncer("missing"); err == nil {
		t.Fatal("a Syncer on a missing directory")
	}
	other := must(NewMem().CreateSegment("x", 4096, 4096))
	if err := must(m.OpenSyncer("root")).SyncAll([]SegmentRange{{Seg: other, To: 1}}); err == nil {
		t.Fatal("a segment of another Mem synced")
	}
}

// TestMemSegmentSyncWhileWritingPastTo is the flusher/appender overlap: one goroutine writes
// into Data while another syncs what was written before. Run with -race.
func TestMemSegmentSyncWhileWritingPastTo(t *testing.T) {
	m := NewMem()
	seg := must(m.CreateSegment("s", 1<<16, 1<<16))
	data := seg.Data()
	written := make(chan int64, 8)
	go func() {
		defer close(written)
		rng := rand.New(rand.NewPCG(1, 2))
		for end := 0; end < len(data); {
			next := min(end+1+rng.IntN(700), len(data))
			for i := end; i < next; i++ {
				data[i] = byte(i%255 + 1)
			}
			end = next
			written <- int64(end)
		}
	}()
	var from int64
	for to := range written {
		noErr(t, seg.Sync(from, to))
		from = to
	}
	noErr(t, m.SyncDir("."))
	if got := must(m.SyncedImage().ReadFile("s")); !bytes.Equal(got, data) {
		t.Fatal("synced image differs from what was written and synced")
	}
	noErr(t, seg.Close())
}

// TestMemConcurrentUse exercises the tables from many goroutines; the race detector judges it.
func TestMemConcurrentUse(t *testing.T) {
	m := NewMem(WithCapacity(1 << 20))
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			dir := fmt.Sprintf("g%d", g)
			if err := m.MkdirAll(dir); err != nil {
				t.Error(err)
				return
			}
			for i := range 50 {
				name := fmt.Sprintf("%s/%d", dir, i)
				seg, err := m.CreateSegment(name, 4096, 1024)
				if err != nil {
					t.Error(err)
					return
				}
				seg.Data()[0] = byte(i)
				_ = seg.Sync(0, 1)
				_ = seg.Reserve(4096)
				_, _ = m.ReadDir(dir)
				_, _ = m.DiskUsage(dir)
				_ = m.Rename(name, name+".old")
				_ = m.SyncDir(dir)
				_ = seg.Close()
				_ = m.Remove(name + ".old")
			}
		})
	}
	wg.Wait()
	if u := must(m.DiskUsage(".")); u.Free != u.Total {
		t.Fatalf("space leaked: %+v", u)
	}
}

// TestMemCrashImageProperties checks over 200 seeds that each byte of an image is the durable or
// the current byte at its offset (or garbage only where enabled and the two differ), that every
// range synced and not rewritten since is intact, and that the original is not changed.
func TestMemCrashImageProperties(t *testing.T) {
	const segSize = 5*crashPageSize + 300 // a short last page
	var lost, kept, mixed int
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 0xC0FFEE))
		m := NewMem()
		noErr(t, m.MkdirAll("d"))
		seg := must(m.CreateSegment("d/seg", segSize, segSize))
		data := seg.Data()
		want := make([]byte, segSize)   // what a synced byte must read as
		synced := make([]bool, segSize) // synced and not rewritten since
		meta := must(m.Create("d/meta"))
		noErr(t, m.SyncDir("d"))
		for range 40 {
			switch rng.IntN(4) {
			case 0, 1:
				off := rng.IntN(segSize)
				end := min(off+1+rng.IntN(2*crashPageSize), segSize)
				for i := off; i < end; i++ {
					data[i] = byte(rng.IntN(255) + 1)
					synced[i] = false
				}
			case 2:
				from := rng.IntN(segSize)
				to := from + rng.IntN(segSize-from+1)
				noErr(t, seg.Sync(int64(from), int64(to)))
				for i := from; i < to; i++ {
					want[i], synced[i] = data[i], true
				}
			case 3:
				if rng.IntN(3) == 0 {
					noErr(t, meta.Sync())
				} else {
					must(meta.Write(bytes.Repeat([]byte{byte(rng.IntN(255) + 1)}, rng.IntN(3000))))
				}
			}
		}
		node := m.dirs["d"].files["seg"]
		metaNode := m.dirs["d"].files["meta"]
		curSeg, durSeg := slices.Clone(node.data), zeroExtend(node.durable, segSize)
		curMeta, durMeta := slices.Clone(metaNode.data), zeroExtend(metaNode.durable, metaNode.durLen)

		garbage := seed%2 == 1
		opts := CrashOptions{UnsyncedDirChanges: seed%3 == 0}
		if garbage {
			opts.GarbageProb = 0.2
		}
		img := m.CrashImage(rng, opts)
		if !bytes.Equal(node.data, curSeg) || !bytes.Equal(zeroExtend(node.durable, segSize), durSeg) {
			t.Fatalf("seed %d: CrashImage changed the original", seed)
		}

		got := must(img.ReadFile("d/seg"))
		if len(got) != segSize {
			t.Fatalf("seed %d: image segment has %d bytes", seed, len(got))
		}
		for i, b := range got {
			ok := b == durSeg[i] || b == curSeg[i] || (garbage && durSeg[i] != curSeg[i])
			if !ok || (synced[i] && b != want[i]) {
				t.Fatalf("seed %d byte %d: got %d, durable %d, current %d, synced %v want %d",
					seed, i, b, durSeg[i], curSeg[i], synced[i], want[i])
			}
		}
		for off := 0; off < segSize; off += crashPageSize {
			end := min(off+crashPageSize, segSize)
			if bytes.Equal(durSeg[off:end], curSeg[off:end]) {
				continue
			}
			switch {
			case bytes.Equal(got[off:end], durSeg[off:end]):
				lost++
			case bytes.Equal(got[off:end], curSeg[off:end]):
				kept++
			default:
				mixed++
			}
		}

		gotMeta := must(img.ReadFile("d/meta"))
		if len(gotMeta) != len(curMeta) && len(gotMeta) != len(durMeta) {
			t.Fatalf("seed %d: meta has %d bytes, want %d or %d", seed, len(gotMeta), len(curMeta), len(durMeta))
		}
		curX, durX := zeroExtend(curMeta, len(gotMeta)), zeroExtend(durMeta, len(gotMeta))
		for i, b := range gotMeta {
			if b != curX[i] && b != durX[i] && !(garbage && curX[i] != durX[i]) {
				t.Fatalf("seed %d meta byte %d: got %d, durable %d, current %d", seed, i, b, durX[i], curX[i])
			}
		}
		noErr(t, meta.Close())
		noErr(t, seg.Close())
	}
	if lost == 0 || kept == 0 || mixed == 0 {
		t.Fatalf("unsynced pages: %d lost, %d kept, %d mixed; want all three", lost, kept, mixed)
	}
}

// zeroExtend returns b cut or padded with zeros to n bytes, as a file of length n reads.
func zeroExtend(b []byte, n int) []byte {
	out := make([]byte, n)
	copy(out, b)
	return out
}
