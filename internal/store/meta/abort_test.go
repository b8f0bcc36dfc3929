package meta

import (
	"errors"
	"io/fs"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/rocketstore/engine/internal/vfs"
)

func TestAbortLifecycle(t *testing.T) {
	for name, tc := range map[string]struct {
		fsys vfs.FS
		dir  string
	}{
		"mem": {newMem(t, "store"), "store"},
		"os":  {vfs.Default, t.TempDir()},
	} {
		t.Run(name, func(t *testing.T) {
			fsys, dir := tc.fsys, tc.dir
			abort, bak := filepath.Join(dir, AbortFileName), filepath.Join(dir, AbortBakFileName)
			if ok, err := AbortExists(fsys, dir); ok || err != nil {
				t.Fatalf("fresh store: exists %v, %v", ok, err)
			}
			if _, err := ReadAbortPID(fsys, dir); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("fresh store: ReadAbortPID %v, want fs.ErrNotExist", err)
			}

			// A clean start: abort holds the pid, abort.bak is empty.
			if err := CreateAbort(fsys, dir, 4242); err != nil {
				t.Fatal(err)
			}
			if ok, err := AbortExists(fsys, dir); !ok || err != nil {
				t.Fatalf("after create: exists %v, %v", ok, err)
			}
			if pid, err := ReadAbortPID(fsys, dir); pid != 4242 || err != nil {
				t.Fatalf("pid %d, %v", pid, err)
			}
			if got, ok := readOrNone(fsys, abort); got != "4242" || !ok {
				t.Fatalf("abort holds %q", got)
			}
			if got, ok := readOrNone(fsys, bak); got != "" || !ok {
				t.Fatalf("abort.bak after a clean start: %q, exists %v", got, ok)
			}

			// A start after a crash: abort.bak keeps the crashed process's pid.
			if err := CreateAbort(fsys, dir, 5151); err != nil {
				t.Fatal(err)
			}
			if got, _ := readOrNone(fsys, bak); got != "4242" {
				t.Fatalf("abort.bak after a crash: %q", got)
			}
			if pid, _ := ReadAbortPID(fsys, dir); pid != 5151 {
				t.Fatalf("pid %d", pid)
			}

			if err := RemoveAbort(fsys, dir); err != nil {
				t.Fatal(err)
			}
			if ok, err := AbortExists(fsys, dir); ok || err != nil {
				t.Fatalf("after remove: exists %v, %v", ok, err)
			}
			if err := RemoveAbort(fsys, dir); err != nil {
				t.Fatalf("second remove: %v", err)
			}
			if _, ok := readOrNone(fsys, bak); !ok {
				t.Fatal("abort.bak removed with the marker")
			}
		})
	}
}

func TestReadAbortPIDRejectsNonPIDs(t *testing.T) {
	m := newMem(t, "store")
	for _, content := range []string{"", "  ", "abc", "-5", "0", "12x"} {
		if err := WriteFileAtomic(m, "store/abort", []byte(content)); err != nil {
			t.Fatal(err)
		}
		if pid, err := ReadAbortPID(m, "store"); err == nil {
			t.Fatalf("%q read as pid %d", content, pid)
		}
	}
	if err := WriteFileAtomic(m, "store/abort", []byte("77\n")); err != nil {
		t.Fatal(err)
	}
	if pid, err := ReadAbortPID(m, "store"); pid != 77 || err != nil {
		t.Fatalf("%d, %v", pid, err)
	}
}

// TestAbortDurability checks that the marker is on disk as soon as CreateAbort returns and
// gone from disk as soon as RemoveAbort returns: a crash right after either must not undo it.
func TestAbortDurability(t *testing.T) {
	m := newMem(t, "store")
	if err := CreateAbort(m, "store", 99); err != nil {
		t.Fatal(err)
	}
	img := m.SyncedImage()
	if pid, err := ReadAbortPID(img, "store"); pid != 99 || err != nil {
		t.Fatalf("crash after CreateAbort: pid %d, %v", pid, err)
	}
	if err := RemoveAbort(m, "store"); err != nil {
		t.Fatal(err)
	}
	if ok, err := AbortExists(m.SyncedImage(), "store"); ok || err != nil {
		t.Fatalf("crash after RemoveAbort: exists %v, %v", ok, err)
	}
}

// TestCreateAbortCrash: whatever step of CreateAbort a crash interrupts, the marker is either
// absent (the start never got that far: the next start sees a clean exit, which is right, since
// recovery finished before CreateAbort) or holds the whole pid.
func TestCreateAbortCrash(t *testing.T) {
	m := newMem(t, "store")
	for _, p := range crashDuring(t, m, func(fsys vfs.FS) error { return CreateAbort(fsys, "store", 123456) }) {
		for i, img := range p.images {
			got, ok := readOrNone(img, "store/abort")
			if ok && got != "123456" {
				t.Fatalf("crash %s, image %d: abort holds %q", p.when, i, got)
			}
			if p.when == "after return" && !ok {
				t.Fatalf("image %d: abort lost after CreateAbort returned", i)
			}
		}
	}
}

func TestAbortErrors(t *testing.T) {
	m := newMem(t, "store")
	if err := CreateAbort(m, "store", 1); err != nil {
		t.Fatal(err)
	}
	f := vfs.NewFaulty(m, vfs.OnOp(vfs.OpStat, vfs.ErrInjected))
	if _, err := AbortExists(f, "store"); !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("AbortExists: %v", err)
	}
	f = vfs.NewFaulty(m, vfs.OnOp(vfs.OpSyncDir, vfs.ErrInjected))
	if err := RemoveAbort(f, "store"); !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("RemoveAbort: %v", err)
	}
	f = vfs.NewFaulty(m, vfs.OnOp(vfs.OpReadFile, vfs.ErrInjected))
	if err := CreateAbort(f, "store", 2); !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("CreateAbort: %v", err)
	}
}

// TestCreateAbortOnFullDisk: with no byte free the marker is still made, empty (an empty file
// takes no block), durably, and a crash at any step leaves it absent (the start never got that
// far), empty or whole; after a crash the marker that is there is kept, pid and all. Only when
// even an empty file cannot be made does CreateAbort fail.
func TestCreateAbortOnFullDisk(t *testing.T) {
	full := func(m *vfs.Mem) { // every byte used (capacity 0 would mean no limit: one byte is used)
		if err := WriteFileAtomic(m, "store/unrelated", []byte("x")); err != nil {
			t.Fatal(err)
		}
		u, err := m.DiskUsage("store")
		if err != nil {
			t.Fatal(err)
		}
		m.SetCapacity(int64(u.Total - u.Free))
	}
	m := newMem(t, "store")
	full(m)
	for _, p := range crashDuring(t, m, func(fsys vfs.FS) error { return CreateAbort(fsys, "store", 4242) }) {
		for i, img := range p.images {
			got, ok := readOrNone(img, "store/abort")
			if ok && got != "" {
				t.Fatalf("crash %s, image %d: abort holds %q on a full disk", p.when, i, got)
			}
			if p.when == "after return" && !ok {
				t.Fatalf("image %d: abort lost after CreateAbort returned", i)
			}
		}
	}
	if _, err := ReadAbortPID(m, "store"); err == nil {
		t.Fatal("a pid read from the empty marker")
	}
	if _, ok := readOrNone(m, "store/abort.tmp"); ok {
		t.Fatal("abort.tmp left behind")
	}

	// After a crash: the marker there stays as it was.
	m = newMem(t, "store")
	if err := CreateAbort(m, "store", 77); err != nil {
		t.Fatal(err)
	}
	full(m)
	if err := CreateAbort(m, "store", 88); err != nil {
		t.Fatal(err)
	}
	if pid, err := ReadAbortPID(m.SyncedImage(), "store"); pid != 77 || err != nil {
		t.Fatalf("marker after a start on a full disk: %d, %v", pid, err)
	}

	// No inode either: the error says so, and there is no marker.
	m = newMem(t, "store")
	full(m)
	f := vfs.NewFaulty(m, func(op vfs.Op, name string) error {
		if op == vfs.OpCreate && name == "store/abort" {
			return syscall.ENOSPC
		}
		return nil
	})
	if err := CreateAbort(f, "store", 1); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("no room for an empty marker: %v", err)
	}
	if ok, _ := AbortExists(m, "store"); ok {
		t.Fatal("marker exists")
	}
}
