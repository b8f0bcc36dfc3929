package vfs

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// memDefaultCapacity is the capacity a Mem has when none is set: far more than any test writes,
// and far enough from the int64 limit that Usage arithmetic cannot overflow.
const memDefaultCapacity = 1 << 50

// Mem is an in-memory FS that remembers, next to what a reader sees now, what a power loss is
// certain to leave, so that CrashImage (mem_crash.go) can build the file system a crash could
// leave behind.
//
// Two views are kept for everything a crash can take back:
//
//   - File bytes. Each file node holds its current bytes and its durable bytes. Segment.Sync
//     copies exactly [from, to), not the pages around it: the appender may be writing just past
//     to from another goroutine while the flusher syncs, and copying whole pages would make the
//     race detector see a race that msync on a real mapping does not have. File.Sync copies the
//     whole file, length included.
//   - Directory entries. Each directory holds a current name→node table and a durable one.
//     Create, CreateSegment, Rename and Remove change only the current table; SyncDir copies it
//     over the durable one. Tables point at nodes, so a rename that was never synced leaves the
//     old durable name pointing at the very node that was renamed, as an inode would.
//
// Simplifications, each one chosen because the store never depends on the difference:
//
//   - Directories are durable as soon as MkdirAll creates them, and removing an empty directory
//     is durable at once (together with any unsynced removals inside it). One made by Mkdir is
//     not: until its parent is synced a crash loses it, with everything in it (or, with
//     CrashOptions.UnsyncedDirChanges, keeps it or not at random).
//   - The size a segment gets from CreateSegment is durable at once; only its entry needs
//     SyncDir. Its durable bytes start as zeros.
//   - A ReadOnly segment is a writable slice like any other: memory cannot refuse the store.
//     Its Sync does nothing and Reserve fails, so writing through it never becomes durable.
//   - Writes through Segment.Data are invisible to Mem, so a segment's mtime moves on Sync
//     instead of on write.
//   - File.Write and Create refuse a node that an open segment maps, because growing the slice
//     would detach the mapping; the store never mixes the two on one file.
//   - Renaming a directory is not supported.
//   - There is no working directory: relative names live in a tree rooted at "." and absolute
//     names in one rooted at "/", and both roots always exist.
//
// Space is counted per node: a segment node counts its reservation, a plain file its length.
// A node counts while a current entry names it or a segment, file or lock has it open, as an
// unlinked inode does; nodes that only a durable entry still names cost nothing.
//
// The zero Mem is not usable; NewMem makes one. Concurrency: mu guards the tables, every node's metadata, its durable bytes and the current
// bytes of plain files. The current bytes of a mapped node belong to the callers writing through
// Segment.Data, exactly as with a real mapping; Mem reads them only in Sync (the synced range)
// and in CrashImage (whose caller must have stopped writing).
type Mem struct {
	now func() time.Time // called with mu held; must not call back into Mem

	mu       sync.Mutex
	capacity int64              // bytes; 0 means memDefaultCapacity
	used     int64              // sum of charged over all nodes
	dirs     map[string]*memDir // every directory by clean path
	syncs    int64              // sync calls that had something to sync (mem_crash.go)
	cutAt    int64              // the sync call at which the power goes (0: never)
}

var _ FS = (*Mem)(nil)

// MemOption configures a Mem made by NewMem.
type MemOption func(*Mem)

// WithCapacity limits the bytes that all live nodes of the Mem may hold together; going past it
// fails with ENOSPC. Zero or less means the default, which no test reaches.
func WithCapacity(bytes int64) MemOption {
	return func(m *Mem) { m.capacity = max(bytes, 0) }
}

// WithClock sets the clock that stamps modification times (time.Now by default), so that tests
// of retention by age control what Stat reports. It is called with the Mem's lock held.
func WithClock(now func() time.Time) MemOption {
	return func(m *Mem) { m.now = now }
}

// NewMem returns an empty Mem in which only the roots "." and "/" exist.
func NewMem(opts ...MemOption) *Mem {
	m := &Mem{now: time.Now, dirs: make(map[string]*memDir)}
	for _, o := range opts {
		o(m)
	}
	t := m.now()
	m.dirs["."] = newMemDir(t)
	m.dirs["/"] = newMemDir(t)
	return m
}

// SetCapacity changes the capacity while the Mem is in use, e.g. to fill the disk in the middle
// of a test. Nodes already over it stay; only growth fails. Zero or less means the default.
func (m *Mem) SetCapacity(bytes int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.capacity = max(bytes, 0)
}

// memNode is one file, the in-memory inode. Mem.mu guards every field; the bytes of data of a
// mapped node are the exception described on Mem.
type memNode struct {
	data    []byte // current bytes
	durable []byte // a prefix of the durable bytes; the rest up to durLen is zeros
	durLen  int    // the length a crash keeps
	modTime time.Time

	// sparse nodes come from CreateSegment and cost their reservation rather than their length,
	// like a fallocated file whose tail is still a hole.
	sparse   bool
	reserved int64

	links   int    // current directory entries naming the node
	opens   int    // open segments, files and locks
	maps    int    // open segments
	lockBy  string // name the lock was taken under; "" while unlocked
	charged int64  // what the node counts in Mem.used
}

// memDir is one directory, guarded by Mem.mu.
type memDir struct {
	files   map[string]*memNode // current entries
	durable map[string]*memNode // entries a crash keeps
	subdirs map[string]bool
	modTime time.Time
	// unsynced: made by Mkdir, its entry in its parent not synced since.
	unsynced bool
}

func newMemDir(t time.Time) *memDir {
	return &memDir{
		files:   make(map[string]*memNode),
		durable: make(map[string]*memNode),
		subdirs: make(map[string]bool),
		modTime: t,
	}
}

func memPathErr(op, name string, err error) error {
	return &fs.PathError{Op: op, Path: name, Err: err}
}

// memClean turns a name into the key of m.dirs, refusing names that would climb above a root
// (there is nothing above it to climb to).
func memClean(name string) (string, error) {
	if name == "" {
		return "", syscall.ENOENT
	}
	p := path.Clean(name)
	if p == ".." || strings.HasPrefix(p, "../") {
		return "", syscall.EINVAL
	}
	return p, nil
}

// parent returns the directory that holds name and name's last element.
// REQUIRES: m.mu held.
func (m *Mem) parent(name string) (*memDir, string, error) {
	p, err := memClean(name)
	if err != nil {
		return nil, "", err
	}
	if p == "." || p == "/" {
		return nil, "", syscall.EISDIR
	}
	dp := path.Dir(p)
	d := m.dirs[dp]
	if d == nil {
		if _, _, n, _ := m.lookup(dp); n != nil {
			return nil, "", syscall.ENOTDIR
		}
		return nil, "", syscall.ENOENT
	}
	return d, path.Base(p), nil
}

// lookup finds the plain file or segment called name.
// REQUIRES: m.mu held.
func (m *Mem) lookup(name string) (*memDir, string, *memNode, error) {
	d, base, err := m.parent(name)
	if err != nil {
		return nil, "", nil, err
	}
	n := d.files[base]
	if n == nil {
		if d.subdirs[base] {
			return nil, "", nil, syscall.EISDIR
		}
		return nil, "", nil, syscall.ENOENT
	}
	return d, base, n, nil
}

// dir finds the directory called name. REQUIRES: m.mu held.
func (m *Mem) dir(name string) (*memDir, error) {
	p, err := memClean(name)
	if err != nil {
		return nil, err
	}
	if d := m.dirs[p]; d != nil {
		return d, nil
	}
	if _, _, _, err := m.lookup(p); err == nil {
		return nil, syscall.ENOTDIR
	}
	return nil, syscall.ENOENT
}

// fits says whether delta more bytes fit. REQUIRES: m.mu held.
func (m *Mem) fits(delta int64) bool {
	return delta <= 0 || m.used+delta <= cmp.Or(m.capacity, memDefaultCapacity)
}

// recharge brings n's share of m.used up to date after any change to its size, reservation,
// entries or openers; it is the only place that decides when a node stops costing space.
// REQUIRES: m.mu held.
func (m *Mem) recharge(n *memNode) {
	var c int64
	switch {
	case n.links == 0 && n.opens == 0:
	case n.sparse:
		c = n.reserved
	default:
		c = int64(len(n.data))
	}
	m.used += c - n.charged
	n.charged = c
}

// link points the current entry base of d at n, dropping whatever it named before.
// REQUIRES: m.mu held.
func (m *Mem) link(d *memDir, base string, n *memNode) {
	if old := d.files[base]; old != nil {
		old.links--
		m.recharge(old)
	}
	d.files[base] = n
	n.links++
	m.recharge(n)
	d.modTime = m.now()
}

// unlink removes the current entry base of d. REQUIRES: m.mu held.
func (m *Mem) unlink(d *memDir, base string) {
	n := d.files[base]
	delete(d.files, base)
	n.links--
	m.recharge(n)
	d.modTime = m.now()
}

// CreateSegment creates name with size zero bytes of which the first reserve count against the
// capacity. On ENOSPC or any other error the current table is untouched.
func (m *Mem) CreateSegment(name string, size, reserve int64) (Segment, error) {
	if size <= 0 || reserve < 0 || reserve > size {
		return nil, memPathErr("createsegment", name, syscall.EINVAL)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	d, base, err := m.parent(name)
	if err != nil {
		return nil, memPathErr("open", name, err)
	}
	if d.files[base] != nil || d.subdirs[base] {
		return nil, memPathErr("open", name, syscall.EEXIST)
	}
	if !m.fits(reserve) {
		return nil, memPathErr("fallocate", name, syscall.ENOSPC)
	}
	n := &memNode{data: make([]byte, size), durLen: int(size), modTime: m.now(), sparse: true, reserved: reserve}
	m.link(d, base, n)
	return m.mapNode(name, n, ReadWrite, reserve), nil
}

// OpenSegment maps an existing node of exactly size bytes. Like the OS implementation it
// reports nothing reserved: a writer calls Reserve first, which costs space only past what the
// node already has.
func (m *Mem) OpenSegment(name string, size int64, mode Mode) (Segment, error) {
	if size <= 0 || (mode != ReadWrite && mode != ReadOnly) {
		return nil, memPathErr("opensegment", name, syscall.EINVAL)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	_, _, n, err := m.lookup(name)
	if err != nil {
		return nil, memPathErr("open", name, err)
	}
	if got := int64(len(n.data)); got != size {
		return nil, memPathErr("opensegment", name,
			fmt.Errorf("file has %d bytes, want %d: %w", got, size, syscall.EINVAL))
	}
	return m.mapNode(name, n, mode, 0), nil
}

// REQUIRES: m.mu held.
func (m *Mem) mapNode(name string, n *memNode, mode Mode, reserved int64) *memSegment {
	n.opens++
	n.maps++
	m.recharge(n)
	s := &memSegment{m: m, n: n, name: name, mode: mode, data: n.data[:len(n.data):len(n.data)]}
	s.reserved.Store(reserved)
	return s
}

// Create creates or truncates a plain file. Truncation keeps the node, so the durable bytes stay
// what they were until File.Sync, and an unsynced truncation can be undone by a crash.
func (m *Mem) Create(name string) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, existed, err := m.openOrCreate(name)
	if err != nil {
		return nil, err
	}
	if existed {
		if n.maps > 0 {
			return nil, memPathErr("open", name, syscall.EBUSY)
		}
		n.data, n.sparse, n.reserved, n.modTime = nil, false, 0, m.now()
		m.recharge(n)
	}
	return m.openFile(name, n, true), nil
}

// openOrCreate returns the node name points to, linking a new empty one if there is none.
// REQUIRES: m.mu held.
func (m *Mem) openOrCreate(name string) (n *memNode, existed bool, err error) {
	d, base, err := m.parent(name)
	if err != nil {
		return nil, false, memPathErr("open", name, err)
	}
	if d.subdirs[base] {
		return nil, false, memPathErr("open", name, syscall.EISDIR)
	}
	if n = d.files[base]; n != nil {
		return n, true, nil
	}
	n = &memNode{modTime: m.now()}
	m.link(d, base, n)
	return n, false, nil
}

// Open opens a plain file for reading.
func (m *Mem) Open(name string) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, _, n, err := m.lookup(name)
	if err != nil {
		return nil, memPathErr("open", name, err)
	}
	return m.openFile(name, n, false), nil
}

// OpenUpdate opens an existing plain file for reading and for writing in place: nothing is
// created or truncated, and WriteAt within the file's length costs no space.
func (m *Mem) OpenUpdate(name string) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, _, n, err := m.lookup(name)
	if err != nil {
		return nil, memPathErr("open", name, err)
	}
	if n.maps > 0 {
		return nil, memPathErr("open", name, syscall.EBUSY)
	}
	return m.openFile(name, n, true), nil
}

// REQUIRES: m.mu held.
func (m *Mem) openFile(name string, n *memNode, writable bool) *memFile {
	n.opens++
	m.recharge(n)
	return &memFile{m: m, n: n, name: name, writable: writable}
}

// ReadFile returns a copy of the current bytes of name.
func (m *Mem) ReadFile(name string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, _, n, err := m.lookup(name)
	if err != nil {
		return nil, memPathErr("open", name, err)
	}
	return slices.Clone(n.data), nil
}

// Remove removes a file's current entry, or an empty directory (durably, see Mem). The file's
// space comes back once nothing has it open.
func (m *Mem) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if p, err := memClean(name); err == nil && m.dirs[p] != nil {
		return m.removeDir(name, p)
	}
	d, base, _, err := m.lookup(name)
	if err != nil {
		return memPathErr("remove", name, err)
	}
	m.unlink(d, base)
	return nil
}

// REQUIRES: m.mu held.
func (m *Mem) removeDir(name, p string) error {
	d := m.dirs[p]
	switch {
	case p == "." || p == "/":
		return memPathErr("remove", name, syscall.EBUSY)
	case len(d.files) > 0 || len(d.subdirs) > 0:
		return memPathErr("remove", name, syscall.ENOTEMPTY)
	}
	delete(m.dirs, p)
	parent := m.dirs[path.Dir(p)]
	delete(parent.subdirs, path.Base(p))
	parent.modTime = m.now()
	return nil
}

// Rename moves a file's current entry, replacing any file at newname. Renaming a directory is
// not supported.
func (m *Mem) Rename(oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	linkErr := func(err error) error {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: err}
	}
	if p, err := memClean(oldname); err == nil && m.dirs[p] != nil {
		return linkErr(fmt.Errorf("renaming a directory in Mem: %w", errors.ErrUnsupported))
	}
	od, ob, n, err := m.lookup(oldname)
	if err != nil {
		return linkErr(err)
	}
	nd, nb, err := m.parent(newname)
	if err != nil {
		return linkErr(err)
	}
	if nd.subdirs[nb] {
		return linkErr(syscall.EISDIR)
	}
	if nd.files[nb] == n {
		return nil // POSIX: two names of one file, nothing to do
	}
	m.link(nd, nb, n)
	m.unlink(od, ob)
	return nil
}

// MkdirAll creates dir and its parents, durable at once (see Mem).
func (m *Mem) MkdirAll(dir string) error { return m.mkdir(dir, false) }

// Mkdir creates dir, whose parent must exist, durable once its parent is synced (see Mem).
func (m *Mem) Mkdir(dir string) error { return m.mkdir(dir, true) }

func (m *Mem) mkdir(dir string, one bool) error {
	p, err := memClean(dir)
	if err != nil {
		return memPathErr("mkdir", dir, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if one {
		switch {
		case m.dirs[p] != nil:
			err = fs.ErrExist
		case m.dirs[path.Dir(p)] == nil:
			err = fs.ErrNotExist
		}
	}
	if err == nil {
		err = m.mkdirAll(p)
	}
	if err != nil {
		return memPathErr("mkdir", dir, err)
	}
	if one {
		m.dirs[p].unsynced = true
	}
	return nil
}

// REQUIRES: m.mu held; p clean. The roots always exist, so the recursion ends.
func (m *Mem) mkdirAll(p string) error {
	if m.dirs[p] != nil {
		return nil
	}
	pp := path.Dir(p)
	if err := m.mkdirAll(pp); err != nil {
		return err
	}
	parent, base := m.dirs[pp], path.Base(p)
	if parent.files[base] != nil {
		return syscall.ENOTDIR
	}
	t := m.now()
	m.dirs[p] = newMemDir(t)
	parent.subdirs[base] = true
	parent.modTime = t
	return nil
}

// ReadDir lists the current files and the subdirectories of dir, sorted by name.
func (m *Mem) ReadDir(dir string) ([]DirEntry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, err := m.dir(dir)
	if err != nil {
		return nil, memPathErr("open", dir, err)
	}
	out := make([]DirEntry, 0, len(d.files)+len(d.subdirs))
	for name := range d.files {
		out = append(out, DirEntry{Name: name})
	}
	for name := range d.subdirs {
		out = append(out, DirEntry{Name: name, IsDir: true})
	}
	slices.SortFunc(out, func(a, b DirEntry) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Stat reports the current size and modification time of a file, or that name is a directory.
func (m *Mem) Stat(name string) (FileInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if p, err := memClean(name); err == nil && m.dirs[p] != nil {
		return FileInfo{ModTime: m.dirs[p].modTime, IsDir: true}, nil
	}
	_, _, n, err := m.lookup(name)
	if err != nil {
		return FileInfo{}, memPathErr("stat", name, err)
	}
	return FileInfo{Size: int64(len(n.data)), ModTime: n.modTime}, nil
}

// Lock takes the in-memory lock of the node that name points to, creating an empty file if
// name is missing. The lock belongs to the node, as an fcntl lock belongs to the inode, so a
// renamed lock file stays locked under its new name.
func (m *Mem) Lock(name string) (io.Closer, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, _, err := m.openOrCreate(name)
	if err != nil {
		return nil, err
	}
	if n.lockBy != "" {
		return nil, fmt.Errorf("vfs: lock %s: %w (held in this Mem through %s)", name, ErrLocked, n.lockBy)
	}
	n.lockBy = name
	n.opens++
	m.recharge(n)
	return &memLock{m: m, n: n}, nil
}

// DiskUsage reports the capacity and what the live nodes leave of it; dir must exist.
func (m *Mem) DiskUsage(dir string) (Usage, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, err := m.dir(dir); errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.EINVAL) {
		return Usage{}, memPathErr("statfs", dir, err)
	}
	total := cmp.Or(m.capacity, memDefaultCapacity)
	free := max(total-m.used, 0)
	return Usage{Total: uint64(total), Free: uint64(free), Avail: uint64(free)}, nil
}
