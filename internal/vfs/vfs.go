// Package vfs is the narrow file-system interface the store is written against.
//
// Production code uses OS (real files, fallocate, mmap, msync, fcntl locks); tests use Mem, an
// in-memory implementation that models what a crash keeps (only synced bytes and synced directory
// entries are certain to survive), and Faulty, a wrapper that injects errors or delays into any FS.
//
// The interface is kept to what the store calls. Two kinds of files exist:
//
//   - Segments: fixed-size files mapped into memory once, for the CommitLog, ConsumeQueue and
//     IndexFile. Disk blocks are reserved (fallocate) before any byte is written through the
//     mapping, so a full disk is an error from Reserve and never a SIGBUS on a store.
//   - Plain files: small metadata (checkpoint, abort, config JSON), read whole, written whole
//     or (the checkpoint) rewritten in place.
package vfs

import (
	"errors"
	"io"
	"time"
)

// FS is the file system the store uses. Names are slash-separated paths as the OS takes them.
// Every method is safe for concurrent use.
type FS interface {
	// CreateSegment creates name, which must not exist, with exactly size bytes, reserves disk
	// blocks for its first reserve bytes and maps the whole file read-write. On any error nothing
	// is left behind: no mapping, no file.
	CreateSegment(name string, size, reserve int64) (Segment, error)
	// OpenSegment maps an existing file, which must be exactly size bytes long. Which of its
	// blocks exist is not known, so it reports Reserved 0: a writer calls Reserve for the range
	// it is about to write (cheap where the blocks already exist).
	OpenSegment(name string, size int64, mode Mode) (Segment, error)

	// Create creates or truncates a plain file for writing.
	Create(name string) (File, error)
	// Open opens a plain file for reading.
	Open(name string) (File, error)
	// OpenUpdate opens an existing plain file for reading and for rewriting in place
	// (File.WriteAt): it neither creates nor truncates. Bytes rewritten within the file's length
	// take no new disk blocks on a file system that overwrites in place (ext4, XFS, tmpfs), so
	// that a full disk cannot refuse them: the way to update a small fixed-size file (the
	// checkpoint) on a disk with no byte free.
	OpenUpdate(name string) (File, error)
	// ReadFile returns the whole content of a plain file.
	ReadFile(name string) ([]byte, error)

	Remove(name string) error
	Rename(oldname, newname string) error
	// MkdirAll creates dir and its parents. Directories are durable once created.
	MkdirAll(dir string) error
	// Mkdir creates dir, whose parent must exist. Unlike MkdirAll it does not sync: the new
	// entry is durable once its parent is synced (SyncDir), so that a caller creating many
	// directories can sync each parent once.
	Mkdir(dir string) error
	// ReadDir lists dir, sorted by name.
	ReadDir(dir string) ([]DirEntry, error)
	Stat(name string) (FileInfo, error)
	// SyncDir makes the entries of dir (creations, renames, removals) durable.
	SyncDir(dir string) error
	// OpenSyncer opens a handle on the file system that holds dir, to make everything written to
	// it durable with one call (Syncer.SyncAll) where syncing each file and directory costs a
	// journal commit each.
	OpenSyncer(dir string) (Syncer, error)

	// Lock takes an exclusive lock on name (created if missing) that conflicts with other
	// processes' fcntl locks on byte 0, as RocketMQ's FileChannel.tryLock. If another holder
	// has it, the error wraps ErrLocked and names the holder when it can.
	Lock(name string) (io.Closer, error)
	// DiskUsage reports the space of the file system that holds dir.
	DiskUsage(dir string) (Usage, error)
}

// Syncer makes a whole file system durable at once (syncfs(2)). It stays open so that a write
// back error of any file since it was opened is reported by the next SyncAll, as an fsync of
// that file would have reported it.
type Syncer interface {
	// SyncAll makes durable everything written so far to the file system: file bytes, written
	// through mappings or not, and directory entries, in the whole file system. written names
	// the ranges of mapped segments the caller relies on: the OS makes them durable with the
	// rest; Mem, which cannot copy mappings that other goroutines write into, makes exactly
	// those durable, with every directory entry and unmapped file under the directory the
	// Syncer was opened on.
	SyncAll(written []SegmentRange) error
	Close() error
}

// SegmentRange is the bytes [From, To) of a mapped segment.
type SegmentRange struct {
	Seg      Segment
	From, To int64
}

// Mode says how a segment is mapped.
type Mode int

const (
	ReadWrite Mode = iota
	ReadOnly
)

// Segment is one fixed-size file mapped into memory. Data stays valid until Close; the caller
// guarantees that nobody touches Data after Close (segment.File does this with reference counts).
type Segment interface {
	// Data is the whole mapping, Size bytes. Bytes at or past Reserved must not be written.
	Data() []byte
	Size() int64
	// Reserved is how many bytes from the start have disk blocks reserved.
	Reserved() int64
	// Reserve makes sure blocks exist for [0, upTo). On error (ENOSPC) Reserved is unchanged.
	Reserve(upTo int64) error
	// WriteAt writes p at off through the file (pwrite) rather than the mapping, which sees
	// the bytes at once (it is shared). The page cache takes them without a write fault per
	// page. [off, off+len(p)) must be below Reserved. On error some of p may be written.
	WriteAt(p []byte, off int64) error
	// DoneWriting says WriteAt will not be called again: the descriptor it writes with is
	// closed (a log keeps one open only for the segment it writes). A later WriteAt opens one
	// again.
	DoneWriting() error
	// Sync makes the bytes in [from, to) durable (msync of the pages that cover them).
	Sync(from, to int64) error
	// Prefault takes the page faults for [from, to) now, so that later writes run at memory
	// speed. It may dirty the pages (with the bytes they already hold).
	Prefault(from, to int64) error
	// AdviseRandom tells the kernel that access is random (madvise MADV_RANDOM), so that a
	// fault does not read ahead: the first write into each new ConsumeQueue file would otherwise
	// pull the whole file into the page cache as zeros. Only a hint; errors are ignored.
	AdviseRandom()
	// DropCache says that [from, to), durable already, is not to be read again soon: its whole
	// pages leave the page cache (the mapping's, then the file's), so that a log written for
	// months keeps a bounded cache instead of pushing the kernel to find a fresh page for every
	// page it writes. Only a hint: the bytes stay in the file and the next access reads them
	// back. Errors are for the caller to log, never to stop on.
	DropCache(from, to int64) error
	// Close unmaps the segment. Data must not be used afterwards.
	Close() error
}

// File is a plain file. WriteAt needs a file opened for writing (Create, OpenUpdate).
type File interface {
	io.Reader
	io.Writer
	io.ReaderAt
	io.WriterAt
	Sync() error
	Close() error
}

// DirEntry is one entry of a directory listing.
type DirEntry struct {
	Name  string
	IsDir bool
}

// FileInfo is what Stat returns.
type FileInfo struct {
	Size    int64
	ModTime time.Time
	IsDir   bool
}

// Usage is the space of one file system, in bytes.
type Usage struct {
	Total, Free, Avail uint64
}

// UsedRatio is the used fraction of the file system as df counts it (used / (used + avail)).
func (u Usage) UsedRatio() float64 {
	used := u.Total - u.Free
	if used+u.Avail == 0 {
		return 0
	}
	return float64(used) / float64(used+u.Avail)
}

// ErrLocked is wrapped by Lock's error when another holder has the lock.
var ErrLocked = errors.New("vfs: locked by another holder")

// Extent is the byte range [Off, End) of a file.
type Extent struct{ Off, End int64 }

// DataMapper is implemented by segments whose file system can say where the file may hold
// data (lseek SEEK_DATA and SEEK_HOLE): every byte outside the extents it returns reads as
// zero. It may report zeros as data (a block written with zeros, a page the cache holds), never
// data as a hole, so a reader that must prove a range zero reads only the extents: a segment
// allocated at its full size and written only at its start costs what was written, not its size.
type DataMapper interface {
	// DataExtents returns, in order, the extents at or after from (clipped to [from, Size))
	// that may hold data.
	DataExtents(from int64) ([]Extent, error)
}

// maxExtents bounds the extents DataExtents returns; the rest of the file is one more.
const maxExtents = 1024

// DataExtents returns the extents of seg at or after from that may hold data: what its
// DataMapper says, or all of [from, Size) when seg has none or it fails.
func DataExtents(seg Segment, from int64) []Extent {
	size := seg.Size()
	if from >= size {
		return nil
	}
	from = max(from, 0)
	if m, ok := seg.(DataMapper); ok {
		if ext, err := m.DataExtents(from); err == nil {
			return ext
		}
	}
	return []Extent{{from, size}}
}
