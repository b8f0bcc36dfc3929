package meta

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rocketstore/engine/internal/vfs"
)

func TestWriteFileAtomicOS(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	for _, s := range []string{"first", "second, longer", ""} {
		if err := WriteFileAtomic(vfs.Default, path, []byte(s)); err != nil {
			t.Fatal(err)
		}
		if b, err := os.ReadFile(path); err != nil || string(b) != s {
			t.Fatalf("%q, %v; want %q", b, err, s)
		}
	}
	if _, err := os.Stat(path + TmpSuffix); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("temporary file left: %v", err)
	}
}

// TestWriteFileAtomicCrash simulates a power loss before each step of WriteFileAtomic and
// after it returns: the file is the old content or the new one, whole; the old one until the
// rename is issued, the new one once the call returned.
func TestWriteFileAtomicCrash(t *testing.T) {
	oldData := strings.Repeat("old content ", 1000) // several pages, so pages can tear
	newData := strings.Repeat("NEW CONTENT! ", 900)
	for _, fresh := range []bool{false, true} {
		m := newMem(t, "d")
		if !fresh {
			if err := WriteFileAtomic(m, "d/f", []byte(oldData)); err != nil {
				t.Fatal(err)
			}
		}
		renamed := false
		var steps []string
		for _, p := range crashDuring(t, m, func(fsys vfs.FS) error { return WriteFileAtomic(fsys, "d/f", []byte(newData)) }) {
			steps = append(steps, p.when)
			renamed = renamed || strings.HasPrefix(p.when, "before Rename")
			for i, img := range p.images {
				got, ok := readOrNone(img, "d/f")
				old := (fresh && !ok) || (!fresh && got == oldData)
				switch {
				case !old && got != newData:
					t.Fatalf("fresh=%v, crash %s, image %d: torn file (%d bytes)", fresh, p.when, i, len(got))
				case !renamed && !old:
					t.Fatalf("fresh=%v, crash %s, image %d: new content before the rename", fresh, p.when, i)
				case p.when == "after return" && got != newData:
					t.Fatalf("fresh=%v, image %d: lost after WriteFileAtomic returned", fresh, i)
				}
			}
		}
		want := "before Create d/f.tmp; before Write d/f.tmp; before FileSync d/f.tmp; before Rename d/f.tmp; before SyncDir d; after return"
		if got := strings.Join(steps, "; "); got != want {
			t.Fatalf("steps:\n got %s\nwant %s", got, want)
		}
	}
}

// TestWriteFileAtomicFailure fails each step in turn: the error comes back, the file still
// holds a whole version (the new one only if the rename happened), and no temporary file stays.
func TestWriteFileAtomicFailure(t *testing.T) {
	setup := func() *vfs.Mem {
		m := newMem(t, "d")
		if err := WriteFileAtomic(m, "d/f", []byte("old")); err != nil {
			t.Fatal(err)
		}
		return m
	}
	n := failEach(t, setup, func(fsys vfs.FS) error { return WriteFileAtomic(fsys, "d/f", []byte("new")) },
		func(m *vfs.Mem, failed vfs.Op, _ error) {
			for what, fsys := range map[string]vfs.FS{"now": m, "after a crash": m.SyncedImage()} {
				got, _ := readOrNone(fsys, "d/f")
				if got != "old" && !(failed == vfs.OpSyncDir && got == "new") {
					t.Fatalf("%v failed: file %s holds %q", failed, what, got)
				}
			}
			if _, err := m.Stat("d/f" + TmpSuffix); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("%v failed: temporary file left: %v", failed, err)
			}
		})
	if n != 5 {
		t.Fatalf("WriteFileAtomic made %d calls, want 5", n)
	}
}
