package vfs

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestDataExtents: on every file system, a segment written at a few places maps as data there,
// and what it reports as holes is zero. On the real one (fallocated, written through pwrite and
// through the mapping) the unwritten rest is a hole, bar the pages the kernel read around the
// mapping's fault (read_ahead_kb); Mem reports exactly the pages with a non-zero byte; Faulty
// passes the answer of what it wraps through; a segment that cannot say is data everywhere.
func TestDataExtents(t *testing.T) {
	const size = 64 << 20
	written := []int64{0, 5000, 3 << 20, size - 1}
	for _, tc := range []struct {
		name  string
		fsys  func(t *testing.T) (FS, string)
		exact bool
	}{
		{"os", func(t *testing.T) (FS, string) { return Default, t.TempDir() }, false},
		{"mem", func(t *testing.T) (FS, string) { return NewMem(), "/d" }, true},
		{"faulty mem", func(t *testing.T) (FS, string) {
			return NewFaulty(NewMem(), func(Op, string) error { return nil }), "/d"
		}, true},
		{"faulty os", func(t *testing.T) (FS, string) {
			return NewFaulty(Default, func(Op, string) error { return nil }), t.TempDir()
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys, dir := tc.fsys(t)
			if err := fsys.MkdirAll(dir); err != nil {
				t.Fatal(err)
			}
			seg, err := fsys.CreateSegment(filepath.Join(dir, "seg"), size, size)
			if err != nil {
				t.Fatal(err)
			}
			defer seg.Close()
			// OS writes the first page of a new segment (see CreateSegment).
			if got := DataExtents(seg, 0); len(got) != 0 && (tc.exact || len(got) > 1 || got[0].End > int64(os.Getpagesize())) {
				t.Fatalf("a fresh segment maps data at %v", got)
			}
			for _, off := range written {
				if off != 5000 {
					if err := seg.WriteAt([]byte{0xaa}, off); err != nil {
						t.Fatal(err)
					}
				} else {
					seg.Data()[off] = 0xaa
				}
			}
			for _, from := range []int64{0, 1, 4096, 5000, 5001, 1 << 20, size - 1, size, size + 10} {
				ext := DataExtents(seg, from)
				if !slices.IsSortedFunc(ext, func(a, b Extent) int { return int(a.Off - b.Off) }) {
					t.Fatalf("from %d: extents out of order: %v", from, ext)
				}
				for i, x := range ext {
					if x.Off < from || x.End > size || x.Off >= x.End || (i > 0 && ext[i-1].End > x.Off) {
						t.Fatalf("from %d: bad extent %v in %v", from, x, ext)
					}
				}
				for _, off := range written {
					if off >= from && !slices.ContainsFunc(ext, func(x Extent) bool { return x.Off <= off && off < x.End }) {
						t.Fatalf("from %d: the byte written at %d is in no extent of %v", from, off, ext)
					}
				}
				var covered int64
				for _, x := range ext {
					covered += x.End - x.Off
				}
				if covered > 16<<20 {
					t.Fatalf("from %d: %d bytes mapped as data for 4 bytes written: %v", from, covered, ext)
				}
				if tc.exact && from == 0 && len(ext) != 3 {
					t.Fatalf("mem: %v, want the pages of 0 and 5000 as one extent, then two more", ext)
				}
			}
		})
	}
	if got := DataExtents(unmapped{}, 7); len(got) != 1 || got[0] != (Extent{7, 100}) {
		t.Fatalf("a segment that cannot map its data: %v, want all of it", got)
	}
}

// unmapped is a Segment without DataExtents.
type unmapped struct{ Segment }

func (unmapped) Size() int64 { return 100 }
