package vfs

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"
)

// TestMemCutPowerAt: a run of five syncs (a segment range, a plain file, a directory, an empty
// range that does not count, a second segment range), cut at each point in turn. Syncs before
// the cut are durable in every image; the cut one and every later one fail with ErrPowerCut
// and leave nothing durable, so a synced-only image shows exactly the first k-1 of them.
func TestMemCutPowerAt(t *testing.T) {
	run := func(cut int64) (*Mem, []error) {
		m := NewMem()
		m.CutPowerAt(cut)
		noErr(t, m.MkdirAll("d"))
		seg := must(m.CreateSegment("d/seg", 2*crashPageSize, 2*crashPageSize))
		defer seg.Close()
		copy(seg.Data(), "first")
		f := must(m.Create("d/meta"))
		defer f.Close()
		must(f.Write([]byte("meta")))
		copy(seg.Data()[crashPageSize:], "second")
		return m, []error{
			seg.Sync(0, 5),
			f.Sync(),
			m.SyncDir("d"),
			seg.Sync(7, 7), // nothing to sync: not counted
			seg.Sync(crashPageSize, crashPageSize+6),
		}
	}
	full, errs := run(0)
	for _, err := range errs {
		noErr(t, err)
	}
	if got := full.Syncs(); got != 4 {
		t.Fatalf("Syncs = %d, want 4 (the empty range does not count)", got)
	}
	for cut := int64(1); cut <= 5; cut++ {
		m, errs := run(cut)
		counted := []int{0, 1, 2, 4} // errs index of the k-th counted sync
		for k, i := range counted {
			err := errs[i]
			if before := int64(k+1) < cut; before != (err == nil) || !before && !errors.Is(err, ErrPowerCut) {
				t.Fatalf("cut %d: sync %d returned %v", cut, k+1, err)
			}
		}
		noErr(t, errs[3])
		img := m.SyncedImage()
		seg, err := img.ReadFile("d/seg")
		if cut <= 3 { // the directory sync that makes d/seg durable did not happen
			if err == nil {
				t.Fatalf("cut %d: the segment's entry survived without its directory sync", cut)
			}
			continue
		}
		noErr(t, err)
		if !bytes.HasPrefix(seg, []byte("first")) {
			t.Fatalf("cut %d: the first range synced before the cut is lost: %q", cut, seg[:5])
		}
		if meta := must(img.ReadFile("d/meta")); string(meta) != "meta" {
			t.Fatalf("cut %d: meta %q", cut, meta)
		}
		second := bytes.HasPrefix(seg[crashPageSize:], []byte("second"))
		if second != (cut > 4) {
			t.Fatalf("cut %d: the last range durable = %v", cut, second)
		}
	}
}

// TestMemCrashImageWriteback: with Writeback each unsynced page is kept or lost whole, never
// torn, and over many pages both happen at about the probability asked.
func TestMemCrashImageWriteback(t *testing.T) {
	const pages = 400
	m := NewMem()
	seg := must(m.CreateSegment("seg", pages*crashPageSize, pages*crashPageSize))
	defer seg.Close()
	noErr(t, m.SyncDir("."))
	for i := range seg.Data() {
		seg.Data()[i] = byte(i%251 + 1)
	}
	img := m.CrashImage(rand.New(rand.NewPCG(1, 2)), CrashOptions{Writeback: 0.5})
	got := must(img.ReadFile("seg"))
	kept := 0
	for p := range pages {
		page, cur := got[p*crashPageSize:(p+1)*crashPageSize], seg.Data()[p*crashPageSize:(p+1)*crashPageSize]
		switch {
		case bytes.Equal(page, cur):
			kept++
		case !bytes.Equal(page, make([]byte, crashPageSize)):
			t.Fatalf("page %d is neither kept nor lost whole", p)
		}
	}
	if kept < pages/4 || kept > pages*3/4 {
		t.Fatalf("%d of %d pages kept with Writeback 0.5", kept, pages)
	}
}
