package indexfile

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/rocketstore/engine/internal/store/javahash"
)

// walkAll pages through key's entries maxNum at a time and returns every offset found, with the
// number of pages it took.
func walkAll(t *testing.T, s *Service, key string, begin, end int64, maxNum, maxSteps int) ([]int64, int) {
	t.Helper()
	var all []int64
	var cur KeyCursor
	for pages := 1; pages <= 10_000; pages++ {
		w := s.WalkKey(nil, "T", key, begin, end, cur, maxNum, maxSteps)
		if len(w.PhyOffsets) > maxNum {
			t.Fatalf("page %d: %d offsets, over maxNum %d", pages, len(w.PhyOffsets), maxNum)
		}
		all = append(all, w.PhyOffsets...)
		if w.Done {
			return all, pages
		}
		if w.Next == cur {
			t.Fatalf("page %d: the cursor did not move from %+v", pages, cur)
		}
		cur = w.Next
	}
	t.Fatal("no end after 10,000 pages")
	return nil, 0
}

func descending(from, to int64) []int64 {
	var out []int64
	for i := from; i >= to; i-- {
		out = append(out, i)
	}
	return out
}

// TestWalkKeyPastTheQueryCap: 300 messages of one key in one second, over several files, with
// other keys between them. Query stops at its cap of 64 and an earlier end time cannot move it
// (they share the second); the walk pages through all of them, each once, newest first.
func TestWalkKeyPastTheQueryCap(t *testing.T) {
	s := openService(t, Options{Geometry: Geometry{Slots: 8, Entries: 101}})
	for i := range int64(300) {
		build(t, s, 2*i, t0, "k")
		build(t, s, 2*i+1, t0, fmt.Sprint("other", i))
	}
	if n := len(s.Files()); n < 5 {
		t.Fatalf("%d files, want several", n)
	}
	if got := query(t, s, "k", 1000, 0, t0); len(got) != DefaultMaxQueryNum {
		t.Fatalf("Query found %d, want its cap %d", len(got), DefaultMaxQueryNum)
	}
	var want []int64
	for i := int64(299); i >= 0; i-- {
		want = append(want, 2*i)
	}
	got, pages := walkAll(t, s, "k", 0, 0, 7, 1000)
	if !slices.Equal(got, want) {
		t.Fatalf("walk found %d offsets %v..., want the 300 of key k newest first", len(got), got[:min(len(got), 10)])
	}
	if pages < 300/7 {
		t.Fatalf("%d pages of at most 7", pages)
	}
	// A time window: one second before the messages finds nothing.
	if got, _ := walkAll(t, s, "k", 0, t0-1000, 7, 1000); len(got) != 0 {
		t.Fatalf("window before the messages: %v", got)
	}
}

// TestWalkKeyWindow pages through a window that crosses files.
func TestWalkKeyWindow(t *testing.T) {
	s := openService(t, Options{Geometry: tiny})
	for i := range int64(12) {
		build(t, s, i, t0+1000*i, "k")
	}
	if got, _ := walkAll(t, s, "k", t0+2000, t0+5000, 1, 100); !slices.Equal(got, []int64{5, 4, 3, 2}) {
		t.Fatalf("window over two files: %v", got)
	}
	if got, _ := walkAll(t, s, "k", 0, 0, 5, 100); !slices.Equal(got, descending(11, 0)) {
		t.Fatalf("everything: %v", got)
	}
}

// TestWalkKeyStepBudget: keys of the same slot share the chain; a page reads at most maxSteps
// entries, so it can come back empty yet not done, and the pages still find everything.
func TestWalkKeyStepBudget(t *testing.T) {
	s := openService(t, Options{Geometry: Geometry{Slots: 8, Entries: 1000}})
	slot := javahash.IndexKeyHash("T#k") % 8
	var same []string
	for i := 0; len(same) < 5; i++ {
		k := fmt.Sprint("s", i)
		if h := javahash.IndexKeyHash("T#" + k); h%8 == slot && h != javahash.IndexKeyHash("T#k") {
			same = append(same, k)
		}
	}
	phys := int64(0)
	var want []int64
	for i := range 20 {
		for _, k := range same {
			build(t, s, phys, t0, k)
			phys++
		}
		if i%4 == 0 {
			want = append([]int64{phys}, want...)
			build(t, s, phys, t0, "k")
			phys++
		}
	}
	w := s.WalkKey(nil, "T", "k", 0, 0, KeyCursor{}, 100, 3)
	if len(w.PhyOffsets) != 0 || w.Done || w.Next == (KeyCursor{}) {
		t.Fatalf("first page of 3 steps over other keys: %+v, want empty, not done, moved on", w)
	}
	got, pages := walkAll(t, s, "k", 0, 0, 100, 3)
	if !slices.Equal(got, want) {
		t.Fatalf("found %v, want %v", got, want)
	}
	if pages < 100/3 {
		t.Fatalf("%d pages for about 100 chain entries at 3 steps each", pages)
	}
}

// TestWalkKeyResumesAcrossChanges: entries indexed after a page are newer and not met by the
// rest of the walk; a cursor in a file retention deleted resumes in the next older file, or
// ends the walk when it was the oldest.
func TestWalkKeyResumesAcrossChanges(t *testing.T) {
	clk := &clock{t: time.UnixMilli(t0), step: time.Second} // file names a second apart
	s := openService(t, Options{Geometry: tiny, Now: clk.now})
	for i := range int64(12) {
		build(t, s, i, t0+1000*i, "k")
	}
	w := s.WalkKey(nil, "T", "k", 0, 0, KeyCursor{}, 2, 100)
	if !slices.Equal(w.PhyOffsets, []int64{11, 10}) || w.Done {
		t.Fatalf("first page %+v", w)
	}
	build(t, s, 12, t0+12000, "k")
	w = s.WalkKey(nil, "T", "k", 0, 0, w.Next, 3, 100)
	if !slices.Equal(w.PhyOffsets, []int64{9, 8, 7}) {
		t.Fatalf("second page after a new entry: %+v", w)
	}
	files := names(s.Files())
	// A cursor in the oldest file, then that file deleted: the walk is done.
	oldest := KeyCursor{File: files[0], Entry: 2}
	if _, err := s.DeleteExpired(4); err != nil {
		t.Fatal(err)
	}
	if n := names(s.Files()); slices.Contains(n, files[0]) {
		t.Fatalf("the oldest file is still there: %v", n)
	}
	if w := s.WalkKey(nil, "T", "k", 0, 0, oldest, 10, 100); !w.Done || len(w.PhyOffsets) != 0 {
		t.Fatalf("cursor in a deleted oldest file: %+v", w)
	}
	// A cursor naming a file between two that are there resumes in the older one, at its newest.
	between := KeyCursor{File: files[1][:16] + "1", Entry: 3}
	if between.File <= files[1] || between.File >= files[2] {
		t.Fatalf("%s is not between %s and %s", between.File, files[1], files[2])
	}
	w = s.WalkKey(nil, "T", "k", 0, 0, between, 10, 100)
	if !slices.Equal(w.PhyOffsets, []int64{7, 6, 5, 4}) || !w.Done {
		t.Fatalf("cursor between files: %+v (files %v)", w, names(s.Files()))
	}
}
