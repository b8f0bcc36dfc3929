package indexfile

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path"
	"slices"

	"github.com/rocketstore/engine/internal/vfs"
)

// Reading a file's geometry from the file. The header does not record it (maxHashSlotNum and
// maxIndexNum are configuration) and the size fixes only 4*Slots + 20*Entries, so the content
// tells: what RocketMQ's putKey leaves behind holds for the right geometry only.
//
//   - The slot table holds entry numbers, all below Entries; the first word past it that is
//     larger bounds the slot count from above (entry 1's key hash, most often).
//   - Entry 0 is never written: 20 zero bytes right after the slot table.
//   - Entry 1 is the file's first key: its physical offset is the header's BeginPhyOffset and
//     it links to no older entry.
//   - The newest entry, IndexCount-1, is the header's EndPhyOffset.
//   - Entries come in CommitLog order, each links to an older one only, and the slot of each
//     holds it or a newer entry of the same slot.
//
// A geometry that passes these checks on the entries at both ends of the file fits it. On a file
// being written the checks may catch a put half done; the caller looks again.

// fitSample is how many entries at each end of a file Fits checks.
const fitSample = 32

// ErrNotIndexFile is the error for bytes that no geometry explains as an index file.
var ErrNotIndexFile = errors.New("indexfile: not an index file of any geometry")

// Keys is how many keys an index file image holds, from its header (0 for a count below 2).
func Keys(data []byte) int32 {
	h, err := DecodeHeader(data)
	if err != nil || h.IndexCount < 2 {
		return 0
	}
	return h.IndexCount - 1
}

// Fits reports whether the image data, an index file that holds at least one key, can have
// been written with geometry g (see the checks above). A file without keys fits every
// geometry of its size.
func (g Geometry) Fits(data []byte) bool {
	if g.Validate() != nil || int64(len(data)) != g.FileSize() {
		return false
	}
	h, _ := DecodeHeader(data)
	n := h.IndexCount
	if n < 2 {
		return true
	}
	if n > g.Entries {
		return false
	}
	entry := func(i int32) Entry {
		at := g.EntryOffset(i)
		return decodeEntry(data[at : at+EntrySize])
	}
	slot := func(i int32) int32 {
		at := g.SlotOffset(i)
		return int32(binary.BigEndian.Uint32(data[at:]))
	}
	if entry(0) != (Entry{}) {
		return false
	}
	if e := entry(1); e.PhyOffset != h.BeginPhyOffset || e.PrevIndex != 0 {
		return false
	}
	if entry(n-1).PhyOffset != h.EndPhyOffset {
		return false
	}
	ok := func(i int32, prev Entry, first bool) bool {
		e := entry(i)
		return e.KeyHash >= 0 && e.TimeDiff >= 0 && e.PrevIndex >= 0 && e.PrevIndex < i &&
			e.PhyOffset >= h.BeginPhyOffset && e.PhyOffset <= h.EndPhyOffset &&
			(first || e.PhyOffset >= prev.PhyOffset) && slot(e.KeyHash%g.Slots) >= i
	}
	head := min(n-1, fitSample)
	for i := int32(1); i <= head; i++ {
		if !ok(i, entry(i-1), i == 1) {
			return false
		}
	}
	for i := max(head+1, n-fitSample); i < n; i++ {
		if !ok(i, entry(i-1), false) {
			return false
		}
	}
	return true
}

// FittingGeometries lists the geometries that fit the index file image data, most slots first;
// nil when the file holds no key (then every geometry of its size reads it alike: it finds
// nothing). A file of keys that no geometry fits is ErrNotIndexFile.
func FittingGeometries(data []byte) ([]Geometry, error) {
	size := int64(len(data))
	if size < HeaderSize+SlotSize+2*EntrySize || size > math.MaxInt32 || (size-HeaderSize)%SlotSize != 0 {
		return nil, fmt.Errorf("%w: %d bytes", ErrNotIndexFile, size)
	}
	n := Keys(data) + 1
	if n < 2 {
		return nil, nil
	}
	maxEntries := (size - HeaderSize) / EntrySize
	if int64(n) > maxEntries {
		return nil, fmt.Errorf("%w: %d keys in %d bytes", ErrNotIndexFile, n-1, size)
	}
	// The first word above any entry number lies past the slot table and entry 0.
	top := size
	for at := int64(HeaderSize); at+SlotSize <= size; at += SlotSize {
		if int64(binary.BigEndian.Uint32(data[at:])) >= maxEntries {
			top = at
			break
		}
	}
	hi := min((top-HeaderSize-EntrySize)/SlotSize, (size-HeaderSize-int64(n)*EntrySize)/SlotSize)
	// 4*Slots + 20*Entries = size - 40: the slot counts that leave whole entries are one class
	// mod 5.
	class := ((size - HeaderSize) / SlotSize) % 5
	var out []Geometry
	for s := hi - ((hi-class)%5+5)%5; s >= 1; s -= 5 {
		g := Geometry{Slots: int32(s), Entries: int32((size - HeaderSize - s*SlotSize) / EntrySize)}
		if g.Fits(data) {
			out = append(out, g)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: no slot count fits its %d keys", ErrNotIndexFile, n-1)
	}
	return out, nil
}

// GeometryOfSize is a geometry whose files are size bytes, for files that hold no key (every
// such geometry reads them alike): RocketMQ's ratio of four entries a slot when it fits, else
// the one with the most entries.
func GeometryOfSize(size int64) (Geometry, error) {
	if size < HeaderSize+SlotSize+2*EntrySize || size > math.MaxInt32 || (size-HeaderSize)%SlotSize != 0 {
		return Geometry{}, fmt.Errorf("%w: %d bytes", ErrNotIndexFile, size)
	}
	room := size - HeaderSize
	if room%(SlotSize+4*EntrySize) == 0 {
		s := room / (SlotSize + 4*EntrySize)
		return Geometry{Slots: int32(s), Entries: int32(4 * s)}, nil
	}
	for s := int64(1); s <= 5; s++ {
		if g := (Geometry{Slots: int32(s), Entries: int32((room - s*SlotSize) / EntrySize)}); g.FileSize() == size && g.Validate() == nil {
			return g, nil
		}
	}
	return Geometry{}, fmt.Errorf("%w: %d bytes", ErrNotIndexFile, size)
}

// DirGeometry is what the index files of a directory say about their geometry.
type DirGeometry struct {
	// Size is the size of the files; 0 when the directory holds none (a file of zero length
	// is one being created and is left out).
	Size int64
	// Fitting are the geometries that fit every file looked at (FittingGeometries), most slots
	// first; nil when no file holds a key yet.
	Fitting []Geometry
}

// DetectGeometry reads the geometry of the index files in dir from the files: every file must
// have one size, and the files that hold keys, oldest first, narrow down the geometries that
// fit until one is left. The newest file may be being written: a file that no geometry fits
// is looked at again, a few times, before that is an error.
func DetectGeometry(fsys vfs.FS, dir string) (DirGeometry, error) {
	var out DirGeometry
	ents, err := fsys.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return out, fmt.Errorf("indexfile: %w", err)
	}
	slices.SortFunc(ents, func(a, b vfs.DirEntry) int { return cmp.Compare(a.Name, b.Name) })
	var names []string
	for _, e := range ents {
		if e.IsDir || !IsName(e.Name) {
			continue
		}
		name := path.Join(dir, e.Name)
		st, err := fsys.Stat(name)
		if err != nil {
			return out, fmt.Errorf("indexfile: %w", err)
		}
		if st.Size == 0 {
			continue
		}
		if out.Size != 0 && st.Size != out.Size {
			return out, fmt.Errorf("indexfile: %s is %d bytes, %s %d: the files of a store have one geometry",
				names[0], out.Size, name, st.Size)
		}
		out.Size = st.Size
		names = append(names, name)
	}
	for _, name := range names {
		fitting, err := fileGeometries(fsys, name, out.Size)
		if err != nil {
			return out, err
		}
		if fitting == nil {
			continue
		}
		if out.Fitting == nil {
			out.Fitting = fitting
		} else {
			out.Fitting = slices.DeleteFunc(out.Fitting, func(g Geometry) bool { return !slices.Contains(fitting, g) })
		}
		if len(out.Fitting) == 0 {
			return out, fmt.Errorf("%w: the files of %s fit no geometry in common", ErrNotIndexFile, dir)
		}
		if len(out.Fitting) == 1 {
			break
		}
	}
	return out, nil
}

// detectTries is how often a file is looked at before it fits no geometry.
const detectTries = 3

// fileGeometries maps the file name read-only and lists the geometries that fit it.
func fileGeometries(fsys vfs.FS, name string, size int64) ([]Geometry, error) {
	seg, err := fsys.OpenSegment(name, size, vfs.ReadOnly)
	if err != nil {
		return nil, fmt.Errorf("indexfile: open %s: %w", name, err)
	}
	defer seg.Close()
	for try := 1; ; try++ {
		fitting, err := FittingGeometries(seg.Data())
		if err == nil || try == detectTries {
			if err != nil {
				err = fmt.Errorf("indexfile: %s: %w", name, err)
			}
			return fitting, err
		}
	}
}
