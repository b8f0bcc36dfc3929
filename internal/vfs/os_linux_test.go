package vfs

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/rocketstore/engine/internal/tmpfs"
)

func TestOSSegmentWriteSyncReopen(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "00000000000000000000")
	seg, err := Default.CreateSegment(name, 1<<20, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	copy(seg.Data()[4000:], "hello across a page boundary")
	if err := seg.Sync(4000, 4100); err != nil {
		t.Fatal(err)
	}
	if err := seg.Prefault(0, 1<<20); err != nil {
		t.Fatal(err)
	}
	if err := seg.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := Default.CreateSegment(name, 1<<20, 0); !errors.Is(err, os.ErrExist) {
		t.Fatalf("second create: %v, want ErrExist", err)
	}
	ro, err := Default.OpenSegment(name, 1<<20, ReadOnly)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if got := string(ro.Data()[4000:4028]); got != "hello across a page boundary" {
		t.Fatalf("reopened: %q", got)
	}
	if err := ro.Reserve(10); err == nil {
		t.Fatal("reserve on a read-only segment succeeded")
	}
	if _, err := Default.OpenSegment(name, 2<<20, ReadOnly); err == nil {
		t.Fatal("open with the wrong size succeeded")
	}
}

// TestSegmentWriteAt: bytes written through the file are in the mapping at once and survive a
// sync and a reopen; a write past what is reserved, to a read-only or to a closed segment is
// refused. The same holds for Mem.
func TestSegmentWriteAt(t *testing.T) {
	for _, fsys := range []FS{Default, NewMem()} {
		t.Run(fmt.Sprintf("%T", fsys), func(t *testing.T) {
			dir := t.TempDir()
			if _, ok := fsys.(*Mem); ok {
				dir = "/d"
				if err := fsys.MkdirAll(dir); err != nil {
					t.Fatal(err)
				}
			}
			name := filepath.Join(dir, "00000000000000000000")
			seg, err := fsys.CreateSegment(name, 1<<16, 8192)
			if err != nil {
				t.Fatal(err)
			}
			msg := []byte("written across a page boundary")
			if err := seg.WriteAt(msg, 4090); err != nil {
				t.Fatal(err)
			}
			if got := seg.Data()[4090 : 4090+len(msg)]; string(got) != string(msg) {
				t.Fatalf("mapping holds %q", got)
			}
			if err := seg.WriteAt(msg, 8192-4); err == nil {
				t.Fatal("a write past the reserved bytes succeeded")
			}
			// Done writing closes the descriptor; a later write opens one again.
			if err := seg.DoneWriting(); err != nil {
				t.Fatal(err)
			}
			if err := seg.WriteAt(msg[:4], 4090); err != nil {
				t.Fatal(err)
			}
			if err := seg.Sync(4090, 4090+int64(len(msg))); err != nil {
				t.Fatal(err)
			}
			if err := seg.Close(); err != nil {
				t.Fatal(err)
			}
			if err := seg.WriteAt(msg, 0); err == nil {
				t.Fatal("a write to a closed segment succeeded")
			}
			ro, err := fsys.OpenSegment(name, 1<<16, ReadOnly)
			if err != nil {
				t.Fatal(err)
			}
			defer ro.Close()
			if got := ro.Data()[4090 : 4090+len(msg)]; string(got) != string(msg) {
				t.Fatalf("reopened: %q", got)
			}
			if err := ro.WriteAt(msg, 0); err == nil {
				t.Fatal("a write to a read-only segment succeeded")
			}
		})
	}
}

// TestOSReserveInSteps checks that a segment reserves only what it is asked for, so that many
// mostly empty files do not cost their full size on disk.
func TestOSReserveInSteps(t *testing.T) {
	name := filepath.Join(t.TempDir(), "cq")
	const size = 6_000_000
	seg, err := Default.CreateSegment(name, size, 64<<10)
	if err != nil {
		t.Fatal(err)
	}
	defer seg.Close()
	if got := allocatedBytes(t, name); got > 256<<10 {
		t.Fatalf("%d bytes allocated for a 64 KiB reservation", got)
	}
	if err := seg.Reserve(1 << 20); err != nil {
		t.Fatal(err)
	}
	if seg.Reserved() != 1<<20 {
		t.Fatalf("reserved %d", seg.Reserved())
	}
	if got := allocatedBytes(t, name); got < 1<<20 || got > 2<<20 {
		t.Fatalf("%d bytes allocated after reserving 1 MiB", got)
	}
	if err := seg.Reserve(size + 1); err == nil {
		t.Fatal("reserve past the size succeeded")
	}
}

func allocatedBytes(t *testing.T, name string) int64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(name, &st); err != nil {
		t.Fatal(err)
	}
	return st.Blocks * 512
}

// TestOSCreateSegmentENOSPC asks for more than the disk has: the error comes back from
// fallocate, and neither a file nor a mapping is left behind.
//
// The disk is a small tmpfs of the test's own: on ext4 a fallocate larger than the free space
// takes every free block before it fails and gives them back, so asking the real disk for its
// size plus 1 TiB filled it, for a moment, under every test running beside this one (they got
// ENOSPC writing a few MiB, with tens of GB free).
func TestOSCreateSegmentENOSPC(t *testing.T) {
	dir := tmpfs.Mount(t, 4<<20, "the Mem tests cover ENOSPC on CreateSegment")
	u, err := Default.DiskUsage(dir)
	if err != nil {
		t.Fatal(err)
	}
	huge := int64(u.Avail) + 1<<20
	name := filepath.Join(dir, "big")
	seg, err := Default.CreateSegment(name, huge, huge)
	if err == nil {
		seg.Close()
		t.Fatal("created a segment larger than the disk")
	}
	if !errors.Is(err, syscall.ENOSPC) && !errors.Is(err, syscall.EFBIG) {
		t.Fatalf("error %v, want ENOSPC or EFBIG", err)
	}
	if _, err := os.Stat(name); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("file left behind after a failed create: %v", err)
	}
	seg, err = Default.CreateSegment(name, huge, 4096)
	if err != nil {
		t.Fatalf("sparse create with a small reservation: %v", err)
	}
	defer seg.Close()
	if err := seg.Reserve(huge); err == nil {
		t.Fatal("reserve larger than the disk succeeded")
	}
	if seg.Reserved() != 4096 {
		t.Fatalf("a failed reserve moved Reserved to %d", seg.Reserved())
	}
}

func TestOSLockInProcess(t *testing.T) {
	name := filepath.Join(t.TempDir(), "lock")
	l, err := Default.Lock(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Default.Lock(name); !errors.Is(err, ErrLocked) {
		t.Fatalf("second lock: %v, want ErrLocked", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2, err := Default.Lock(name)
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	l2.Close()
}

// TestOSLockOtherProcess runs this test binary as a child that takes a classic fcntl lock (what
// RocketMQ's Java broker takes), then checks that Lock fails and names the child.
func TestOSLockOtherProcess(t *testing.T) {
	if os.Getenv("VFS_LOCK_CHILD") != "" {
		return
	}
	name := filepath.Join(t.TempDir(), "lock")
	cmd := exec.Command(os.Args[0], "-test.run=^TestLockChildHelper$")
	cmd.Env = append(os.Environ(), "VFS_LOCK_CHILD="+name, "GORACE=atexit_sleep_ms=0")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close()
		cmd.Wait()
	}()
	r := bufio.NewScanner(stdout)
	locked := false
	for r.Scan() {
		if r.Text() == "locked" {
			locked = true
			break
		}
	}
	if !locked {
		t.Fatal("child did not take the lock")
	}
	_, err = Default.Lock(name)
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("lock held by another process: %v, want ErrLocked", err)
	}
	if !strings.Contains(err.Error(), "pid ") {
		t.Fatalf("error does not name the holder: %v", err)
	}
}

// TestLockChildHelper is the child of TestOSLockOtherProcess: it holds a classic fcntl lock until
// its stdin closes.
func TestLockChildHelper(t *testing.T) {
	name := os.Getenv("VFS_LOCK_CHILD")
	if name == "" {
		t.Skip("only runs as a child process")
	}
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	lk := syscall.Flock_t{Type: syscall.F_WRLCK, Whence: 0, Start: 0, Len: 1}
	if err := syscall.FcntlFlock(f.Fd(), syscall.F_SETLK, &lk); err != nil {
		t.Fatal(err)
	}
	os.Stdout.WriteString("locked\n")
	buf := make([]byte, 1)
	os.Stdin.Read(buf) // returns when the parent closes stdin
}

func TestUsageRatio(t *testing.T) {
	u := Usage{Total: 100, Free: 20, Avail: 10}
	if r := u.UsedRatio(); r < 0.888 || r > 0.889 {
		t.Fatalf("ratio %v", r)
	}
}

// TestOSOpenUpdateOnFullTmpfs: on a real file system with no byte free (a small tmpfs, filled to
// ENOSPC), a file that exists is rewritten in place (OpenUpdate, WriteAt, Sync), while writing a
// new one fails: what lets the checkpoint be saved on a full disk.
func TestOSOpenUpdateOnFullTmpfs(t *testing.T) {
	dir := tmpfs.Mount(t, 1<<20, "TestMemOpenUpdate covers the contract")
	name := filepath.Join(dir, "checkpoint")
	noErr(t, os.WriteFile(name, make([]byte, 4096), 0o600))
	tmpfs.Fill(t, dir)
	if err := os.WriteFile(filepath.Join(dir, "new"), []byte("x"), 0o600); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("a new file's first byte on a full tmpfs: %v, want ENOSPC", err)
	}
	f := must(Default.OpenUpdate(name))
	page := bytes.Repeat([]byte{0xab}, 4096)
	if _, err := f.WriteAt(page, 0); err != nil {
		t.Fatalf("WriteAt in place on a full tmpfs: %v", err)
	}
	noErr(t, f.Sync())
	noErr(t, f.Close())
	if got := must(os.ReadFile(name)); !bytes.Equal(got, page) {
		t.Fatal("rewrite not read back")
	}
	if _, err := Default.OpenUpdate(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("OpenUpdate of a missing file: %v", err)
	}
}

// TestOSSyncer: syncfs on a directory's file system works and its handle closes; a Syncer on a
// missing directory is an error.
func TestOSSyncer(t *testing.T) {
	dir := t.TempDir()
	seg := must(Default.CreateSegment(filepath.Join(dir, "seg"), 4096, 4096))
	defer seg.Close()
	copy(seg.Data(), "x")
	s := must(Default.OpenSyncer(dir))
	noErr(t, s.SyncAll([]SegmentRange{{Seg: seg, To: 1}}))
	noErr(t, s.SyncAll(nil))
	noErr(t, s.Close())
	if _, err := Default.OpenSyncer(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a Syncer on a missing directory: %v", err)
	}
}
