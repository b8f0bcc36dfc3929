//go:build linux

// Package tmpfs gives tests of a full disk a small file system of their own: a tmpfs mounted
// on a temporary directory, and a ballast that takes its every free byte. The engine's and the
// e2e tests' disk-full cases and the file layer's ENOSPC cases share it.
package tmpfs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// Mount mounts a tmpfs of size bytes on a fresh directory under t.TempDir(), unmounted when
// the test ends, and returns the directory. It skips the test, saying otherwise (what covers
// the case without a real file system), where mounting is not allowed (not root, no
// CAP_SYS_ADMIN; CI runs as root).
func Mount(t testing.TB, size int64, otherwise string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tmpfs")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d,mode=0700", size)); err != nil {
		t.Skipf("cannot mount a tmpfs here (%v): %s", err, otherwise)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// Fill writes a ballast file into dir until the file system takes no byte more (ENOSPC),
// checks that statfs then reports no block free, and returns the ballast's name.
func Fill(t testing.TB, dir string) string {
	t.Helper()
	name := filepath.Join(dir, "ballast")
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for i := 0; len(chunk) > 0; i++ {
		if i > 1<<20 {
			t.Fatal("the disk never filled")
		}
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			chunk = chunk[:len(chunk)/2] // what is left may hold a smaller write
		}
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	if st.Bavail != 0 || st.Bfree != 0 {
		t.Fatalf("after the ballast: %d blocks available, %d free; want none", st.Bavail, st.Bfree)
	}
	return name
}
