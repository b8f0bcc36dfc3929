package vfs

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math/rand/v2"
	"path"
	"slices"
	"strings"
	"syscall"
)

// This file is Mem's crash model: the calls that move current state to durable state (Sync,
// SyncDir) and the images a power loss could leave.

// crashPageSize is the unit the page cache writes back, so the unit in which unsynced bytes
// reach the disk or not; crashSectorSize is the unit a disk writes atomically at best.
const (
	crashPageSize   = 4096
	crashSectorSize = 512
)

// CrashOptions says what a crash image keeps of what was never synced. The zero value keeps
// synced state exactly, loses every unsynced directory change and picks, page by page, what
// became of unsynced file bytes.
type CrashOptions struct {
	// SyncedOnly loses every unsynced byte and directory change, so the image is a function of
	// the Mem alone and needs no rng: the "everything synced survives" baseline.
	SyncedOnly bool
	// UnsyncedDirChanges lets each directory entry whose current and durable targets differ
	// (a creation, removal or either half of a rename) reach the disk with probability 1/2,
	// each entry on its own. That is harsher than a journaling file system, where a rename is
	// atomic: a rename across directories may leave both names or neither.
	UnsyncedDirChanges bool
	// GarbageProb is the chance that an unsynced page holds garbage instead. Only the bytes of
	// the page that differ from the durable ones are overwritten, so a synced byte never
	// changes: the garbage models a device tearing the write it was doing, not rotting data
	// it had already acknowledged.
	GarbageProb float64
	// Writeback, when above zero, replaces the five fates of an unsynced page by two: written
	// back whole with this probability, else lost whole. That is what the kernel's background
	// writeback leaves when the power goes with no write in flight (Jepsen's LazyFS drops or
	// keeps pages the same way), and it leaves the combinations a tear makes rarer: a record's
	// first page without its second, an index file's slot page without its header page.
	// GarbageProb still applies first.
	Writeback float64
}

// ErrPowerCut is what a sync returns once the power is cut (Mem.CutPowerAt): nothing reaches
// the disk any more.
var ErrPowerCut = errors.New("vfs: the power is cut")

// CutPowerAt makes the k-th sync call of the Mem (counted from 1 over its life, as Syncs
// counts) and every later one fail with ErrPowerCut without making anything durable, as if the
// power went just before it: the durable state stays as the k-1 syncs before left it, while
// writes go on reaching only the current bytes. A crash image taken later is then one the cut
// could leave: what was synced before it, with unsynced changes kept or lost as CrashImage
// decides (a write after the cut is one the page cache took before the power went, and may be
// lost). Cutting just after the k-th sync is cutting before the k+1-th. Zero or less: no cut.
//
// Only calls that have something to sync count: a Segment.Sync of an empty range or of a
// ReadOnly segment changes nothing, and is neither counted nor refused.
func (m *Mem) CutPowerAt(k int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cutAt = max(k, 0)
}

// Syncs is how many sync calls (Segment.Sync, File.Sync, SyncDir, Syncer.SyncAll) the Mem has taken, those a
// power cut refused included: a run's count is the range of its cut points.
func (m *Mem) Syncs() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.syncs
}

// countSync counts one sync call and says whether the power is still on for it.
// REQUIRES: m.mu held.
func (m *Mem) countSync(op, name string) error {
	m.syncs++
	if m.cutAt > 0 && m.syncs >= m.cutAt {
		return memPathErr(op, name, fmt.Errorf("sync %d, the cut came at %d: %w", m.syncs, m.cutAt, ErrPowerCut))
	}
	return nil
}

// SyncDir makes the durable entries of dir equal to its current ones.
func (m *Mem) SyncDir(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, err := m.dir(dir)
	if err != nil {
		return memPathErr("sync", dir, err)
	}
	if err := m.countSync("sync", dir); err != nil {
		return err
	}
	d.durable = maps.Clone(d.files)
	p, _ := memClean(dir)
	for sub := range d.subdirs {
		m.dirs[path.Join(p, sub)].unsynced = false
	}
	return nil
}

// Sync copies exactly [from, to) of the current bytes to the durable ones and stamps the mtime
// (see Mem for why the copy is not widened to pages). A ReadOnly segment syncs nothing.
func (s *memSegment) Sync(from, to int64) error {
	if err := s.lockOpen("msync", from, to); err != nil {
		return err
	}
	m, n := s.m, s.n
	defer m.mu.Unlock()
	if s.mode == ReadOnly || from == to {
		return nil
	}
	if err := m.countSync("msync", s.name); err != nil {
		return err
	}
	if int64(len(n.durable)) < to {
		n.durable = append(n.durable, make([]byte, int(to)-len(n.durable))...)
	}
	copy(n.durable[from:to], s.data[from:to])
	n.durLen = max(n.durLen, int(to))
	n.modTime = m.now()
	return nil
}

// Sync makes the whole current content durable, length included.
func (f *memFile) Sync() error {
	if err := f.lockOpen("sync"); err != nil {
		return err
	}
	defer f.m.mu.Unlock()
	if err := f.m.countSync("sync", f.name); err != nil {
		return err
	}
	f.n.durable = slices.Clone(f.n.data)
	f.n.durLen = len(f.n.data)
	return nil
}

// OpenSyncer returns a Syncer of the tree under dir, which must exist.
func (m *Mem) OpenSyncer(dir string) (Syncer, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, err := m.dir(dir); err != nil {
		return nil, memPathErr("open", dir, err)
	}
	p, _ := memClean(dir)
	return &memSyncer{m: m, dir: p}, nil
}

// memSyncer is Mem's Syncer: what a syncfs(2) makes durable, under dir only (a weaker model
// than the real one, which syncs the whole file system, so that a test relying on it holds
// on a real one too).
type memSyncer struct {
	m   *Mem
	dir string
}

// SyncAll makes durable, as one sync call (Syncs counts it once; after CutPowerAt it makes
// nothing durable): the ranges written, of segments of this Mem; then every directory under dir
// (entries, and directories made by Mkdir) and every file under it that nothing maps (mapped
// ones are written by other goroutines, which Mem cannot copy under: only the ranges the caller
// names are copied, as Segment.Sync does).
func (s *memSyncer) SyncAll(written []SegmentRange) error {
	m := s.m
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range written {
		seg, ok := r.Seg.(*memSegment)
		switch {
		case !ok || seg.m != m:
			return fmt.Errorf("vfs: syncfs %s: a segment of another file system", s.dir)
		case seg.closed:
			return memPathErr("syncfs", seg.name, fs.ErrClosed)
		case r.From < 0 || r.From > r.To || r.To > int64(len(seg.data)):
			return memPathErr("syncfs", seg.name, syscall.EINVAL)
		}
	}
	if err := m.countSync("syncfs", s.dir); err != nil {
		return err
	}
	for _, r := range written {
		seg := r.Seg.(*memSegment)
		if seg.mode == ReadOnly || r.From == r.To {
			continue
		}
		n := seg.n
		if int64(len(n.durable)) < r.To {
			n.durable = append(n.durable, make([]byte, int(r.To)-len(n.durable))...)
		}
		copy(n.durable[r.From:r.To], seg.data[r.From:r.To])
		n.durLen = max(n.durLen, int(r.To))
		n.modTime = m.now()
	}
	if d := m.dirs[s.dir]; d != nil {
		d.unsynced = false
	}
	for p, d := range m.dirs {
		if !memUnder(p, s.dir) {
			continue
		}
		d.durable = maps.Clone(d.files)
		for sub := range d.subdirs {
			m.dirs[path.Join(p, sub)].unsynced = false
		}
		for _, n := range d.files {
			if n.maps == 0 {
				n.durable = slices.Clone(n.data)
				n.durLen = len(n.data)
			}
		}
	}
	return nil
}

func (s *memSyncer) Close() error { return nil }

// memUnder says whether the clean path p is dir or lies under it.
func memUnder(p, dir string) bool {
	switch dir {
	case "/":
		return strings.HasPrefix(p, "/")
	case ".":
		return !strings.HasPrefix(p, "/")
	}
	return p == dir || strings.HasPrefix(p, dir+"/")
}

// SyncedImage is CrashImage with SyncedOnly: what is certain to survive, and nothing more.
func (m *Mem) SyncedImage() *Mem {
	return m.CrashImage(nil, CrashOptions{SyncedOnly: true})
}

// CrashImage returns a new, independent Mem holding what a power loss right now could leave,
// drawn from rng (which may be nil only with SyncedOnly):
//
//   - Directories: every directory (they are durable at once), holding its durable entries; with
//     UnsyncedDirChanges each differing entry may take its current target instead.
//   - Files: the durable bytes, with every 4096-byte page whose current bytes differ from them
//     either lost (durable bytes), kept (current bytes), torn at a random cut (current bytes
//     before it and durable after, or the other way round) or mixed sector by sector, each with
//     probability 1/5, unless GarbageProb turned it to garbage first (with Writeback: kept or
//     lost whole, kept with probability Writeback). A plain file whose length
//     was not synced takes its durable or its current length; bytes past the end of either
//     version count as zeros.
//
// Every byte of the image is therefore the durable or the current byte at its offset (or
// garbage where those two differ), so whatever was synced and not overwritten since is intact.
// Names that point to one node keep pointing to one node. In the image everything is durable,
// nothing is open or locked, and space is counted afresh, so it may start over capacity.
//
// Pages are visited in name order, so one seed gives one image. The original Mem is not
// changed; the caller must have stopped every writer, including writes through Segment.Data.
func (m *Mem) CrashImage(rng *rand.Rand, opts CrashOptions) *Mem {
	if rng == nil && !opts.SyncedOnly {
		panic("vfs: CrashImage needs an rng unless SyncedOnly")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	img := &Mem{now: m.now, capacity: m.capacity, dirs: make(map[string]*memDir, len(m.dirs))}
	clones := make(map[*memNode]*memNode)
	lost := make(map[string]bool)                        // directories Mkdir made that the crash took, with their trees
	for _, p := range slices.Sorted(maps.Keys(m.dirs)) { // a parent sorts before its children
		d := m.dirs[p]
		if lost[path.Dir(p)] || d.unsynced && (opts.SyncedOnly || !opts.UnsyncedDirChanges || rng.IntN(2) == 0) {
			lost[p] = true
			if parent := img.dirs[path.Dir(p)]; parent != nil {
				delete(parent.subdirs, path.Base(p))
			}
			continue
		}
		nd := newMemDir(d.modTime)
		maps.Copy(nd.subdirs, d.subdirs)
		img.dirs[p] = nd
		names := append(slices.Collect(maps.Keys(d.files)), slices.Collect(maps.Keys(d.durable))...)
		slices.Sort(names)
		names = slices.Compact(names)
		for _, name := range names {
			n := d.durable[name]
			if cur := d.files[name]; cur != n && opts.UnsyncedDirChanges && !opts.SyncedOnly && rng.IntN(2) == 0 {
				n = cur
			}
			if n == nil || d.subdirs[name] {
				continue // a directory made since won: directories are durable at once
			}
			c := clones[n]
			if c == nil {
				c = crashNode(n, rng, opts)
				clones[n] = c
			}
			nd.files[name], nd.durable[name] = c, c
			c.links++
		}
	}
	for _, c := range clones {
		img.recharge(c)
	}
	return img
}

// crashNode builds the node a crash leaves of n. REQUIRES: the Mem's lock held.
func crashNode(n *memNode, rng *rand.Rand, opts CrashOptions) *memNode {
	size := n.durLen
	if len(n.data) != n.durLen && !opts.SyncedOnly && rng.IntN(2) == 0 {
		size = len(n.data)
	}
	out := make([]byte, size)
	copy(out, n.durable)
	if !opts.SyncedOnly {
		var scratch [crashPageSize]byte
		for off := 0; off < size; off += crashPageSize {
			end := min(off+crashPageSize, size)
			var cur []byte
			if end <= len(n.data) {
				cur = n.data[off:end]
			} else {
				// Past its current length the file reads as zeros.
				cur = scratch[:end-off]
				clear(cur)
				copy(cur, n.data[min(off, len(n.data)):])
			}
			if !bytes.Equal(out[off:end], cur) {
				crashPage(out[off:end], cur, rng, opts)
			}
		}
	}
	return &memNode{
		data:     out,
		durable:  slices.Clone(out),
		durLen:   size,
		modTime:  n.modTime,
		sparse:   n.sparse,
		reserved: n.reserved,
	}
}

// crashPage turns dst, which holds the durable bytes of one page, into what a crash left of it,
// given the current bytes cur of the same page.
func crashPage(dst, cur []byte, rng *rand.Rand, opts CrashOptions) {
	if opts.GarbageProb > 0 && rng.Float64() < opts.GarbageProb {
		for i := range dst {
			if dst[i] != cur[i] {
				dst[i] = byte(rng.Uint32())
			}
		}
		return
	}
	if opts.Writeback > 0 {
		if rng.Float64() < opts.Writeback {
			copy(dst, cur)
		}
		return
	}
	switch rng.IntN(5) {
	case 0: // lost: the page never left the cache
	case 1: // kept: written back whole
		copy(dst, cur)
	case 2: // torn while writing front to back
		cut := rng.IntN(len(dst) + 1)
		copy(dst[:cut], cur[:cut])
	case 3: // torn while writing back to front
		cut := rng.IntN(len(dst) + 1)
		copy(dst[cut:], cur[cut:])
	case 4: // sectors reached the platter in no particular order
		for s := 0; s < len(dst); s += crashSectorSize {
			if rng.IntN(2) == 0 {
				e := min(s+crashSectorSize, len(dst))
				copy(dst[s:e], cur[s:e])
			}
		}
	}
}
