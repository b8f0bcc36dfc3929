package vfs

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// withUmask runs the test body under umask 0, so that a mode the code asks for is the mode the
// file gets: the process umask can only remove bits, and a umask of 077 would hide a 0644 the
// code asked for. (No test of this package runs in parallel, so the process-wide umask is ours
// for the duration.)
func withUmask0(t *testing.T) {
	t.Helper()
	old := syscall.Umask(0)
	t.Cleanup(func() { syscall.Umask(old) })
}

// checkOwnerOnly fails unless path has no group or other permission bits, and the owner bits
// want (0o600 for files, 0o700 for directories).
func checkOwnerOnly(t *testing.T, path string, want fs.FileMode) {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Mode().Perm(); got != want {
		t.Errorf("%s: mode %#o, want %#o (owner-only)", path, got, want)
	}
}

// TestOSCreatesOwnerOnly: every file OS creates (segments, plain files, the lock) is 0600 and
// every directory MkdirAll creates 0700, under umask 0; a plain file that Create truncates loses
// its group and other bits; MkdirAll leaves a directory that already existed as it was.
func TestOSCreatesOwnerOnly(t *testing.T) {
	withUmask0(t)
	root := t.TempDir()
	if err := os.Chmod(root, 0o755); err != nil { // the operator's directory: left alone
		t.Fatal(err)
	}
	dir := filepath.Join(root, "store", "consumequeue", "topic", "0")
	if err := Default.MkdirAll(dir); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"store", "store/consumequeue", "store/consumequeue/topic", "store/consumequeue/topic/0"} {
		checkOwnerOnly(t, filepath.Join(root, d), DirMode)
	}
	checkOwnerOnly(t, root, 0o755)

	seg, err := Default.CreateSegment(filepath.Join(dir, "00000000000000000000"), 1<<16, 1<<12)
	if err != nil {
		t.Fatal(err)
	}
	if err := seg.Close(); err != nil {
		t.Fatal(err)
	}
	checkOwnerOnly(t, filepath.Join(dir, "00000000000000000000"), FileMode)

	plain := filepath.Join(root, "store", "checkpoint")
	f, err := Default.Create(plain)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	checkOwnerOnly(t, plain, FileMode)

	// A file left with looser bits (an older version's, or a copy) is tightened when Create
	// truncates it for new content.
	loose := filepath.Join(root, "store", "config.json.tmp")
	if err := os.WriteFile(loose, []byte("old"), 0o666); err != nil {
		t.Fatal(err)
	}
	checkOwnerOnly(t, loose, 0o666) // umask 0: the test sees what was asked for
	f, err = Default.Create(loose)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	checkOwnerOnly(t, loose, FileMode)

	lk, err := Default.Lock(filepath.Join(root, "store", "lock"))
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Close()
	checkOwnerOnly(t, filepath.Join(root, "store", "lock"), FileMode)
}
