package indexfile

import (
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/rocketstore/engine/internal/vfs"
)

// clock is a test clock that moves by step on every reading.
type clock struct {
	t    time.Time
	step time.Duration
}

func (c *clock) now() time.Time { t := c.t; c.t = c.t.Add(c.step); return t }

const t0 = 1_700_000_000_000

func openService(t *testing.T, opts Options) *Service {
	t.Helper()
	if opts.FS == nil {
		opts.FS = vfs.NewMem()
	}
	if opts.Dir == "" {
		opts.Dir = "/store/index"
	}
	if opts.Now == nil {
		opts.Now = (&clock{t: time.UnixMilli(t0)}).now // frozen: every name collides
	}
	if opts.Location == nil {
		opts.Location = time.UTC
	}
	s, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// build indexes one message of topic "T" with the given keys, in that order, as dispatch hands
// them over (their hashes).
func build(t *testing.T, s *Service, phyOffset, storeTimestamp int64, keys ...string) int64 {
	t.Helper()
	filled, err := s.BuildHashes(phyOffset, storeTimestamp, hashes("T", keys...))
	if err != nil {
		t.Fatalf("BuildHashes(%d, %d, %q): %v", phyOffset, storeTimestamp, keys, err)
	}
	return filled
}

// hashes are the index hashes of topic#key for each key.
func hashes(topic string, keys ...string) []int32 {
	h := make([]int32, len(keys))
	for i, k := range keys {
		h[i] = KeyHash(topic, k)
	}
	return h
}

func query(t *testing.T, s *Service, key string, maxNum int, begin, end int64) []int64 {
	t.Helper()
	res, err := s.Query(nil, "T", key, maxNum, begin, end)
	if err != nil {
		t.Fatal(err)
	}
	return res.PhyOffsets
}

func names(files []*File) []string {
	var out []string
	for _, f := range files {
		out = append(out, path.Base(f.Name()))
	}
	return out
}

// TestBuildHashesOrderAndSkips: a message's hashes go in in the order given; one below the last
// file's endPhyOffset (already indexed) or without keys leaves the file as it was, and one at the
// same phy offset as the last is indexed again (RocketMQ's <). Which keys a message has, and
// whether it is indexed at all, is package derive's (TestBuilderIndexKeys).
func TestBuildHashesOrderAndSkips(t *testing.T) {
	s := openService(t, Options{Geometry: Geometry{Slots: 64, Entries: 64}})
	build(t, s, 100, t0, "U1", "a", "b")
	f := s.Files()[0]
	var got []Entry
	f.Each(func(_ int32, e Entry) bool { got = append(got, e); return true })
	want := []int32{KeyHash("T", "U1"), KeyHash("T", "a"), KeyHash("T", "b")}
	if len(got) != len(want) {
		t.Fatalf("entries %+v, want hashes %v", got, want)
	}
	for i := range want {
		if got[i].KeyHash != want[i] || got[i].PhyOffset != 100 {
			t.Errorf("entry %d = %+v, want hash %d", i+1, got[i], want[i])
		}
	}
	before := f.Header()
	build(t, s, 99, t0, "U0") // already indexed
	build(t, s, 300, t0)      // no keys
	if h := f.Header(); h != before {
		t.Fatalf("skipped messages changed the header: %+v -> %+v", before, h)
	}
	build(t, s, 400, t0+1000, "U3", "a")
	build(t, s, 500, t0+2000, "a")
	if got := query(t, s, "a", 64, 0, 1<<62); !slices.Equal(got, []int64{500, 400, 100}) {
		t.Fatalf("query a = %v", got)
	}
	if got := query(t, s, "U0", 64, 0, 1<<62); len(got) != 0 {
		t.Fatalf("message below endPhyOffset indexed: %v", got)
	}
	// The same phy offset as the last one is not "below" it: indexed again (RocketMQ's <).
	build(t, s, 500, t0+2000, "z")
	if got := query(t, s, "z", 64, 0, 1<<62); !slices.Equal(got, []int64{500}) {
		t.Fatalf("query z = %v", got)
	}
}

func TestBuildHashesRolls(t *testing.T) {
	s := openService(t, Options{Geometry: tiny}) // 4 keys per file
	for i := range int64(4) {
		if filled := build(t, s, 100*i, t0+1000*i, fmt.Sprint("k", i)); filled != 0 {
			t.Fatalf("message %d: filled = %d", i, filled)
		}
	}
	if len(s.Files()) != 1 || !s.Files()[0].Full() {
		t.Fatal("first file not full after 4 keys")
	}
	// The 5th key rolls; the full file's endTimestamp is returned for the checkpoint.
	const ts5 = t0 + 3000 + 4999
	if filled := build(t, s, 400, ts5, "k4"); filled != t0+3000 {
		t.Fatalf("filled = %d, want %d", filled, t0+3000)
	}
	files := s.Files()
	if got := names(files); !slices.Equal(got, []string{"20231114221320000", "20231114221320001"}) {
		t.Fatalf("names %v (a frozen clock must give the next millisecond)", got)
	}
	second := files[1]
	e, _ := second.Entry(1)
	if e.TimeDiff != 4 { // (ts5 - previous end) / 1000, against the inherited begin
		t.Errorf("first entry of the rolled file: timeDiff %d, want 4", e.TimeDiff)
	}
	want := Header{BeginTimestamp: ts5, EndTimestamp: ts5, BeginPhyOffset: 400, EndPhyOffset: 400, HashSlotCount: 1, IndexCount: 2}
	if h := second.Header(); h != want {
		t.Errorf("rolled header %+v, want %+v", h, want)
	}

	// A message whose keys straddle a roll: 3 keys with 3 free entries, then 2 more.
	filled := build(t, s, 500, ts5+1000, "m", "x", "y", "z", "w")
	if filled != ts5+1000 || len(s.Files()) != 3 {
		t.Fatalf("straddling message: filled %d, %d files", filled, len(s.Files()))
	}
	if got := query(t, s, "w", 64, 0, 1<<62); !slices.Equal(got, []int64{500}) {
		t.Fatalf("key in the third file: %v", got)
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
}

func TestServiceQueryAcrossFiles(t *testing.T) {
	s := openService(t, Options{Geometry: tiny, MaxQueryNum: 5})
	// 12 messages, 4 per file, all with key "k" at seconds 0..11.
	for i := range int64(12) {
		build(t, s, i, t0+1000*i, "k")
	}
	if n := len(s.Files()); n != 3 {
		t.Fatalf("%d files", n)
	}
	if got := query(t, s, "k", 64, 0, 1<<62); !slices.Equal(got, []int64{11, 10, 9, 8, 7}) {
		t.Errorf("capped at MaxQueryNum 5: %v", got)
	}
	if got := query(t, s, "k", 3, 0, 1<<62); !slices.Equal(got, []int64{11, 10, 9}) {
		t.Errorf("maxNum 3: %v", got)
	}
	if got := query(t, s, "k", 64, t0+2000, t0+5000); !slices.Equal(got, []int64{5, 4, 3, 2}) {
		t.Errorf("time window over two files: %v", got)
	}
	// Phy 8 opened the third file: its timeDiff, 1 s, was measured against the second file's end
	// (t0+7000) and the begin then reset to t0+8000, so it reads back as t0+9000. RocketMQ too.
	res, err := s.Query(make([]int64, 7), "T", "k", 64, t0+9000, t0+9000)
	if err != nil || !slices.Equal(res.PhyOffsets, []int64{9, 8}) {
		t.Errorf("one second: %v %v", res.PhyOffsets, err)
	}
	if res.IndexLastUpdateTimestamp != t0+11000 || res.IndexLastUpdatePhyOffset != 11 {
		t.Errorf("last update %d / %d", res.IndexLastUpdateTimestamp, res.IndexLastUpdatePhyOffset)
	}
	if got := query(t, s, "other", 64, 0, 1<<62); len(got) != 0 {
		t.Errorf("unknown key: %v", got)
	}
}

// TestServiceReopen writes on the real file system, closes, loads the files again, queries, and
// keeps writing into the last file, whose blocks the OS cannot vouch for after a reopen.
func TestServiceReopen(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "index")
	clk := &clock{t: time.UnixMilli(t0), step: time.Second}
	opts := Options{FS: vfs.Default, Dir: dir, Geometry: Geometry{Slots: 8, Entries: 1024}, ReserveStep: 4096, Now: clk.now, Location: time.UTC}
	s := openService(t, opts)
	for i := range int64(1500) {
		build(t, s, i, t0+i, fmt.Sprint("k", i%10))
	}
	wantNames := names(s.Files())
	want := query(t, s, "k3", 64, 0, 1<<62)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Query(nil, "T", "k3", 64, 0, 1<<62); !errors.Is(err, ErrClosed) {
		t.Fatalf("query after Close: %v", err)
	}

	s = openService(t, opts)
	if got := names(s.Files()); !slices.Equal(got, wantNames) || len(got) != 2 {
		t.Fatalf("reloaded %v, want %v", got, wantNames)
	}
	if got := query(t, s, "k3", 64, 0, 1<<62); !slices.Equal(got, want) || len(got) != 64 {
		t.Fatalf("after reload %v, want %v", got, want)
	}
	build(t, s, 1500, t0+1500, "k3")
	build(t, s, 1499, t0+1500, "k3") // below endPhyOffset
	if got := query(t, s, "k3", 2, 0, 1<<62); !slices.Equal(got, []int64{1500, 1493}) {
		t.Fatalf("after writing on: %v", got)
	}
	if n := len(s.Files()); n != 2 {
		t.Fatalf("%d files after writing on", n)
	}
}

func TestDropNewerThan(t *testing.T) {
	s := openService(t, Options{Geometry: tiny})
	var checkpoint int64
	for i := range int64(10) {
		if filled := build(t, s, i, t0+1000*i, fmt.Sprint("u", i)); filled != 0 && checkpoint == 0 {
			checkpoint = filled // only the first roll reaches the checkpoint before the "crash"
		}
	}
	all := names(s.Files())
	dropped, err := s.DropNewerThan(checkpoint)
	if err != nil {
		t.Fatal(err)
	}
	if len(dropped) != 2 || len(s.Files()) != 1 {
		t.Fatalf("dropped %v, kept %v (of %v)", dropped, names(s.Files()), all)
	}
	// Re-dispatch from the start: messages 0-3 are skipped, 4-9 rebuild the dropped files.
	for i := range int64(10) {
		build(t, s, i, t0+1000*i, fmt.Sprint("u", i))
	}
	if n := len(s.Files()); n != 3 {
		t.Fatalf("%d files after rebuilding", n)
	}
	for i := range int64(10) {
		want := []int64{i}
		if i == 3 {
			// The kept file ends at phy 3 and the skip test is "< endPhyOffset", as in
			// RocketMQ: the message at exactly that offset is indexed a second time.
			want = []int64{3, 3}
		}
		if got := query(t, s, fmt.Sprint("u", i), 64, 0, 1<<62); !slices.Equal(got, want) {
			t.Errorf("u%d: %v, want %v", i, got, want)
		}
	}
}

// TestDeleteExpiredUnderReader deletes files on the real file system while a reader holds the
// oldest: the reader keeps reading valid bytes; the mapping goes away when it releases.
func TestDeleteExpiredUnderReader(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "index")
	s := openService(t, Options{FS: vfs.Default, Dir: dir, Geometry: tiny})
	for i := range int64(10) { // files end at phy 3, 7 and (last) 9
		build(t, s, i, t0+1000*i, "k")
	}
	files := s.Files()
	oldest := files[0]
	if !oldest.Acquire() {
		t.Fatal("Acquire failed")
	}
	if deleted, err := s.DeleteExpired(3); err != nil || len(deleted) != 0 {
		t.Fatalf("min 3 = endPhyOffset of the oldest: deleted %v, %v", deleted, err)
	}
	deleted, err := s.DeleteExpired(1 << 40)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(deleted, []string{files[0].Name(), files[1].Name()}) || len(s.Files()) != 1 {
		t.Fatalf("deleted %v, left %v: the last file must stay", deleted, names(s.Files()))
	}
	if _, err := vfs.Default.Stat(files[0].Name()); err == nil {
		t.Fatal("deleted file still in the directory")
	}
	// The held file: still mapped, same bytes.
	var phys []int64
	if err := oldest.Each(func(_ int32, e Entry) bool { phys = append(phys, e.PhyOffset); return true }); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(phys, []int64{0, 1, 2, 3}) {
		t.Fatalf("held file reads %v", phys)
	}
	if got := oldest.SelectKey(nil, "T#k", 64, 0, 1<<62); !slices.Equal(got, []int64{3, 2, 1, 0}) {
		t.Fatalf("held file query %v", got)
	}
	if err := oldest.Release(); err != nil {
		t.Fatal(err)
	}
	// Unmapped now: every read finds nothing instead of faulting.
	if oldest.Acquire() {
		t.Fatal("Acquire succeeded on an unmapped file")
	}
	if _, ok := oldest.Entry(1); ok {
		t.Fatal("Entry read an unmapped file")
	}
	if err := oldest.Each(func(int32, Entry) bool { return true }); !errors.Is(err, ErrClosed) {
		t.Fatalf("Each on an unmapped file: %v", err)
	}
	if got := files[1].SelectKey(nil, "T#k", 64, 0, 1<<62); len(got) != 0 {
		t.Fatalf("query of an unmapped file: %v", got)
	}
	if got := query(t, s, "k", 64, 0, 1<<62); !slices.Equal(got, []int64{9, 8}) {
		t.Fatalf("service query after deletion: %v", got)
	}
}

func TestOpenDirectoryContents(t *testing.T) {
	fsys := vfs.NewMem()
	s := openService(t, Options{FS: fsys, Geometry: tiny})
	build(t, s, 1, t0, "k")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// A creation cut short (zero bytes), a stranger and a subdirectory.
	for _, name := range []string{"/store/index/20991231235959999", "/store/index/notes.txt"} {
		fh, err := fsys.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		fh.Close()
	}
	if err := fsys.MkdirAll("/store/index/20000101000000000"); err != nil {
		t.Fatal(err)
	}
	s = openService(t, Options{FS: fsys, Geometry: tiny})
	if got := names(s.Files()); !slices.Equal(got, []string{"20231114221320000"}) {
		t.Fatalf("loaded %v", got)
	}
	if _, err := fsys.Stat("/store/index/20991231235959999"); err == nil {
		t.Fatal("zero-length file not removed")
	}
	if _, err := fsys.Stat("/store/index/notes.txt"); err != nil {
		t.Fatal("stranger removed")
	}
	s.Close()
	if _, err := Open(Options{FS: fsys, Dir: "/store/index", Geometry: Geometry{Slots: 8, Entries: 6}}); err == nil {
		t.Fatal("loaded files of another geometry")
	}

	ro := openService(t, Options{FS: fsys, Geometry: tiny, ReadOnly: true})
	if _, err := ro.BuildHashes(2, 0, hashes("T", "k")); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("BuildHashes read-only: %v", err)
	}
	if _, err := ro.DeleteExpired(1 << 40); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("DeleteExpired read-only: %v", err)
	}
	if got := query(t, ro, "k", 64, 0, 1<<62); !slices.Equal(got, []int64{1}) {
		t.Fatalf("read-only query: %v", got)
	}
	empty := openService(t, Options{FS: fsys, Dir: "/nowhere", ReadOnly: true})
	if len(empty.Files()) != 0 {
		t.Fatal("files in a missing directory")
	}
}

// TestCrashKeepsFlushed builds on a Mem, flushes, and loads what a power loss would certainly
// keep: everything flushed is there.
func TestCrashKeepsFlushed(t *testing.T) {
	fsys := vfs.NewMem()
	s := openService(t, Options{FS: fsys, Geometry: tiny})
	var filled int64
	for i := range int64(6) {
		if ts := build(t, s, i, t0+1000*i, "k"); ts != 0 {
			if err := s.Flush(); err != nil { // flush, then the checkpoint would take ts
				t.Fatal(err)
			}
			filled = ts
		}
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	build(t, s, 6, t0+6000, "k") // not flushed

	img := fsys.SyncedImage()
	r := openService(t, Options{FS: img, Geometry: tiny})
	if got := query(t, r, "k", 64, 0, 1<<62); !slices.Equal(got, []int64{5, 4, 3, 2, 1, 0}) {
		t.Fatalf("after crash: %v", got)
	}
	// Abnormal exit: files newer than the checkpoint go; re-dispatch refills them.
	if dropped, err := r.DropNewerThan(filled); err != nil || len(dropped) != 1 {
		t.Fatalf("DropNewerThan: %v %v", dropped, err)
	}
	for i := range int64(7) {
		build(t, r, i, t0+1000*i, "k")
	}
	if got := query(t, r, "k", 64, 0, 1<<62); !slices.Equal(got, []int64{6, 5, 4, 3, 3, 2, 1, 0}) {
		t.Fatalf("after rebuild: %v (3 twice: see TestDropNewerThan)", got)
	}
}

func TestNames(t *testing.T) {
	loc := time.FixedZone("UTC+8", 8*3600)
	at := time.UnixMilli(1700000000123) // 2023-11-14 22:13:20.123 UTC
	if got := FormatName(at.In(loc)); got != "20231115061320123" {
		t.Fatalf("FormatName = %s", got)
	}
	if got := nextName(at, time.UTC, ""); got != "20231114221320123" {
		t.Fatalf("nextName = %s", got)
	}
	if got := nextName(at, time.UTC, "20231114221320123"); got != "20231114221320124" {
		t.Fatalf("same millisecond: %s", got)
	}
	if got := nextName(at, time.UTC, "20231114235959999"); got != "20231115000000000" {
		t.Fatalf("clock behind the last name: %s", got)
	}
	for name, ok := range map[string]bool{
		"20231114221320123": true, "2023111422132012": false, "2023111422132012x": false,
		"20231314221320123": false, "00000000000000000000": false,
	} {
		if IsName(name) != ok {
			t.Errorf("IsName(%s) = %v", name, !ok)
		}
	}
}

// TestDropPast drops the files holding entries at or past a recovered CommitLog end, including an
// empty file rolled after them (it inherits their end offset), and says where to rebuild from.
func TestDropPast(t *testing.T) {
	s := openService(t, Options{Geometry: tiny})
	for i := range int64(9) {
		build(t, s, 100*i, t0+1000*i, fmt.Sprint("u", i))
	}
	files := s.Files()
	if len(files) < 3 {
		t.Fatalf("%d files; the test needs at least 3", len(files))
	}
	second := files[1].Header()
	dropped, from, err := s.DropPast(second.BeginPhyOffset + 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(dropped) != len(files)-1 || from != second.BeginPhyOffset {
		t.Fatalf("dropped %v, rebuild from %d; want %d files and %d", dropped, from, len(files)-1, second.BeginPhyOffset)
	}
	if got := query(t, s, "u8", 64, 0, 1<<62); len(got) != 0 {
		t.Fatalf("entry past the end still found: %v", got)
	}
	// Nothing past the end: nothing dropped.
	if dropped, from, err := s.DropPast(1 << 40); err != nil || len(dropped) != 0 || from != -1 {
		t.Fatalf("DropPast past everything: %v %d %v", dropped, from, err)
	}
	// Re-dispatch rebuilds what the dropped files held below the end.
	for i := range int64(9) {
		build(t, s, 100*i, t0+1000*i, fmt.Sprint("u", i))
	}
	for i := range int64(9) {
		if got := query(t, s, fmt.Sprint("u", i), 64, 0, 1<<62); len(got) == 0 || got[0] != 100*i {
			t.Errorf("u%d after rebuild: %v", i, got)
		}
	}
}

// TestRelinkLastAfterTornEntry models a crash that lost one entry in the middle of the unflushed
// tail (while a slot still points past it): RelinkLast keeps the entries before it, makes every
// one of them reachable again, drops the rest, and says where to re-index from.
func TestRelinkLastAfterTornEntry(t *testing.T) {
	s := openService(t, Options{Geometry: Geometry{Slots: 4, Entries: 64}})
	for i := range int64(20) {
		build(t, s, 100*i, t0+1000*i, fmt.Sprint("u", i))
	}
	f := s.Files()[len(s.Files())-1]
	// Entry 12 (u11) is lost: zeroed, as an unsynced page that never reached the disk.
	clear(f.data[f.geo.EntryOffset(12) : f.geo.EntryOffset(12)+EntrySize])
	from, dropped, err := s.RelinkLast(1500, nil) // re-dispatch would start at u15
	if err != nil {
		t.Fatal(err)
	}
	if dropped != 9 || from != 1000 {
		t.Fatalf("dropped %d, rebuild from %d; want 9 and 1000 (u10, the last entry kept)", dropped, from)
	}
	for i := range int64(11) {
		if got := query(t, s, fmt.Sprint("u", i), 64, 0, 1<<62); len(got) != 1 || got[0] != 100*i {
			t.Errorf("u%d after relink: %v", i, got)
		}
	}
	for i := int64(11); i < 20; i++ {
		if got := query(t, s, fmt.Sprint("u", i), 64, 0, 1<<62); len(got) != 0 {
			t.Errorf("u%d still found: %v", i, got)
		}
	}
	// Re-indexing from there restores everything (u10 twice: readers fold duplicates).
	for i := int64(10); i < 20; i++ {
		build(t, s, 100*i, t0+1000*i, fmt.Sprint("u", i))
	}
	for i := range int64(20) {
		if got := query(t, s, fmt.Sprint("u", i), 64, 0, 1<<62); len(got) == 0 || got[0] != 100*i {
			t.Errorf("u%d after re-indexing: %v", i, got)
		}
	}
	if _, dropped, err := s.RelinkLast(1<<40, nil); err != nil || dropped != 0 {
		t.Fatalf("relink of an intact file dropped %d: %v", dropped, err)
	}
}
