package meta

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/rocketstore/engine/internal/vfs"
)

// LockFileName is the store's lock file, locked on byte 0 as RocketMQ's FileChannel.tryLock
// does, so that our engine and a RocketMQ broker keep out of each other's store.
const LockFileName = "lock"

// InUseError is LockStore's error when another holder has the store's lock. It wraps the error
// of vfs.FS.Lock, so errors.Is(err, vfs.ErrLocked) holds.
type InUseError struct {
	Dir string // the store directory
	// PID is the holder's pid as far as it is known, 0 when it is not. The kernel names the
	// holder of a classic fcntl lock (a RocketMQ broker); for an open-file-description lock (our
	// engine) it cannot, and PID comes from the abort file, where the running engine keeps it.
	PID int
	// FromAbort says that PID was read from the abort file rather than told by the kernel; it
	// may then be stale, from a process that crashed, while some other process holds the lock.
	FromAbort bool
	Err       error // the error of vfs.FS.Lock
}

// Error says that the store is in use and, when known, by which process.
func (e *InUseError) Error() string {
	var who string
	switch {
	case e.PID == os.Getpid():
		who = "this process (" + vfs.DescribePID(e.PID) + ")"
	case e.PID > 0 && e.FromAbort:
		who = "another process, probably " + vfs.DescribePID(e.PID) + " (the pid in the store's abort file)"
	case e.PID > 0:
		// The kernel named it, and vfs's message below already says "held by pid N: ...".
		who = "another process"
	default:
		who = "a holder that neither the lock nor the abort file names"
	}
	return fmt.Sprintf("meta: store %s is in use by %s: %v", e.Dir, who, e.Err)
}

// Unwrap returns the error of vfs.FS.Lock, which wraps vfs.ErrLocked.
func (e *InUseError) Unwrap() error { return e.Err }

// LockStore takes the lock of the store at storeDir (the file <storeDir>/lock, created if
// missing) and returns what releases it. Holding it is what makes this process the store's
// only writer; it must be taken before recovery touches any file.
//
// When another holder has the lock the error is an *InUseError, which wraps vfs.ErrLocked and
// names the holder: from the kernel when it can tell, otherwise from the abort file.
func LockStore(fsys vfs.FS, storeDir string) (io.Closer, error) {
	l, err := fsys.Lock(filepath.Join(storeDir, LockFileName))
	if err == nil {
		return l, nil
	}
	if !errors.Is(err, vfs.ErrLocked) {
		return nil, fmt.Errorf("meta: lock store %s: %w", storeDir, err)
	}
	e := &InUseError{Dir: storeDir, Err: err}
	if pid, ok := kernelHolder(err); ok {
		e.PID = pid
	} else if pid, rerr := ReadAbortPID(fsys, storeDir); rerr == nil {
		e.PID, e.FromAbort = pid, true
	}
	return nil, e
}

// kernelHolder finds the pid that vfs puts in its lock error as "held by pid N" when the kernel
// named the holder. Reading it out of the message is a stopgap until vfs returns it as a field.
func kernelHolder(err error) (int, bool) {
	const marker = "held by pid "
	msg := err.Error()
	i := strings.Index(msg, marker)
	if i < 0 {
		return 0, false
	}
	digits := msg[i+len(marker):]
	n := 0
	for n < len(digits) && digits[n] >= '0' && digits[n] <= '9' {
		n++
	}
	pid, perr := strconv.Atoi(digits[:n])
	if perr != nil || pid <= 0 {
		return 0, false
	}
	return pid, true
}
