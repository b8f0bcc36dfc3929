package verify

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/internal/store/derive"
	"github.com/rocketstore/engine/internal/store/indexfile"
	"github.com/rocketstore/engine/internal/vfs"
)

// indexCheck is what was found about one IndexFile.
type indexCheck struct {
	name    string
	entries int64
	// firstPhy and lastPhy are the offsets of the first and last entry (-1 without entries).
	firstPhy, lastPhy int64
	pastEnd           int64 // entries past the log's end
	endPhy            int64 // the header's endPhyOffset as the index service loads it (-1: unreadable)
	// tail are the key hashes of the last entries, those naming lastPhy; onlyTail says every
	// entry of the file names lastPhy (a roll in the middle of a record's keys).
	tail     []int32
	onlyTail bool
	bad      int64 // every other problem: the file must be built anew
}

func (x *indexCheck) broken() bool { return x.bad > 0 }

// listIndex lists the IndexFiles by name (their creation order), leaving out zero-length
// files, which the engine deletes on open.
func (v *verifier) listIndex() ([]string, error) {
	dir := path.Join(v.opts.Dir, "index")
	ents, err := v.opts.FS.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range ents {
		if e.IsDir || !indexfile.IsName(e.Name) {
			continue
		}
		name := path.Join(dir, e.Name)
		st, err := v.opts.FS.Stat(name)
		if err != nil {
			return nil, err
		}
		if st.Size == 0 {
			continue
		}
		names = append(names, name)
	}
	return names, nil // ReadDir sorts by name
}

// indexChunk is how many entries one worker checks at a time: a file is checked by several
// workers at once, since a store has few IndexFiles (20 million entries each by default).
const indexChunk = 1 << 16

// indexFile is the state of one IndexFile while it is checked by several workers.
type indexFile struct {
	x     *indexCheck
	f     *indexfile.File // nil when it cannot be read
	slots []byte          // the slot table, from a mapping of the file's own (seg)
	seg   vfs.Segment
	raw   indexfile.Header
	count int32 // the entry count as loaded: raw, clamped to [1, Entries]
	// reached has a bit per entry, set when its slot or a newer entry leads to it (atomically:
	// chunks of one file run in parallel).
	reached []uint64
	starts  atomic.Int32 // entries that start a chain (prevIndex 0)
	entries atomic.Int64
	bad     atomic.Int64
	mu      sync.Mutex
	pastEnd int64
	first   int32 // the first entry past the end
}

func (ix *indexFile) problem(v *verifier, kind Kind, off int64, format string, args ...any) {
	ix.bad.Add(1)
	v.problems.add(Problem{Kind: kind, File: v.rel(ix.x.name), Offset: off, Desc: fmt.Sprintf(format, args...)})
}

func (ix *indexFile) close() {
	if ix.f != nil {
		ix.f.Close()
		ix.seg.Close()
		ix.f, ix.seg, ix.slots = nil, nil, nil
	}
}

// reach marks entry no as led to and says whether it was the first time.
func (ix *indexFile) reach(no int32) bool {
	b := uint64(1) << (no % 64)
	return atomic.OrUint64(&ix.reached[no/64], b)&b == 0
}

// checkIndex checks every IndexFile, chunks of entries in parallel, then their order.
func (v *verifier) checkIndex(ctx context.Context, names []string, c *chain) []*indexCheck {
	g := v.opts.geometry()
	files := make([]*indexFile, len(names))
	type chunk struct {
		ix     *indexFile
		lo, hi int32
	}
	var chunks []chunk
	var total int64
	for i, name := range names {
		ix := v.openIndexFile(name)
		files[i] = ix
		if ix.f == nil {
			continue
		}
		for lo := int32(1); lo < ix.count; lo += min(indexChunk, ix.count-lo) {
			chunks = append(chunks, chunk{ix, lo, lo + min(indexChunk, ix.count-lo)})
		}
		total += int64(ix.count-1) * indexfile.EntrySize
	}
	m := newMeter(v.opts.Progress, PhaseIndex, total)
	parallel(ctx, v.opts.Workers, len(chunks), func(i int) {
		k := chunks[i]
		v.checkEntries(k.ix, k.lo, k.hi, c)
		m.report(int64(k.hi-k.lo) * indexfile.EntrySize)
	})
	parallel(ctx, v.opts.Workers, len(files), func(i int) { v.finishIndexFile(files[i], c) })
	m.finish()
	for _, ix := range files {
		ix.close() // those not finished: ctx is done
	}
	out := make([]*indexCheck, len(files))
	for i, ix := range files {
		out[i] = ix.x
	}
	for i := 1; i < len(out); i++ {
		a, b := out[i-1], out[i]
		if a.lastPhy < 0 || b.firstPhy < 0 || b.firstPhy >= a.lastPhy {
			continue
		}
		b.bad++
		v.problems.add(Problem{Kind: KindIndexEntry, File: v.rel(b.name), Offset: g.EntryOffset(1),
			Desc: fmt.Sprintf("the first entry names %d, before the last entry of %s at %d: entries are not in CommitLog order",
				b.firstPhy, path.Base(a.name), a.lastPhy)})
	}
	return out
}

// parallel runs fn(0) .. fn(n-1) on up to workers goroutines, until ctx is done.
func parallel(ctx context.Context, workers, n int, fn func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				fn(i)
			}
		})
	}
	wg.Wait()
}

// openIndexFile opens one IndexFile read-only and reads its header as it is on disk.
func (v *verifier) openIndexFile(name string) *indexFile {
	ix := &indexFile{x: &indexCheck{name: name, firstPhy: -1, lastPhy: -1, endPhy: -1}}
	g := v.opts.geometry()
	f, err := indexfile.OpenFile(v.ro, name, g, 0, vfs.ReadOnly)
	if err != nil {
		ix.problem(v, KindIndexFile, 0, "cannot be opened with %d slots and %d entries: %v", g.Slots, g.Entries, err)
		return ix
	}
	raw, err := readHeader(v.ro, name)
	if err != nil {
		f.Close()
		ix.problem(v, KindIndexFile, 0, "header: %v", err)
		return ix
	}
	if raw.IndexCount < 0 || raw.IndexCount > g.Entries {
		ix.problem(v, KindIndexHeader, 36, "indexCount %d is outside [0, %d]", raw.IndexCount, g.Entries)
	}
	// The slot table is read straight from a mapping: millions of slots, one call each
	// through the File would cost more than all the entries.
	seg, err := v.ro.OpenSegment(name, g.FileSize(), vfs.ReadOnly)
	if err != nil {
		f.Close()
		ix.problem(v, KindIndexFile, 0, "cannot be mapped: %v", err)
		return ix
	}
	ix.f, ix.seg, ix.raw, ix.count = f, seg, raw, f.Header().IndexCount
	ix.x.endPhy = f.EndPhyOffset()
	ix.slots = seg.Data()[g.SlotOffset(0):g.EntryOffset(0)]
	ix.reached = make([]uint64, (int64(ix.count)+63)/64)
	return ix
}

// checkEntries checks entries [lo, hi) of a file: each links to an older entry of its own
// slot, which nothing else links to, and names a record of the valid log with a key of its
// hash; entries are in CommitLog order.
func (v *verifier) checkEntries(ix *indexFile, lo, hi int32, c *chain) {
	g := v.opts.geometry()
	f, slots := ix.f, g.Slots
	prevPhy := int64(-1)
	if lo > 1 {
		e, _ := f.Entry(lo - 1)
		prevPhy = e.PhyOffset
	}
	// The entries of one record come one after another: its record is read and its key
	// hashes computed once for all of them.
	last := entryRecord{phy: -1}
	problem := func(kind Kind, off int64, format string, args ...any) { ix.problem(v, kind, off, format, args...) }
	for no := lo; no < hi; no++ {
		e, ok := f.Entry(no)
		if !ok {
			return
		}
		at := g.EntryOffset(no)
		ix.entries.Add(1)
		switch p := e.PrevIndex; {
		case e.KeyHash < 0:
			problem(KindIndexEntry, at, "entry %d: negative key hash %d", no, e.KeyHash)
		case p < 0 || p >= no:
			problem(KindIndexChain, at, "entry %d: prevIndex %d is not below the entry's number", no, p)
		case p == 0:
			ix.starts.Add(1)
		default:
			pe, _ := f.Entry(p)
			if pe.KeyHash < 0 || pe.KeyHash%slots != e.KeyHash%slots {
				problem(KindIndexChain, at, "entry %d (slot %d) links to entry %d of slot %d", no, e.KeyHash%slots, p, pe.KeyHash%slots)
			} else if !ix.reach(p) {
				problem(KindIndexChain, at, "entry %d links to entry %d, which another entry links to already: the chain forks", no, p)
			}
		}
		if e.TimeDiff < 0 {
			problem(KindIndexEntry, at, "entry %d: negative timeDiff %d", no, e.TimeDiff)
		}
		phy := e.PhyOffset
		if phy < prevPhy {
			problem(KindIndexEntry, at, "entry %d names %d, before entry %d at %d: entries are not in CommitLog order", no, phy, no-1, prevPhy)
		}
		prevPhy = max(prevPhy, phy)
		switch {
		case phy < 0:
			problem(KindIndexEntry, at, "entry %d: negative offset %d", no, phy)
		case phy < c.start:
			v.expired.Add(1) // retention removed its record
		case phy >= c.end:
			ix.mu.Lock()
			if ix.pastEnd == 0 || no < ix.first {
				ix.first = no
			}
			ix.pastEnd++
			ix.mu.Unlock()
		default:
			if phy != last.phy {
				last = v.entryRecord(phy, last.hashes[:0])
			}
			last.check(no, e, at, ix.raw.BeginTimestamp, problem)
		}
	}
}

// finishIndexFile checks what needs every entry seen: the slots, that every entry is on a
// chain, the header; and closes the file.
func (v *verifier) finishIndexFile(ix *indexFile, c *chain) {
	x := ix.x
	defer func() { x.bad += ix.bad.Load() }()
	if ix.f == nil {
		return
	}
	defer ix.close()
	g := v.opts.geometry()
	f, count, slots, raw := ix.f, ix.count, g.Slots, ix.raw
	problem := func(kind Kind, off int64, format string, args ...any) { ix.problem(v, kind, off, format, args...) }
	x.entries, x.pastEnd = ix.entries.Load(), ix.pastEnd
	if count > 1 {
		e1, _ := f.Entry(1)
		en, _ := f.Entry(count - 1)
		x.firstPhy, x.lastPhy = e1.PhyOffset, en.PhyOffset
		for no := count - 1; no >= 1; no-- {
			e, _ := f.Entry(no)
			if e.PhyOffset != x.lastPhy {
				break
			}
			x.tail = append(x.tail, e.KeyHash)
		}
		x.onlyTail = x.firstPhy == x.lastPhy
	}
	if ix.pastEnd > 0 {
		e, _ := f.Entry(ix.first)
		v.problems.add(Problem{Kind: KindIndexPastEnd, File: v.rel(x.name), Offset: g.EntryOffset(ix.first),
			Desc: fmt.Sprintf("%d entries from entry %d (naming %d) on point past the end of the valid CommitLog at %d",
				ix.pastEnd, ix.first, e.PhyOffset, c.end)})
	}
	// Slots: each names an entry of its own slot, which nothing else links to.
	var used int32
	for s := int32(0); s < slots; s++ {
		head := int32(binary.BigEndian.Uint32(ix.slots[s*indexfile.SlotSize:]))
		if head == 0 {
			continue
		}
		used++
		at := g.SlotOffset(s)
		if head < 0 || head >= count {
			problem(KindIndexChain, at, "slot %d holds entry %d, outside the entries [1, %d)", s, head, count)
			continue
		}
		e, _ := f.Entry(head)
		switch {
		case e.KeyHash < 0 || e.KeyHash%slots != s:
			problem(KindIndexChain, at, "slot %d holds entry %d, whose key hash belongs to slot %d", s, head, e.KeyHash%slots)
		case !ix.reach(head):
			problem(KindIndexChain, at, "slot %d holds entry %d, which a newer entry links to: it is not the newest of its chain", s, head)
		}
	}
	for no := int32(1); no < count; no++ {
		if ix.reached[no/64]&(uint64(1)<<(no%64)) == 0 {
			e, _ := f.Entry(no)
			problem(KindIndexChain, g.EntryOffset(no), "entry %d (slot %d) is on no chain: neither its slot nor a newer entry leads to it",
				no, max(e.KeyHash, 0)%slots)
		}
	}
	// Header: RocketMQ counts a slot when a put finds it empty, so hashSlotCount is the number
	// of chains; begin and end are the first and last entry's.
	starts := ix.starts.Load()
	if count > 1 {
		if raw.HashSlotCount != starts || used != starts {
			problem(KindIndexHeader, 32, "hashSlotCount %d, but %d chains start and %d slots are used", raw.HashSlotCount, starts, used)
		}
		if raw.BeginPhyOffset != x.firstPhy {
			problem(KindIndexHeader, 16, "beginPhyOffset %d, but the first entry names %d", raw.BeginPhyOffset, x.firstPhy)
		}
		if raw.EndPhyOffset != x.lastPhy {
			problem(KindIndexHeader, 24, "endPhyOffset %d, but the last entry names %d", raw.EndPhyOffset, x.lastPhy)
		}
		if raw.BeginTimestamp > raw.EndTimestamp {
			problem(KindIndexHeader, 0, "beginTimestamp %d after endTimestamp %d", raw.BeginTimestamp, raw.EndTimestamp)
		}
		// The timestamps are those of the first and last record indexed.
		for _, h := range []struct {
			name string
			off  int64
			phy  int64
			ts   int64
		}{{"beginTimestamp", 0, x.firstPhy, raw.BeginTimestamp}, {"endTimestamp", 8, x.lastPhy, raw.EndTimestamp}} {
			if h.phy < c.start || h.phy >= c.end {
				continue
			}
			if r := v.entryRecord(h.phy, nil); r.why == "" && r.ts != h.ts {
				problem(KindIndexHeader, h.off, "%s %d, but the record at %d was stored at %d", h.name, h.ts, h.phy, r.ts)
			}
		}
	} else if used > 0 {
		problem(KindIndexHeader, 36, "no entries, but %d slots are used", used)
	}
}

// entryRecord is what an index entry is checked against: the record at phy, or why there is
// none, and the index hashes of its keys.
type entryRecord struct {
	phy    int64
	why    string // not a record that may be indexed, and why
	ts     int64  // its store timestamp
	hashes []int32
}

// entryRecord reads the record at phy for the entries that name it.
func (v *verifier) entryRecord(phy int64, hashes []int32) entryRecord {
	r := entryRecord{phy: phy, hashes: hashes}
	rec, release, err := v.log.Read(phy)
	if err != nil {
		r.why = "there is no record: " + reasonText(err)
		return r
	}
	defer release()
	r.ts = rec.StoreTimestamp()
	switch {
	case rec.PhysicalOffset() != phy:
		r.why = "no record starts there"
	case !derive.Indexed(rec.TransactionType()):
		r.why = "the record is a rolled-back transaction message, which is never indexed"
	default:
		r.hashes = recordKeyHashes(r.hashes, rec)
	}
	return r
}

// check checks that entry no names a record of the valid log with a key whose index hash is
// the entry's (topic#UNIQ_KEY or topic#key for a key of KEYS), and for every entry but the
// first, whose time was measured against the previous file's end, that its timeDiff is the
// record's store time less the file's beginTimestamp, in seconds.
func (r *entryRecord) check(no int32, e indexfile.Entry, at, begin int64, problem func(Kind, int64, string, ...any)) {
	if r.why != "" {
		problem(KindIndexEntry, at, "entry %d names %d: %s", no, e.PhyOffset, r.why)
		return
	}
	if want := timeDiff(r.ts, begin); no > 1 && e.TimeDiff != want {
		problem(KindIndexEntry, at, "entry %d: timeDiff %d, but the store time of the record at %d makes it %d",
			no, e.TimeDiff, e.PhyOffset, want)
	}
	for _, h := range r.hashes {
		if h == e.KeyHash {
			return
		}
	}
	problem(KindIndexEntry, at, "entry %d names the record at %d, but its key hash %d is that of none of the record's %d keys (topic#UNIQ_KEY, topic#KEYS)",
		no, e.PhyOffset, e.KeyHash, len(r.hashes))
}

// timeDiff is IndexFile.putKey's timeDiff of a message stored at ts in a file that begins at
// begin: whole seconds, 0 without a begin or before it, at most MaxInt32.
func timeDiff(ts, begin int64) int32 {
	if begin <= 0 {
		return 0
	}
	d := (ts - begin) / 1000
	return int32(min(max(d, 0), math.MaxInt32))
}

// recordKeyHashes appends the index hashes of the keys dispatch puts for rec.
func recordKeyHashes(dst []int32, rec commitlog.View) []int32 {
	p := derive.PropsOf(rec)
	return derive.KeyHashes(dst, derive.TopicPrefix(p.Topic), p)
}

// hasKeys says dispatch puts at least one key for rec.
func hasKeys(rec commitlog.View) bool {
	return derive.Indexed(rec.TransactionType()) && derive.NumKeys(derive.PropsOf(rec)) > 0
}

// readHeader reads the 40 header bytes of an IndexFile as they are on disk.
func readHeader(fsys vfs.FS, name string) (indexfile.Header, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return indexfile.Header{}, err
	}
	defer f.Close()
	var b [indexfile.HeaderSize]byte
	if _, err := f.ReadAt(b[:], 0); err != nil {
		return indexfile.Header{}, err
	}
	return indexfile.DecodeHeader(b[:])
}

// checkIndexReach checks that the index reaches the end of the log: the record of its last
// entry must have all its keys indexed (a roll to a new file can split them), and no record
// after it may have keys (those the dispatcher did not index yet). It returns the first record
// not fully indexed, or -1.
func (v *verifier) checkIndexReach(ctx context.Context, files []*indexCheck, c *chain) (int64, error) {
	from, last := c.start, -1
	for i := len(files) - 1; i >= 0; i-- {
		x := files[i]
		if x == nil || x.lastPhy < 0 {
			continue
		}
		if x.lastPhy >= c.end || x.broken() {
			return -1, nil // reported already; repair rebuilds
		}
		if x.lastPhy >= c.start {
			from, last = x.lastPhy, i
		}
		break
	}
	if from >= c.end {
		return -1, nil
	}
	first, n := int64(-1), int64(0)
	where := "there are no index entries; a store written without an index (engine run --no-index) is verified with --no-index"
	if last >= 0 {
		// The keys of the last record indexed, gathered back over the files that hold only it.
		p := files[last].lastPhy
		have := slices.Clone(files[last].tail)
		for i := last; i > 0 && files[i].onlyTail && files[i-1] != nil && files[i-1].lastPhy == p; i-- {
			have = append(have, files[i-1].tail...)
		}
		r := v.entryRecord(p, nil)
		for _, h := range r.hashes {
			if !slices.Contains(have, h) {
				first, n = p, 1
				break
			}
		}
		where = fmt.Sprintf("the index ends at the record at %d", p)
		if n > 0 {
			where = fmt.Sprintf("the index ends in the middle of the keys of the record at %d", p)
		}
	}
	var steps int
	chk := commitlog.Check{NoBodyCRC: true, NoPropCRC: true}
	_, err := v.log.Each(from, c.end, chk, func(phys int64, rec commitlog.View) error {
		if steps++; steps%4096 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		if (last >= 0 && phys == from) || !hasKeys(rec) {
			return nil
		}
		if first < 0 {
			first = phys
		}
		n++
		return nil
	})
	if err != nil {
		return -1, err
	}
	if n > 0 {
		v.problems.add(Problem{Kind: KindIndexMissing, File: v.rel(v.segmentName(first)), Offset: first,
			Desc: fmt.Sprintf("%d records from here on have keys without index entries (%s)", n, where)})
	}
	return first, nil
}
