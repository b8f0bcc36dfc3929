package vfs

import (
	"errors"
	"io"
	"strconv"
	"sync/atomic"
)

// Op names an operation that Faulty asks its Injector about.
type Op int

// The operations Faulty asks about. Data, Size, Reserved and every Close pass straight through:
// failing them would model nothing a real file system does and would only leak the file.
const (
	OpCreateSegment Op = iota + 1 // FS.CreateSegment
	OpOpenSegment                 // FS.OpenSegment
	OpReserve                     // Segment.Reserve
	OpSegmentSync                 // Segment.Sync
	OpPrefault                    // Segment.Prefault
	OpCreate                      // FS.Create
	OpOpen                        // FS.Open
	OpRead                        // File.Read and File.ReadAt
	OpWrite                       // File.Write and File.WriteAt
	OpFileSync                    // File.Sync
	OpReadFile                    // FS.ReadFile
	OpRename                      // FS.Rename, asked with the old name
	OpRemove                      // FS.Remove
	OpMkdir                       // FS.MkdirAll and FS.Mkdir
	OpReadDir                     // FS.ReadDir
	OpStat                        // FS.Stat
	OpSyncDir                     // FS.SyncDir
	OpLock                        // FS.Lock
	OpDiskUsage                   // FS.DiskUsage
	OpSegmentWrite                // Segment.WriteAt
	OpOpenUpdate                  // FS.OpenUpdate
	OpSyncFS                      // Syncer.SyncAll, asked with the directory it was opened on
)

var opNames = [...]string{
	OpCreateSegment: "CreateSegment",
	OpOpenSegment:   "OpenSegment",
	OpReserve:       "Reserve",
	OpSegmentSync:   "SegmentSync",
	OpPrefault:      "Prefault",
	OpCreate:        "Create",
	OpOpen:          "Open",
	OpRead:          "Read",
	OpWrite:         "Write",
	OpFileSync:      "FileSync",
	OpReadFile:      "ReadFile",
	OpRename:        "Rename",
	OpRemove:        "Remove",
	OpMkdir:         "Mkdir",
	OpReadDir:       "ReadDir",
	OpStat:          "Stat",
	OpSyncDir:       "SyncDir",
	OpLock:          "Lock",
	OpDiskUsage:     "DiskUsage",
	OpSegmentWrite:  "SegmentWrite",
	OpOpenUpdate:    "OpenUpdate",
	OpSyncFS:        "SyncFS",
}

// String returns the operation's name, e.g. "SegmentSync".
func (op Op) String() string {
	if op > 0 && int(op) < len(opNames) {
		return opNames[op]
	}
	return "Op(" + strconv.Itoa(int(op)) + ")"
}

// Injector decides the fate of one operation before Faulty performs it: a non-nil error is
// returned to the caller in place of the operation, which then does not happen at all. name is
// the path the operation is about (for segments and files, the name they were opened with).
//
// An Injector runs on the caller's goroutine with no lock held, so it may block, e.g. on a
// channel, to model a slow sync or to stop a stage at an exact point; it must be safe for
// concurrent use, since the store calls the FS from several goroutines.
type Injector func(op Op, name string) error

// ErrInjected is a ready-made error for injectors to return.
var ErrInjected = errors.New("vfs: injected fault")

// Faulty is an FS that asks an Injector before every operation of the FS it wraps, including
// those of the segments and files it returns. It owns no state besides the two.
type Faulty struct {
	fs  FS
	inj Injector
}

var _ FS = (*Faulty)(nil)

// NewFaulty wraps fs; a nil inj injects nothing.
func NewFaulty(fs FS, inj Injector) *Faulty {
	if inj == nil {
		inj = func(Op, string) error { return nil }
	}
	return &Faulty{fs: fs, inj: inj}
}

// CreateSegment asks OpCreateSegment, then creates and wraps the segment.
func (f *Faulty) CreateSegment(name string, size, reserve int64) (Segment, error) {
	if err := f.inj(OpCreateSegment, name); err != nil {
		return nil, err
	}
	s, err := f.fs.CreateSegment(name, size, reserve)
	if err != nil {
		return nil, err
	}
	return &faultySegment{Segment: s, name: name, inj: f.inj}, nil
}

// OpenSegment asks OpOpenSegment, then opens and wraps the segment.
func (f *Faulty) OpenSegment(name string, size int64, mode Mode) (Segment, error) {
	if err := f.inj(OpOpenSegment, name); err != nil {
		return nil, err
	}
	s, err := f.fs.OpenSegment(name, size, mode)
	if err != nil {
		return nil, err
	}
	return &faultySegment{Segment: s, name: name, inj: f.inj}, nil
}

// Create asks OpCreate, then creates and wraps the file.
func (f *Faulty) Create(name string) (File, error) {
	if err := f.inj(OpCreate, name); err != nil {
		return nil, err
	}
	file, err := f.fs.Create(name)
	if err != nil {
		return nil, err
	}
	return &faultyFile{File: file, name: name, inj: f.inj}, nil
}

// Open asks OpOpen, then opens and wraps the file.
func (f *Faulty) Open(name string) (File, error) {
	if err := f.inj(OpOpen, name); err != nil {
		return nil, err
	}
	file, err := f.fs.Open(name)
	if err != nil {
		return nil, err
	}
	return &faultyFile{File: file, name: name, inj: f.inj}, nil
}

// OpenUpdate asks OpOpenUpdate, then opens and wraps the file.
func (f *Faulty) OpenUpdate(name string) (File, error) {
	if err := f.inj(OpOpenUpdate, name); err != nil {
		return nil, err
	}
	file, err := f.fs.OpenUpdate(name)
	if err != nil {
		return nil, err
	}
	return &faultyFile{File: file, name: name, inj: f.inj}, nil
}

// ReadFile asks OpReadFile.
func (f *Faulty) ReadFile(name string) ([]byte, error) {
	if err := f.inj(OpReadFile, name); err != nil {
		return nil, err
	}
	return f.fs.ReadFile(name)
}

// Remove asks OpRemove.
func (f *Faulty) Remove(name string) error {
	if err := f.inj(OpRemove, name); err != nil {
		return err
	}
	return f.fs.Remove(name)
}

// Rename asks OpRename with oldname.
func (f *Faulty) Rename(oldname, newname string) error {
	if err := f.inj(OpRename, oldname); err != nil {
		return err
	}
	return f.fs.Rename(oldname, newname)
}

// MkdirAll asks OpMkdir.
func (f *Faulty) MkdirAll(dir string) error {
	if err := f.inj(OpMkdir, dir); err != nil {
		return err
	}
	return f.fs.MkdirAll(dir)
}

// Mkdir asks OpMkdir.
func (f *Faulty) Mkdir(dir string) error {
	if err := f.inj(OpMkdir, dir); err != nil {
		return err
	}
	return f.fs.Mkdir(dir)
}

// ReadDir asks OpReadDir.
func (f *Faulty) ReadDir(dir string) ([]DirEntry, error) {
	if err := f.inj(OpReadDir, dir); err != nil {
		return nil, err
	}
	return f.fs.ReadDir(dir)
}

// Stat asks OpStat.
func (f *Faulty) Stat(name string) (FileInfo, error) {
	if err := f.inj(OpStat, name); err != nil {
		return FileInfo{}, err
	}
	return f.fs.Stat(name)
}

// SyncDir asks OpSyncDir.
func (f *Faulty) SyncDir(dir string) error {
	if err := f.inj(OpSyncDir, dir); err != nil {
		return err
	}
	return f.fs.SyncDir(dir)
}

// OpenSyncer opens the wrapped FS's Syncer (not asked) and wraps it: SyncAll asks OpSyncFS.
func (f *Faulty) OpenSyncer(dir string) (Syncer, error) {
	s, err := f.fs.OpenSyncer(dir)
	if err != nil {
		return nil, err
	}
	return &faultySyncer{Syncer: s, dir: dir, inj: f.inj}, nil
}

// faultySyncer asks its Injector before SyncAll, and hands the wrapped Syncer the segments
// it knows (the ones the wrapped FS made).
type faultySyncer struct {
	Syncer
	dir string
	inj Injector
}

func (s *faultySyncer) SyncAll(written []SegmentRange) error {
	if err := s.inj(OpSyncFS, s.dir); err != nil {
		return err
	}
	inner := make([]SegmentRange, len(written))
	for i, r := range written {
		if fs, ok := r.Seg.(*faultySegment); ok {
			r.Seg = fs.Segment
		}
		inner[i] = r
	}
	return s.Syncer.SyncAll(inner)
}

// Lock asks OpLock. Releasing the lock is not asked about.
func (f *Faulty) Lock(name string) (io.Closer, error) {
	if err := f.inj(OpLock, name); err != nil {
		return nil, err
	}
	return f.fs.Lock(name)
}

// DiskUsage asks OpDiskUsage.
func (f *Faulty) DiskUsage(dir string) (Usage, error) {
	if err := f.inj(OpDiskUsage, dir); err != nil {
		return Usage{}, err
	}
	return f.fs.DiskUsage(dir)
}

// faultySegment asks its Injector before Reserve, WriteAt, Sync and Prefault; the rest is the wrapped
// segment's.
type faultySegment struct {
	Segment
	name string
	inj  Injector
}

// DataExtents passes the wrapped segment's answer through (vfs.DataExtents), so that a Faulty
// file system maps data as the one it wraps.
func (s *faultySegment) DataExtents(from int64) ([]Extent, error) {
	return DataExtents(s.Segment, from), nil
}

func (s *faultySegment) Reserve(upTo int64) error {
	if err := s.inj(OpReserve, s.name); err != nil {
		return err
	}
	return s.Segment.Reserve(upTo)
}

func (s *faultySegment) WriteAt(p []byte, off int64) error {
	if err := s.inj(OpSegmentWrite, s.name); err != nil {
		return err
	}
	return s.Segment.WriteAt(p, off)
}

func (s *faultySegment) Sync(from, to int64) error {
	if err := s.inj(OpSegmentSync, s.name); err != nil {
		return err
	}
	return s.Segment.Sync(from, to)
}

func (s *faultySegment) Prefault(from, to int64) error {
	if err := s.inj(OpPrefault, s.name); err != nil {
		return err
	}
	return s.Segment.Prefault(from, to)
}

// faultyFile asks its Injector before Read, ReadAt, Write, WriteAt and Sync.
type faultyFile struct {
	File
	name string
	inj  Injector
}

func (f *faultyFile) Read(p []byte) (int, error) {
	if err := f.inj(OpRead, f.name); err != nil {
		return 0, err
	}
	return f.File.Read(p)
}

func (f *faultyFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.inj(OpRead, f.name); err != nil {
		return 0, err
	}
	return f.File.ReadAt(p, off)
}

func (f *faultyFile) Write(p []byte) (int, error) {
	if err := f.inj(OpWrite, f.name); err != nil {
		return 0, err
	}
	return f.File.Write(p)
}

func (f *faultyFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.inj(OpWrite, f.name); err != nil {
		return 0, err
	}
	return f.File.WriteAt(p, off)
}

func (f *faultyFile) Sync() error {
	if err := f.inj(OpFileSync, f.name); err != nil {
		return err
	}
	return f.File.Sync()
}

// OnOp returns an Injector that fails every call of op with err.
func OnOp(op Op, err error) Injector {
	return func(o Op, _ string) error {
		if o == op {
			return err
		}
		return nil
	}
}

// OnNth returns an Injector that fails only the n-th call of op (counting from 1) with err. The
// count is atomic, so with concurrent callers exactly one of them gets err.
func OnNth(op Op, n int, err error) Injector {
	var calls atomic.Int64
	return func(o Op, _ string) error {
		if o == op && calls.Add(1) == int64(n) {
			return err
		}
		return nil
	}
}

// Toggle switches an Injector on and off while the FS is in use, e.g. to let recovery run
// cleanly after a fault. It starts off. Its methods are safe for concurrent use.
type Toggle struct {
	inj Injector
	on  atomic.Bool
}

// NewToggle returns a Toggle, switched off, around inj.
func NewToggle(inj Injector) *Toggle {
	return &Toggle{inj: inj}
}

// On makes Inject consult the wrapped Injector.
func (t *Toggle) On() { t.on.Store(true) }

// Off makes Inject let every operation through.
func (t *Toggle) Off() { t.on.Store(false) }

// Inject is the Injector to give NewFaulty: the wrapped one while on, nothing while off.
func (t *Toggle) Inject(op Op, name string) error {
	if !t.on.Load() {
		return nil
	}
	return t.inj(op, name)
}
