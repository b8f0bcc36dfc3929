package indexfile

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/rocketstore/engine/internal/store/javahash"
	"github.com/rocketstore/engine/internal/store/segment"
	"github.com/rocketstore/engine/internal/vfs"
)

// ErrFull is returned by PutKey when the file holds Entries-1 keys; the caller rolls to a new file.
var ErrFull = errors.New("indexfile: file full")

// ErrReadOnly is returned when writing to a file or service opened read-only.
var ErrReadOnly = errors.New("indexfile: read-only")

// ErrClosed is returned when using a file or service after Close.
var ErrClosed = errors.New("indexfile: closed")

// File is one index file (RocketMQ's IndexFile), mapped once at its full size.
//
// Ownership: whoever created or opened the file (normally the Service) holds its owner reference
// and drops it with Close. One writer at a time calls PutKey/PutHash; Flush may run from another
// goroutine (it excludes the writer). Any goroutine may query, because every read method takes a
// reader reference for its duration, so a file deleted by retention stays mapped under a query;
// a read method on a file already unmapped finds nothing.
type File struct {
	name     string
	geo      Geometry
	sf       *segment.File // reference counts and reservation steps; nil for an in-memory image
	seg      vfs.Segment   // sf's segment, for Sync of a range segment.File does not track
	data     []byte        // the whole mapping
	writable bool

	// The header as readers see it. Writes go through the writer (under wmu); readers load
	// count after a slot so that the entries a slot leads to are published (see package doc).
	beginTS, endTS, beginPhy, endPhy atomic.Int64
	slotCount, count                 atomic.Int32

	wmu      sync.Mutex // serialises the writer, Flush, Close and reads of the unpublished entry
	reserved int64      // bytes known to have disk blocks; guarded by wmu
	dirty    bool       // written since the last Flush; guarded by wmu
	closed   bool       // owner reference dropped; guarded by wmu
}

// CreateFile creates the index file name, which must not exist, reserving disk blocks for the
// header and the slot table only (the entry area is reserved in reserveStep steps as keys are
// added; 0 reserves the whole file at the first put).
//
// prevEndPhyOffset and prevEndTimestamp are the end values of the full file this one follows (0
// for the first file). As in RocketMQ's IndexFile constructor, each non-zero one becomes both the
// begin and end value of the new header: the first put then measures its timeDiff against the
// previous file's end timestamp before the begin timestamp is reset to its own.
func CreateFile(fsys vfs.FS, name string, g Geometry, reserveStep, prevEndPhyOffset, prevEndTimestamp int64) (*File, error) {
	if err := g.Validate(); err != nil {
		return nil, err
	}
	seg, err := fsys.CreateSegment(name, g.FileSize(), g.EntryOffset(0))
	if err != nil {
		return nil, fmt.Errorf("indexfile: create %s: %w", name, err)
	}
	seg.AdviseRandom() // slots are hit at random: read-ahead would only fill the cache with zeros
	f, err := newFile(seg, name, g, reserveStep, true)
	if err != nil {
		return nil, errors.Join(err, seg.Close(), fsys.Remove(name))
	}
	f.count.Store(1) // entry 0 is never used; the disk says 0 until the first put writes 2
	if prevEndPhyOffset > 0 {
		f.setInt64(&f.beginPhy, offBeginPhyOffset, prevEndPhyOffset)
		f.setInt64(&f.endPhy, offEndPhyOffset, prevEndPhyOffset)
	}
	if prevEndTimestamp > 0 {
		f.setInt64(&f.beginTS, offBeginTimestamp, prevEndTimestamp)
		f.setInt64(&f.endTS, offEndTimestamp, prevEndTimestamp)
	}
	f.dirty = true
	return f, nil
}

// OpenFile maps the existing index file name, which must be g.FileSize() bytes, and loads its
// header as RocketMQ's IndexHeader.load does: an indexCount <= 0 is taken as 1. A count beyond
// g.Entries (a corrupt header) is taken as g.Entries, which makes the file full and keeps every
// read inside it.
func OpenFile(fsys vfs.FS, name string, g Geometry, reserveStep int64, mode vfs.Mode) (*File, error) {
	if err := g.Validate(); err != nil {
		return nil, err
	}
	seg, err := fsys.OpenSegment(name, g.FileSize(), mode)
	if err != nil {
		return nil, fmt.Errorf("indexfile: open %s: %w", name, err)
	}
	seg.AdviseRandom()
	f, err := newFile(seg, name, g, reserveStep, mode == vfs.ReadWrite)
	if err != nil {
		return nil, errors.Join(err, seg.Close())
	}
	f.loadHeader()
	return f, nil
}

func newFile(seg vfs.Segment, name string, g Geometry, reserveStep int64, writable bool) (*File, error) {
	data := seg.Data()
	if int64(len(data)) != g.FileSize() {
		return nil, fmt.Errorf("indexfile: %s: mapping is %d bytes, want %d", name, len(data), g.FileSize())
	}
	// Slots are accessed with 32-bit atomics, which need 4-byte alignment; mappings are
	// page-aligned and large heap slices 8-aligned, so this only guards against odd test FSes.
	if uintptr(unsafe.Pointer(unsafe.SliceData(data)))%4 != 0 {
		return nil, fmt.Errorf("indexfile: %s: mapping is not 4-byte aligned", name)
	}
	return &File{
		name:     name,
		geo:      g,
		sf:       segment.NewFile(seg, name, 0, reserveStep),
		seg:      seg,
		data:     data,
		writable: writable,
		reserved: seg.Reserved(),
	}, nil
}

// openImage makes a read-only File over a copy of data, padded or cut to g.FileSize(): the
// reading half of a file without any FS, for fuzzing and for tools that hold a file's bytes.
func openImage(data []byte, g Geometry) (*File, error) {
	if err := g.Validate(); err != nil {
		return nil, err
	}
	words := make([]uint64, (g.FileSize()+7)/8) // 8-aligned backing store
	buf := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(words))), g.FileSize())
	copy(buf, data)
	f := &File{name: "image", geo: g, data: buf}
	f.loadHeader()
	return f, nil
}

func (f *File) loadHeader() {
	h, _ := DecodeHeader(f.data)
	f.beginTS.Store(h.BeginTimestamp)
	f.endTS.Store(h.EndTimestamp)
	f.beginPhy.Store(h.BeginPhyOffset)
	f.endPhy.Store(h.EndPhyOffset)
	f.slotCount.Store(h.HashSlotCount)
	f.count.Store(min(max(h.IndexCount, 1), f.geo.Entries))
}

// Name is the file's path.
func (f *File) Name() string { return f.name }

// Geometry is the file's shape.
func (f *File) Geometry() Geometry { return f.geo }

// Header returns the header as the writer last published it, with IndexCount as held in memory
// (1 for a file without keys). Under a concurrent writer the fields may come from two puts.
func (f *File) Header() Header {
	return Header{
		BeginTimestamp: f.beginTS.Load(),
		EndTimestamp:   f.endTS.Load(),
		BeginPhyOffset: f.beginPhy.Load(),
		EndPhyOffset:   f.endPhy.Load(),
		HashSlotCount:  f.slotCount.Load(),
		IndexCount:     f.count.Load(),
	}
}

// Full reports whether the file holds its Entries-1 keys (IndexFile.isWriteFull).
func (f *File) Full() bool { return f.count.Load() >= f.geo.Entries }

// EndPhyOffset is the CommitLog offset of the last message indexed (or the inherited one).
func (f *File) EndPhyOffset() int64 { return f.endPhy.Load() }

// EndTimestamp is the store timestamp of the last message indexed (or the inherited one).
func (f *File) EndTimestamp() int64 { return f.endTS.Load() }

// BeginTimestamp is the store timestamp of the first message indexed (or the inherited one).
func (f *File) BeginTimestamp() int64 { return f.beginTS.Load() }

// PutKey indexes key (already "topic#key") for the message at phyOffset stored at
// storeTimestamp. See PutHash.
func (f *File) PutKey(key string, phyOffset, storeTimestamp int64) error {
	return f.PutHash(javahash.IndexKeyHash(key), phyOffset, storeTimestamp)
}

// PutHash adds an entry for a key whose index hash is keyHash (>= 0), exactly as IndexFile.putKey:
// the entry goes at number indexCount and links to the slot's previous head; the first entry sets
// the begin values; the header is written through to the mapping. It returns ErrFull when the file
// is full and an error, before writing anything, when disk blocks cannot be reserved.
func (f *File) PutHash(keyHash int32, phyOffset, storeTimestamp int64) error {
	if keyHash < 0 {
		return fmt.Errorf("indexfile: negative key hash %d", keyHash)
	}
	f.wmu.Lock()
	defer f.wmu.Unlock()
	switch {
	case f.closed:
		return ErrClosed
	case !f.writable:
		return ErrReadOnly
	}
	n := f.count.Load()
	if n >= f.geo.Entries {
		return ErrFull
	}
	at := f.geo.EntryOffset(n)
	if at+EntrySize > f.reserved {
		// Reserve covers [0, upTo): on a file opened after a restart, where the FS cannot tell
		// which blocks exist, this also covers the header and slots written below.
		if err := f.sf.Reserve(at + EntrySize); err != nil {
			return fmt.Errorf("indexfile: %s: %w", f.name, err)
		}
		f.reserved = f.sf.Reserved()
	}

	slotAt := f.geo.SlotOffset(keyHash % f.geo.Slots)
	prev := f.loadSlot(slotAt)
	// Entries below n are the ones written; a slot at n or past it is stale (its page reached
	// the disk without the header's count): linking to it would make entry n its own
	// predecessor. RocketMQ's putKey lets n through.
	if prev <= 0 || prev >= n {
		prev = 0
	}
	begin := f.beginTS.Load()
	diff := (storeTimestamp - begin) / 1000 // Java long division truncates toward zero too
	switch {
	case begin <= 0:
		diff = 0
	case diff > math.MaxInt32:
		diff = math.MaxInt32
	case diff < 0:
		diff = 0
	}
	Entry{KeyHash: keyHash, PhyOffset: phyOffset, TimeDiff: int32(diff), PrevIndex: prev}.Put(f.data[at:])

	if n <= 1 {
		f.setInt64(&f.beginPhy, offBeginPhyOffset, phyOffset)
		f.setInt64(&f.beginTS, offBeginTimestamp, storeTimestamp)
	}
	if prev == 0 {
		f.putInt32(offHashSlotCount, f.slotCount.Add(1))
	}
	f.setInt64(&f.endPhy, offEndPhyOffset, phyOffset)
	f.setInt64(&f.endTS, offEndTimestamp, storeTimestamp)
	f.putInt32(offIndexCount, n+1)
	// Publish the entry, then link it: a reader that sees the slot finds it counted.
	f.count.Store(n + 1)
	f.storeSlot(slotAt, n)
	f.dirty = true
	return nil
}

// Flush makes the header, the slot table and the entries written so far durable. Only pages
// dirtied since the last flush cost I/O. It returns ErrClosed after Close.
func (f *File) Flush() error {
	f.wmu.Lock()
	defer f.wmu.Unlock()
	if f.closed {
		return ErrClosed
	}
	if !f.dirty || f.seg == nil {
		return nil
	}
	// The header and slots are rewritten in place, so the range always starts at 0; this is why
	// segment.File.Flush, which syncs only past what it flushed before, is not used.
	if err := f.seg.Sync(0, f.geo.EntryOffset(f.count.Load())); err != nil {
		return fmt.Errorf("indexfile: flush %s: %w", f.name, err)
	}
	f.dirty = false
	return nil
}

// Close drops the owner's reference: the file is unmapped once the last reader releases. It
// does not flush. Closing twice is a no-op.
func (f *File) Close() error {
	f.wmu.Lock()
	if f.closed {
		f.wmu.Unlock()
		return nil
	}
	f.closed = true
	f.wmu.Unlock()
	if f.sf == nil {
		return nil
	}
	return f.sf.Release()
}

// Acquire takes a reader's reference so that the file stays mapped across several calls (the
// read methods take their own for each call). It fails once the file is unmapped.
func (f *File) Acquire() bool { return f.sf == nil || f.sf.Acquire() }

// Release drops a reference taken by Acquire; the last one unmaps a closed file.
func (f *File) Release() error {
	if f.sf == nil {
		return nil
	}
	return f.sf.Release()
}

// setInt64 updates a header field in memory and writes it through to the mapping.
// REQUIRES: wmu held (or the file not yet shared).
func (f *File) setInt64(a *atomic.Int64, off int, v int64) {
	a.Store(v)
	binary.BigEndian.PutUint64(f.data[off:], uint64(v))
}

// REQUIRES: wmu held (or the file not yet shared).
func (f *File) putInt32(off int, v int32) {
	binary.BigEndian.PutUint32(f.data[off:], uint32(v))
}

// loadSlot reads the big-endian slot at byte offset at with an atomic load, so that it pairs
// with the writer's storeSlot. Callers pass a slot offset of the geometry, so all four bytes lie
// before the entry area. (No "_ = data[at+3]" bounds hint: under -race that is a plain read.)
func (f *File) loadSlot(at int64) int32 {
	v := atomic.LoadUint32((*uint32)(unsafe.Pointer(&f.data[at])))
	var b [4]byte
	binary.NativeEndian.PutUint32(b[:], v)
	return int32(binary.BigEndian.Uint32(b[:]))
}

// storeSlot writes the big-endian slot at byte offset at with an atomic store.
func (f *File) storeSlot(at int64, v int32) {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], uint32(v))
	atomic.StoreUint32((*uint32)(unsafe.Pointer(&f.data[at])), binary.NativeEndian.Uint32(b[:]))
}
