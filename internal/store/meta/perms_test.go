package meta

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/rocketstore/engine/internal/vfs"
)

// TestWriteFileAtomicOwnerOnly: on the real file system, under umask 0 (so that the mode asked
// for is the mode seen), WriteFileAtomic leaves an owner-only file whether path is new, existed
// with looser bits, or a leftover temporary file with looser bits was in the way; Save (the
// config JSON files) and WriteAbort the same.
func TestWriteFileAtomicOwnerOnly(t *testing.T) {
	old := syscall.Umask(0) // no test of this package runs in parallel
	t.Cleanup(func() { syscall.Umask(old) })
	dir := t.TempDir()
	check := func(path string) {
		t.Helper()
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := st.Mode().Perm(); got&0o077 != 0 || got != vfs.FileMode {
			t.Errorf("%s: mode %#o, want %#o", path, got, vfs.FileMode)
		}
	}

	fresh := filepath.Join(dir, "fresh")
	if err := WriteFileAtomic(vfs.Default, fresh, []byte("a")); err != nil {
		t.Fatal(err)
	}
	check(fresh)

	loose := filepath.Join(dir, "loose")
	if err := os.WriteFile(loose, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(loose+TmpSuffix, []byte("crash leftover"), 0o666); err != nil {
		t.Fatal(err)
	}
	if err := WriteFileAtomic(vfs.Default, loose, []byte("new")); err != nil {
		t.Fatal(err)
	}
	check(loose)
	if b, err := os.ReadFile(loose); err != nil || string(b) != "new" {
		t.Fatalf("%q, %v", b, err)
	}

	cfg := filepath.Join(dir, "config", "topics.json")
	if err := vfs.Default.MkdirAll(filepath.Dir(cfg)); err != nil {
		t.Fatal(err)
	}
	if err := Save(vfs.Default, cfg, map[string]int{"a": 1}); err != nil {
		t.Fatal(err)
	}
	check(cfg)
	if err := Save(vfs.Default, cfg, map[string]int{"a": 2}); err != nil { // writes the .bak too
		t.Fatal(err)
	}
	check(cfg)
	check(cfg + BakSuffix)
	if err := CreateAbort(vfs.Default, dir, 42); err != nil {
		t.Fatal(err)
	}
	check(filepath.Join(dir, AbortFileName))
	check(filepath.Join(dir, AbortBakFileName))
	if st, err := os.Stat(filepath.Dir(cfg)); err != nil || st.Mode().Perm() != vfs.DirMode {
		t.Fatalf("config dir: %v, %v", st.Mode(), err)
	}
}
