package vfs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// OS is the real file system: segments are fallocated, then mapped with MAP_SHARED; Sync is
// msync(MS_SYNC) of the dirty pages only; Lock is an open-file-description fcntl lock on byte 0.
type OS struct{}

// Default is the OS file system.
var Default FS = OS{}

// Permissions of what the store creates: owner-only. A store holds every message it was sent,
// so nothing of it is readable by other users, whatever the umask (which can only remove bits).
const (
	// FileMode is the mode of every file the store creates: segments, checkpoint, abort, lock,
	// config JSON and their temporary copies.
	FileMode os.FileMode = 0o600
	// DirMode is the mode of every directory the store creates.
	DirMode os.FileMode = 0o700
)

var pageSize = int64(os.Getpagesize())

// zeroPage is one page of zeros, for CreateSegment.
var zeroPage = make([]byte, pageSize)

// CreateSegment implements FS.
func (OS) CreateSegment(name string, size, reserve int64) (_ Segment, err error) {
	if size <= 0 || reserve < 0 || reserve > size {
		return nil, fmt.Errorf("vfs: create %s: bad size %d / reserve %d", name, size, reserve)
	}
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, FileMode)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(name)
		}
	}()
	// The size is set first (sparse), then blocks are reserved for the part that will be written.
	// Writes through the mapping go only below Reserved, so they never need a block the disk
	// cannot give: ENOSPC comes back from fallocate as an error, never as a SIGBUS on a store.
	if err := f.Truncate(size); err != nil {
		return nil, fmt.Errorf("vfs: size %s: %w", name, err)
	}
	if reserve > 0 {
		if err := fallocate(f, 0, reserve); err != nil {
			return nil, fmt.Errorf("vfs: reserve %d bytes for %s: %w", reserve, name, err)
		}
		// The first store through the mapping of a new file takes the file system's write
		// fault path for its first page (ext4_page_mkwrite: a journal handle, the inode's
		// times), which costs far more than the same page written with pwrite. The writer of a
		// new ConsumeQueue is the dispatcher, which waits for it; zeros change nothing.
		if _, err := f.WriteAt(zeroPage[:min(reserve, pageSize)], 0); err != nil {
			return nil, fmt.Errorf("vfs: write the first page of %s: %w", name, err)
		}
	}
	return mapSegment(f, name, size, reserve, ReadWrite)
}

// OpenSegment implements FS.
func (OS) OpenSegment(name string, size int64, mode Mode) (_ Segment, err error) {
	flag := os.O_RDWR
	if mode == ReadOnly {
		flag = os.O_RDONLY
	}
	f, err := os.OpenFile(name, flag, 0)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			f.Close()
		}
	}()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() != size {
		return nil, fmt.Errorf("vfs: open %s: size %d, want %d", name, st.Size(), size)
	}
	return mapSegment(f, name, size, 0, mode)
}

func mapSegment(f *os.File, name string, size, reserved int64, mode Mode) (Segment, error) {
	prot := unix.PROT_READ
	if mode == ReadWrite {
		prot |= unix.PROT_WRITE
	}
	data, err := unix.Mmap(int(f.Fd()), 0, int(size), prot, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("vfs: mmap %s: %w", name, err)
	}
	// The mapping outlives the descriptor: keeping one open per segment would make 40,000
	// ConsumeQueue files cost 40,000 descriptors. Reserve opens the file again when it needs to.
	if err := f.Close(); err != nil {
		unix.Munmap(data)
		return nil, err
	}
	s := &osSegment{name: name, data: data, mode: mode}
	s.reserved = reserved
	return s, nil
}

func fallocate(f *os.File, off, n int64) error {
	for {
		err := unix.Fallocate(int(f.Fd()), 0, off, n)
		if err != unix.EINTR {
			return err
		}
	}
}

// osSegment is a mapped file. Reserve may be called from one goroutine (the file's writer) while
// others read Data; reserved is guarded by mu so that Reserved can be read from anywhere.
type osSegment struct {
	name string
	data []byte
	mode Mode

	mu       sync.Mutex
	reserved int64
	closed   bool
	// w is the descriptor WriteAt writes with, opened by its first call: only a segment being
	// written through the file holds one (the CommitLog's), not every mapped queue file.
	w *os.File
}

func (s *osSegment) Data() []byte { return s.data }
func (s *osSegment) Size() int64  { return int64(len(s.data)) }

func (s *osSegment) Reserved() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reserved
}

func (s *osSegment) Reserve(upTo int64) error {
	if s.mode != ReadWrite {
		return fmt.Errorf("vfs: reserve %s: segment is read-only", s.name)
	}
	if upTo > int64(len(s.data)) {
		return fmt.Errorf("vfs: reserve %s: %d past size %d", s.name, upTo, len(s.data))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if upTo <= s.reserved {
		return nil
	}
	f, err := os.OpenFile(s.name, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("vfs: reserve %s: %w", s.name, err)
	}
	err = fallocate(f, s.reserved, upTo-s.reserved)
	f.Close()
	if err != nil {
		return fmt.Errorf("vfs: reserve %s [%d,%d): %w", s.name, s.reserved, upTo, err)
	}
	s.reserved = upTo
	return nil
}

func (s *osSegment) WriteAt(p []byte, off int64) error {
	if s.mode != ReadWrite {
		return fmt.Errorf("vfs: write %s: segment is read-only", s.name)
	}
	end := off + int64(len(p))
	s.mu.Lock()
	if off < 0 || end > s.reserved {
		s.mu.Unlock()
		return fmt.Errorf("vfs: write %s [%d,%d): outside reserved [0,%d)", s.name, off, end, s.reserved)
	}
	if s.closed {
		s.mu.Unlock()
		return fmt.Errorf("vfs: write %s: %w", s.name, os.ErrClosed)
	}
	if s.w == nil {
		f, err := os.OpenFile(s.name, os.O_WRONLY, 0)
		if err != nil {
			s.mu.Unlock()
			return fmt.Errorf("vfs: write %s: %w", s.name, err)
		}
		s.w = f
	}
	w := s.w
	s.mu.Unlock()
	// WriteAt loops over short writes and EINTR itself.
	if _, err := w.WriteAt(p, off); err != nil {
		return fmt.Errorf("vfs: write %s [%d,%d): %w", s.name, off, end, err)
	}
	return nil
}

func (s *osSegment) DoneWriting() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.w == nil {
		return nil
	}
	err := s.w.Close()
	s.w = nil
	return err
}

func (s *osSegment) Sync(from, to int64) error {
	if s.mode != ReadWrite || from >= to {
		return nil
	}
	if from < 0 || to > int64(len(s.data)) {
		return fmt.Errorf("vfs: sync %s: range [%d,%d) outside [0,%d)", s.name, from, to, len(s.data))
	}
	start := from &^ (pageSize - 1) // msync wants a page-aligned address
	if err := unix.Msync(s.data[start:to], unix.MS_SYNC); err != nil {
		return fmt.Errorf("vfs: msync %s [%d,%d): %w", s.name, start, to, err)
	}
	return nil
}

func (s *osSegment) Prefault(from, to int64) error {
	if s.mode != ReadWrite || from >= to {
		return nil
	}
	if from < 0 || to > s.Reserved() {
		return fmt.Errorf("vfs: prefault %s: range [%d,%d) outside reserved [0,%d)", s.name, from, to, s.Reserved())
	}
	start := from &^ (pageSize - 1)
	// MADV_POPULATE_WRITE (Linux 5.14) takes the write faults without touching the bytes. It
	// holds the process's mmap lock while it works, and a waiting mmap or munmap (a new
	// ConsumeQueue file, say) makes every later page fault wait behind it: one call over a whole
	// 1 GiB segment stalled the writer for half a second. Chunks keep each hold short.
	// Where the kernel lacks it, writing a byte back to itself on every page does the same.
	const chunk = 2 << 20
	populated := true
	for p := start; p < to; p += chunk {
		if err := unix.Madvise(s.data[p:min(p+chunk, to)], unix.MADV_POPULATE_WRITE); err != nil {
			populated = false
			break
		}
	}
	if populated {
		return nil
	}
	// An atomic add of zero is a write the compiler cannot drop, and it keeps the byte.
	for p := start; p < to; p += pageSize {
		atomic.AddUint32((*uint32)(unsafe.Pointer(&s.data[p])), 0)
	}
	return nil
}

func (s *osSegment) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	err := unix.Munmap(s.data)
	s.data = nil
	if s.w != nil {
		err = errors.Join(err, s.w.Close())
		s.w = nil
	}
	return err
}

func (s *osSegment) AdviseRandom() { _ = unix.Madvise(s.data, unix.MADV_RANDOM) }

// DropCache zaps the mapping's pages of [from, to) (MADV_DONTNEED: a shared file mapping keeps
// its bytes, the next access faults them in again), since the kernel never drops a page that
// is mapped, then drops the file's cached pages (FADV_DONTNEED), through the write descriptor
// or one opened for the call. Only whole pages, and the kernel keeps a large folio (up to 2 MiB)
// that reaches outside the range: callers that drop a log behind its head drop 2 MiB-aligned
// ranges, so that nothing stays behind.
func (s *osSegment) DropCache(from, to int64) error {
	from = (from + pageSize - 1) &^ (pageSize - 1)
	to = min(to, int64(len(s.data))) &^ (pageSize - 1)
	if from < 0 || from >= to {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	if err := unix.Madvise(s.data[from:to], unix.MADV_DONTNEED); err != nil {
		return fmt.Errorf("vfs: drop the cache of %s [%d,%d): madvise: %w", s.name, from, to, err)
	}
	f := s.w
	if f == nil {
		var err error
		if f, err = os.Open(s.name); err != nil {
			return fmt.Errorf("vfs: drop the cache of %s: %w", s.name, err)
		}
		defer f.Close()
	}
	if err := unix.Fadvise(int(f.Fd()), from, to-from, unix.FADV_DONTNEED); err != nil {
		return fmt.Errorf("vfs: drop the cache of %s [%d,%d): fadvise: %w", s.name, from, to, err)
	}
	return nil
}

// DataExtents implements DataMapper with lseek's SEEK_DATA and SEEK_HOLE on the file. On ext4
// and xfs a fallocated block that was never written is a hole to SEEK_DATA unless the page
// cache holds its page, so a segment is data up to where it was written (or read) and a hole
// after. A file system without them reports the whole file as data, which is only slower.
func (s *osSegment) DataExtents(from int64) ([]Extent, error) {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("vfs: map data of %s: %w", s.name, os.ErrClosed)
	}
	size := int64(len(s.data))
	f, err := os.Open(s.name)
	if err != nil {
		return nil, fmt.Errorf("vfs: map data of %s: %w", s.name, err)
	}
	defer f.Close()
	fd := int(f.Fd())
	var out []Extent
	for off := max(from, 0); off < size; {
		if len(out) == maxExtents-1 {
			return append(out, Extent{off, size}), nil
		}
		d, err := unix.Seek(fd, off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			break // no data at or after off
		}
		if err != nil {
			return nil, fmt.Errorf("vfs: seek data of %s at %d: %w", s.name, off, err)
		}
		if d >= size {
			break
		}
		h, err := unix.Seek(fd, d, unix.SEEK_HOLE)
		if err != nil {
			return nil, fmt.Errorf("vfs: seek hole of %s at %d: %w", s.name, d, err)
		}
		h = min(h, size)
		if h <= d {
			return nil, fmt.Errorf("vfs: seek hole of %s at %d gave %d", s.name, d, h)
		}
		out = append(out, Extent{d, h})
		off = h
	}
	return out, nil
}

// Create implements FS. A new file is made owner-only (FileMode); an existing one it truncates
// is made so too, since its whole content is about to be replaced (a leftover temporary file of
// an older version, say).
func (OS) Create(name string) (File, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, FileMode)
	if err != nil {
		return nil, err
	}
	if err := restrict(f); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// restrict takes the group and other bits off f's mode, if it has any. A file of another user
// (EPERM) is left as it is: it was not ours to protect.
func restrict(f *os.File) error {
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if st.Mode().Perm()&0o077 == 0 {
		return nil
	}
	if err := f.Chmod(st.Mode().Perm() &^ 0o077); err != nil && !errors.Is(err, syscall.EPERM) {
		return fmt.Errorf("vfs: make %s owner-only: %w", f.Name(), err)
	}
	return nil
}

// Open implements FS.
func (OS) Open(name string) (File, error) { return os.Open(name) }

// OpenUpdate implements FS: O_RDWR without O_CREATE or O_TRUNC.
func (OS) OpenUpdate(name string) (File, error) { return os.OpenFile(name, os.O_RDWR, 0) }

// ReadFile implements FS.
func (OS) ReadFile(name string) ([]byte, error) { return os.ReadFile(name) }

// Remove implements FS.
func (OS) Remove(name string) error { return os.Remove(name) }

// Rename implements FS.
func (OS) Rename(oldname, newname string) error { return os.Rename(oldname, newname) }

// MkdirAll implements FS. New directories are owner-only (DirMode) and made durable by syncing
// their parents; existing ones are left as they are (the store's root may be the operator's).
func (OS) MkdirAll(dir string) error {
	var created []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil {
			break
		}
		created = append(created, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	if err := os.MkdirAll(dir, DirMode); err != nil {
		return err
	}
	for _, d := range created {
		if err := syncDir(filepath.Dir(d)); err != nil {
			return err
		}
	}
	return nil
}

// Mkdir implements FS. The directory is owner-only (DirMode).
func (OS) Mkdir(dir string) error { return os.Mkdir(dir, DirMode) }

// ReadDir implements FS.
func (OS) ReadDir(dir string) ([]DirEntry, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := make([]DirEntry, 0, len(ents))
	for _, e := range ents {
		out = append(out, DirEntry{Name: e.Name(), IsDir: e.IsDir()})
	}
	slices.SortFunc(out, func(a, b DirEntry) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Stat implements FS.
func (OS) Stat(name string) (FileInfo, error) {
	st, err := os.Stat(name)
	if err != nil {
		return FileInfo{}, err
	}
	return FileInfo{Size: st.Size(), ModTime: st.ModTime(), IsDir: st.IsDir()}, nil
}

// SyncDir implements FS.
func (OS) SyncDir(dir string) error { return syncDir(dir) }

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	return errors.Join(err, d.Close())
}

// OpenSyncer implements FS: it keeps dir open, for syncfs(2).
func (OS) OpenSyncer(dir string) (Syncer, error) {
	d, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	return osSyncer{d}, nil
}

// osSyncer is the OS's Syncer: a descriptor on a directory of the file system.
type osSyncer struct{ d *os.File }

// SyncAll is syncfs(2) on the file system; written needs no more (syncfs covers it). Since
// Linux 5.8 syncfs reports the write back errors of the file system since d was opened.
func (s osSyncer) SyncAll([]SegmentRange) error {
	if err := unix.Syncfs(int(s.d.Fd())); err != nil {
		return fmt.Errorf("vfs: syncfs %s: %w", s.d.Name(), err)
	}
	return nil
}

func (s osSyncer) Close() error { return s.d.Close() }

// DiskUsage implements FS.
func (OS) DiskUsage(dir string) (Usage, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return Usage{}, fmt.Errorf("vfs: statfs %s: %w", dir, err)
	}
	bs := uint64(st.Bsize)
	return Usage{Total: st.Blocks * bs, Free: st.Bfree * bs, Avail: st.Bavail * bs}, nil
}

// heldLocks catches a second Lock of the same file inside this process: fcntl locks of either
// kind do not conflict with the process's own open file descriptions in every case (classic
// POSIX locks never do), and two engines in one process must not share a store either.
var heldLocks sync.Map // absolute path -> struct{}

// Lock implements FS. It uses an open-file-description lock (F_OFD_SETLK) on byte 0: it
// conflicts with RocketMQ's FileChannel.tryLock (a classic fcntl lock on byte 0) and with other
// engines, and unlike a classic fcntl lock it is not dropped when some unrelated descriptor of
// the same file is closed in this process.
func (OS) Lock(name string) (io.Closer, error) {
	abs, err := filepath.Abs(name)
	if err != nil {
		return nil, err
	}
	if _, loaded := heldLocks.LoadOrStore(abs, struct{}{}); loaded {
		return nil, fmt.Errorf("vfs: lock %s: %w (this process already holds it)", name, ErrLocked)
	}
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, FileMode)
	if err != nil {
		heldLocks.Delete(abs)
		return nil, err
	}
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: io.SeekStart, Start: 0, Len: 1}
	if err := unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &lk); err != nil {
		holder := lockHolder(f)
		f.Close()
		heldLocks.Delete(abs)
		if errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EACCES) {
			return nil, fmt.Errorf("vfs: lock %s: %w%s", name, ErrLocked, holder)
		}
		return nil, fmt.Errorf("vfs: lock %s: %w", name, err)
	}
	// RocketMQ writes "lock" into the file; keep the same bytes.
	if _, err := f.WriteAt([]byte("lock"), 0); err == nil {
		_ = f.Sync()
	}
	return &osLock{f: f, abs: abs}, nil
}

// lockHolder describes who holds the lock when the kernel can say: a classic fcntl lock
// reports its pid; an OFD lock reports -1, and then the caller names the holder from
// elsewhere (the store's abort file holds the running engine's pid).
func lockHolder(f *os.File) string {
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: io.SeekStart, Start: 0, Len: 1}
	if err := unix.FcntlFlock(f.Fd(), unix.F_OFD_GETLK, &lk); err != nil || lk.Type == unix.F_UNLCK || lk.Pid <= 0 {
		return ""
	}
	return " (held by " + describePID(int(lk.Pid)) + ")"
}

// describePID names a process as "pid N: command line" when /proc tells it.
func describePID(pid int) string {
	s := "pid " + strconv.Itoa(pid)
	if b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline"); err == nil && len(b) > 0 {
		cmd := strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
		s += ": " + cmd
	}
	return s
}

// DescribePID names a process as "pid N: command line" when /proc tells it, for error messages
// about who holds a store.
func DescribePID(pid int) string { return describePID(pid) }

type osLock struct {
	f    *os.File
	abs  string
	once sync.Once
}

func (l *osLock) Close() error {
	var err error
	l.once.Do(func() {
		err = l.f.Close() // closing the only descriptor releases the OFD lock
		heldLocks.Delete(l.abs)
	})
	return err
}
