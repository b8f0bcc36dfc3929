package meta

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"

	"github.com/rocketstore/engine/internal/vfs"
)

func TestLockStoreInProcess(t *testing.T) {
	for name, tc := range map[string]struct {
		fsys vfs.FS
		dir  string
	}{
		"mem": {newMem(t, "store"), "store"},
		"os":  {vfs.Default, t.TempDir()},
	} {
		t.Run(name, func(t *testing.T) {
			fsys, dir := tc.fsys, tc.dir
			l, err := LockStore(fsys, dir)
			if err != nil {
				t.Fatal(err)
			}
			_, err = LockStore(fsys, dir)
			var inUse *InUseError
			if !errors.Is(err, vfs.ErrLocked) || !errors.As(err, &inUse) {
				t.Fatalf("second lock: %v, want an *InUseError wrapping vfs.ErrLocked", err)
			}
			if inUse.PID != 0 || !regexp.MustCompile(`store .* is in use by `).MatchString(err.Error()) {
				t.Fatalf("no abort file yet: %+v: %v", inUse, err)
			}

			// Once the running engine wrote its pid, the error names it.
			if err := CreateAbort(fsys, dir, os.Getpid()); err != nil {
				t.Fatal(err)
			}
			_, err = LockStore(fsys, dir)
			if !errors.As(err, &inUse) || inUse.PID != os.Getpid() || !inUse.FromAbort {
				t.Fatalf("with abort file: %v", err)
			}
			if !containsPID(err.Error(), os.Getpid()) || !regexp.MustCompile(`in use by this process`).MatchString(err.Error()) {
				t.Fatalf("message does not name this process: %v", err)
			}

			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			l, err = LockStore(fsys, dir)
			if err != nil {
				t.Fatalf("lock after release: %v", err)
			}
			l.Close()
		})
	}
}

func TestLockStoreOtherErrors(t *testing.T) {
	m := newMem(t, "store")
	_, err := LockStore(vfs.NewFaulty(m, vfs.OnOp(vfs.OpLock, vfs.ErrInjected)), "store")
	var inUse *InUseError
	if !errors.Is(err, vfs.ErrInjected) || errors.Is(err, vfs.ErrLocked) || errors.As(err, &inUse) {
		t.Fatalf("%v: want the injected error, not an in-use error", err)
	}
}

func TestKernelHolder(t *testing.T) {
	for msg, want := range map[string]int{
		"vfs: lock x: vfs: locked by another holder (held by pid 1234: java -jar broker)": 1234,
		"vfs: lock x: vfs: locked by another holder (held by pid 77)":                     77,
		"vfs: lock x: vfs: locked by another holder":                                      0,
		"vfs: lock x: vfs: locked by another holder (held by pid -1)":                     0,
		"vfs: lock x: vfs: locked by another holder (this process already holds it)":      0,
	} {
		pid, ok := kernelHolder(errors.New(msg))
		if pid != want || ok != (want != 0) {
			t.Errorf("%q: %d, %v; want %d", msg, pid, ok, want)
		}
	}
}

// TestLockStoreOtherProcess runs this test binary as a child that opens the store as our engine
// does (LockStore, then CreateAbort with its pid). The kernel cannot name the holder of an OFD
// lock, so the parent's error must name the child through its abort file.
func TestLockStoreOtherProcess(t *testing.T) {
	dir := t.TempDir()
	child := startLockChild(t, dir, "engine")
	_, err := LockStore(vfs.Default, dir)
	var inUse *InUseError
	if !errors.Is(err, vfs.ErrLocked) || !errors.As(err, &inUse) {
		t.Fatalf("store held by another process: %v, want an *InUseError wrapping vfs.ErrLocked", err)
	}
	if inUse.PID != child || !inUse.FromAbort {
		t.Fatalf("holder %+v, want pid %d from the abort file", inUse, child)
	}
	if !containsPID(err.Error(), child) || !regexp.MustCompile(`is in use by another process`).MatchString(err.Error()) {
		t.Fatalf("message does not say the store is in use by pid %d: %v", child, err)
	}
	t.Log(err)
}

// TestLockStoreRocketMQHolder runs a child that takes a classic fcntl lock on byte 0, as a
// RocketMQ broker's FileChannel.tryLock does, and leaves a stale pid in the abort file: the
// kernel names the child, and that wins over the abort file.
func TestLockStoreRocketMQHolder(t *testing.T) {
	dir := t.TempDir()
	child := startLockChild(t, dir, "classic")
	_, err := LockStore(vfs.Default, dir)
	var inUse *InUseError
	if !errors.Is(err, vfs.ErrLocked) || !errors.As(err, &inUse) {
		t.Fatalf("store held by another process: %v, want an *InUseError wrapping vfs.ErrLocked", err)
	}
	if inUse.PID != child || inUse.FromAbort {
		t.Fatalf("holder %+v, want pid %d from the kernel", inUse, child)
	}
	if !containsPID(err.Error(), child) {
		t.Fatalf("message does not name pid %d: %v", child, err)
	}
	t.Log(err)
}

// startLockChild starts TestLockStoreChild in a child process holding the lock of dir in the
// given mode, waits until it holds it, and returns its pid. The child exits at the end of the
// test, when its stdin closes.
func startLockChild(t *testing.T, dir, mode string) int {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLockStoreChild$")
	// atexit_sleep_ms=0: under -race the child would otherwise linger a second after exiting.
	cmd.Env = append(os.Environ(), "META_LOCK_CHILD_DIR="+dir, "META_LOCK_CHILD_MODE="+mode, "GORACE=atexit_sleep_ms=0")
	cmd.Stderr = os.Stderr
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
	t.Cleanup(func() {
		stdin.Close()
		cmd.Wait()
	})
	r := bufio.NewScanner(stdout)
	for r.Scan() {
		if r.Text() == "locked" {
			return cmd.Process.Pid
		}
	}
	t.Fatal("child did not take the lock")
	return 0
}

// TestLockStoreChild is the child of startLockChild; it does nothing in a normal run.
func TestLockStoreChild(t *testing.T) {
	dir := os.Getenv("META_LOCK_CHILD_DIR")
	if dir == "" {
		t.Skip("only runs as a child process")
	}
	switch mode := os.Getenv("META_LOCK_CHILD_MODE"); mode {
	case "engine":
		l, err := LockStore(vfs.Default, dir)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		if err := CreateAbort(vfs.Default, dir, os.Getpid()); err != nil {
			t.Fatal(err)
		}
	case "classic":
		f, err := os.OpenFile(filepath.Join(dir, LockFileName), os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		lk := syscall.Flock_t{Type: syscall.F_WRLCK, Start: 0, Len: 1}
		if err := syscall.FcntlFlock(f.Fd(), syscall.F_SETLK, &lk); err != nil {
			t.Fatal(err)
		}
		// A pid that is not the child's: the kernel's answer must win over it.
		if err := CreateAbort(vfs.Default, dir, os.Getpid()+1_000_000); err != nil {
			t.Fatal(err)
		}
	default:
		t.Fatalf("unknown mode %q", mode)
	}
	os.Stdout.WriteString("locked\n")
	os.Stdin.Read(make([]byte, 1)) // returns when the parent closes stdin
}

// containsPID reports whether msg names pid as "pid N" with N not part of a longer number.
func containsPID(msg string, pid int) bool {
	return regexp.MustCompile(`\bpid ` + strconv.Itoa(pid) + `\b`).MatchString(msg)
}
