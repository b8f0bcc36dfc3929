//go:build linux

package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/rocketstore/engine/internal/wire"
	"github.com/rocketstore/engine/stages/ingress"
)

// mountTmpfs mounts a tmpfs of size bytes on a fresh directory, unmounted at the end of the
// test. It skips the test where mounting is not allowed (not root, no CAP_SYS_ADMIN).
func mountTmpfs(t *testing.T, size int64) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tmpfs")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d,mode=0700", size)); err != nil {
		t.Skipf("cannot mount a tmpfs here (%v): TestDiskFullNewSegment covers this on the in-memory file system", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// TestDiskFullTmpfs is TestDiskFullNewSegment on a real, small file system (a 4 MiB tmpfs,
// when the test may mount one): real fallocate, real mmap. The disk fills below the refusal
// limit, so either the CommitLog cannot create its next segment or a ConsumeQueue file cannot
// grow (whichever comes first): each message then gets ENOSPC (reply code 507) and nothing of
// it is stored, nothing faults (no SIGBUS: a file is mapped, or grows, only once fallocate has
// reserved it), and writing resumes once space is freed. After a
// restart exactly the acked messages are there, and the log ends with the last of them.
func TestDiskFullTmpfs(t *testing.T) {
	const fsSize = 4 << 20
	mnt := mountTmpfs(t, fsSize)
	o := testOptions(t, filepath.Join(mnt, "store"))
	o.Logger = zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.ErrorLevel) // the allocator warns each round
	o.CommitLogFileSize = 1 << 20
	e := mustOpen(t, o)
	defer func() {
		if e != nil {
			e.Close()
		}
	}()
	acked := retPut(t, e, "T", 20, 0)

	// Leave 700 KiB free: less than a segment, and the use (about 83%) below the 90% at which
	// writes are refused, so that it is the file system itself that runs out.
	var st unix.Statfs_t
	if err := unix.Statfs(mnt, &st); err != nil {
		t.Fatal(err)
	}
	free := int64(st.Bavail) * st.Bsize
	filler := filepath.Join(mnt, "filler")
	if err := os.WriteFile(filler, make([]byte, free-700<<10), 0o600); err != nil {
		t.Fatal(err)
	}

	acked, failed := putUntilRefused(t, e, acked, 10_000)
	for _, r := range failed {
		if !errors.Is(r.Err, syscall.ENOSPC) || ingress.ReplyCode(r.Err) != wire.CodeDiskFull {
			t.Fatalf("failed with %v (code %d), want ENOSPC (507)", r.Err, ingress.ReplyCode(r.Err))
		}
	}
	if dfe := (*DiskFullError)(nil); errors.As(failed[0].Err, &dfe) {
		t.Fatalf("refused above the disk use limit (%v): the test meant the file system to run out first", dfe)
	}
	t.Logf("%d messages acked before ENOSPC: %v", len(acked), failed[0].Err)

	checkAckedOnly(t, e, acked)

	// Space is freed: the same engine writes again. If dispatch was the one that ran out (a
	// ConsumeQueue file could not grow), writes resume once it has caught up.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if err := e.WaitDispatched(context.Background(), e.Offsets().Written); err != nil {
		t.Fatal(err)
	}
	if err := e.Ready(); err != nil {
		t.Fatalf("not ready once space is back: %v", err)
	}
	acked = append(acked, retPut(t, e, "T", 1500, len(acked))...) // into the segment that could not be created
	checkAckedOnly(t, e, acked)

	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e = mustOpen(t, o)
	checkAckedOnly(t, e, acked)
}
