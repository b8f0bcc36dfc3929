package segment

import (
	"errors"
	"testing"

	"github.com/rocketstore/engine/internal/vfs"
)

// TestDetectFileSize: a queue's segment size is read from its files; a last file of zero length
// (being created) is left out; files that do not agree are an error, not a guess.
func TestDetectFileSize(t *testing.T) {
	fsys := vfs.NewMem()
	check := func(what string, wantSize int64, wantOK bool) {
		t.Helper()
		size, ok, err := DetectFileSize(fsys, "/q")
		if err != nil || size != wantSize || ok != wantOK {
			t.Fatalf("%s: %d %v %v, want %d %v", what, size, ok, err, wantSize, wantOK)
		}
	}
	check("no directory", 0, false)
	q := openQueue(t, fsys, "/q", 0)
	defer q.Close()
	check("no file", 0, false)
	create := func(base int64) {
		t.Helper()
		f, err := fsys.Create("/q/" + Name(base))
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	create(0)
	check("only a file being created", 0, false)
	if err := fsys.Remove("/q/" + Name(0)); err != nil {
		t.Fatal(err)
	}
	fill(t, q, 3*testSize-100)
	check("three files", testSize, true)
	create(3 * testSize)
	check("three files and one being created", testSize, true)
	if err := fsys.Remove("/q/" + Name(3*testSize)); err != nil {
		t.Fatal(err)
	}

	bad := vfs.NewMem()
	for _, d := range []string{"/b", "/c"} {
		if err := bad.MkdirAll(d); err != nil {
			t.Fatal(err)
		}
	}
	seg, err := bad.CreateSegment("/b/"+Name(0), 4096, 0)
	if err != nil {
		t.Fatal(err)
	}
	seg.Close()
	seg, err = bad.CreateSegment("/b/"+Name(4096), 8192, 0)
	if err != nil {
		t.Fatal(err)
	}
	seg.Close()
	if _, _, err := DetectFileSize(bad, "/b"); !errors.Is(err, ErrMixedSizes) {
		t.Fatalf("files of two sizes: %v", err)
	}
	seg, err = bad.CreateSegment("/c/"+Name(1000), 4096, 0)
	if err != nil {
		t.Fatal(err)
	}
	seg.Close()
	if _, _, err := DetectFileSize(bad, "/c"); !errors.Is(err, ErrMixedSizes) {
		t.Fatalf("a base that is no multiple of the size: %v", err)
	}
}
