package indexfile

import (
	"path"
	"slices"
)

// A paged walk of one key's entries, for searches that have no cap (the console's key search):
// Query returns at most MaxQueryNum offsets, the newest, and cannot go further back when more
// than that many entries of the key share one second (a later Query with an earlier end time
// finds the same ones again). WalkKey instead resumes where the last page stopped, at an entry
// of a file, so that every entry of the key in range is reached, page after page, and new keys
// indexed meanwhile (always newer, ahead of the walk) never shift a page.

// KeyCursor is where a paged walk of one key's entries stands: the index file, by its base
// name, and the entry of its chain to read next there (0: the file's newest, from its slot).
// The zero value starts at the newest file.
type KeyCursor struct {
	File  string
	Entry int32
}

// KeyWalk is one page of a walk.
type KeyWalk struct {
	// PhyOffsets are the CommitLog offsets of the entries whose hash is the key's and whose time
	// is in range, newest first. As with Query, another key with the same hash may be among them.
	PhyOffsets []int64
	// Next is where the next page starts; Done says there is nothing further back in range.
	Next KeyCursor
	Done bool
	// Steps is how many entries the page read.
	Steps int
}

// WalkKey reads the entries of topic#key's chain in [begin, end] (ms, end <= 0: no bound) from
// from on, newest first, file after file, and returns the offsets found, at most maxNum, after
// reading at most maxSteps entries (a chain that other keys share can be long: a page is bounded
// in work, not only in results; it may then hold fewer than maxNum, or none, with Done false).
//
// The walk per file is SelectPhyOffsets's, with its guards: a chain ends at a negative time, at
// an entry number outside the file, at a link back to itself or past the count, at a time before
// begin, and after count+1 steps. A cursor whose file retention deleted resumes in the next older
// file still there; there is none when the deleted one was the oldest: the walk is done.
func (s *Service) WalkKey(dst []int64, topic, key string, begin, end int64, from KeyCursor, maxNum, maxSteps int) KeyWalk {
	out := KeyWalk{PhyOffsets: dst[:0]}
	if end <= 0 {
		end = 1<<63 - 1
	}
	maxNum, maxSteps = max(maxNum, 1), max(maxSteps, 1)
	hash := KeyHash(topic, key)
	s.mu.RLock()
	files := s.files // immutable below its length (see Query)
	s.mu.RUnlock()
	i := len(files) - 1
	if from.File != "" {
		// The file named, or the newest one older than it.
		i = -1
		for j := len(files) - 1; j >= 0; j-- {
			if name := path.Base(files[j].Name()); name <= from.File {
				i = j
				if name != from.File {
					from.Entry = 0
				}
				break
			}
		}
	}
	steps := 0
	for ; i >= 0; i-- {
		f := files[i]
		h := f.Header()
		if h.TimeMatched(begin, end) {
			next, more := f.walkChain(&out.PhyOffsets, hash, from.Entry, begin, end, maxNum, maxSteps, &steps)
			if more {
				out.Next, out.Steps = KeyCursor{File: path.Base(f.Name()), Entry: next}, steps
				return out
			}
		}
		from.Entry = 0
		if h.BeginTimestamp < begin {
			break // older files hold older entries still
		}
		if len(out.PhyOffsets) >= maxNum || steps >= maxSteps {
			if i > 0 {
				out.Next, out.Steps = KeyCursor{File: path.Base(files[i-1].Name())}, steps
				return out
			}
			break
		}
	}
	out.Done, out.Steps = true, steps
	return out
}

// walkChain walks keyHash's chain in f from entry start (0: its slot), appending matches to dst
// until maxNum of them or maxSteps steps (counted in steps, shared across files). more says the
// chain goes on at entry next.
func (f *File) walkChain(dst *[]int64, keyHash int32, start int32, begin, end int64, maxNum, maxSteps int, steps *int) (next int32, more bool) {
	if keyHash < 0 || !f.Acquire() {
		return 0, false // a negative hash has no slot; a file being deleted has nothing
	}
	defer f.Release()
	n := f.count.Load()
	cur := start
	if cur == 0 {
		cur = f.loadSlot(f.geo.SlotOffset(keyHash % f.geo.Slots))
	}
	if cur <= 0 || cur > n || n <= 1 {
		return 0, false
	}
	base := f.beginTS.Load()
	for own := int32(0); own <= n; own++ {
		if len(*dst) >= maxNum || *steps >= maxSteps {
			return cur, true
		}
		e, ok := f.chainEntry(cur, n)
		if !ok || e.TimeDiff < 0 {
			return 0, false
		}
		*steps++
		t := base + int64(e.TimeDiff)*1000
		if e.KeyHash == keyHash && t >= begin && t <= end && !slices.Contains(*dst, e.PhyOffset) {
			*dst = append(*dst, e.PhyOffset)
		}
		if e.PrevIndex <= 0 || e.PrevIndex > n || e.PrevIndex == cur || t < begin {
			return 0, false
		}
		cur = e.PrevIndex
	}
	return 0, false
}
