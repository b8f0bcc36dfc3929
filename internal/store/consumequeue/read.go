package consumequeue

import (
	"errors"
	"fmt"

	"github.com/rocketstore/engine/internal/store/segment"
)

// Unit returns the unit at queue offset n, which must be in [MinOffset, MaxOffset).
func (cq *ConsumeQueue) Unit(n int64) (Unit, error) {
	var one [1]Unit
	if _, err := cq.Read(n, one[:]); err != nil {
		return Unit{}, err
	}
	return one[0], nil
}

// Read copies the units from queue offset from on into dst, as many as fit and exist, and
// returns how many it copied. from must be in [MinOffset, MaxOffset), else the error wraps
// ErrOutOfRange (PullStatus tells which side). Units are decoded straight from the mapping
// while Read holds a reference on their file; a read that crosses into a file that retention
// has just deleted returns what it has. Read allocates nothing.
func (cq *ConsumeQueue) Read(from int64, dst []Unit) (int, error) {
	q, err := cq.use()
	if err != nil {
		return 0, err
	}
	defer cq.mu.RUnlock()
	lo, hi := cq.minLogic.Load(), cq.endOf(q)
	if from < 0 || from > maxQueueOffset(cq.cfg.fileSize) || from*UnitSize < lo || from*UnitSize >= hi {
		return 0, fmt.Errorf("%w: %s: offset %d not in [%d, %d)", ErrOutOfRange, cq, from, lo/UnitSize, hi/UnitSize)
	}
	return readUnits(q, from*UnitSize, hi, dst)
}

// readUnits decodes the units in [off, hi) into dst, file by file, each under a reference.
func readUnits(q *segment.Queue, off, hi int64, dst []Unit) (int, error) {
	n := 0
	for n < len(dst) && off < hi {
		f, err := q.Acquire(off)
		if err != nil {
			if n > 0 {
				return n, nil
			}
			return 0, rangeErr(err)
		}
		data := f.Data()
		limit := min(f.Size(), hi-f.Base())
		start := n
		for pos := off - f.Base(); pos+UnitSize <= limit && n < len(dst); pos += UnitSize {
			dst[n] = DecodeUnit(data[pos : pos+UnitSize])
			n++
			off += UnitSize
		}
		if err := f.Release(); err != nil {
			return n, err
		}
		if n == start {
			break // no whole unit before hi
		}
	}
	return n, nil
}

// unitAt reads the unit at byte offset off, holding a reference on its file.
func unitAt(q *segment.Queue, off int64) (Unit, error) {
	var one [1]Unit
	if _, err := readUnits(q, off, off+UnitSize, one[:]); err != nil {
		return Unit{}, err
	}
	return one[0], nil
}

// fillerAt reads the unit at queue offset n of q, whose units end at byte end, and says whether
// it is a pre-blank unit (Unit.filler), reading the unit after it when that decides.
func fillerAt(q *segment.Queue, n, end int64) (Unit, bool, error) {
	u, err := unitAt(q, n*UnitSize)
	if err != nil {
		return u, false, err
	}
	if u.Phys != 0 || u.blankLike() {
		return u, u.blankLike(), nil
	}
	var next Unit
	if (n+2)*UnitSize <= end {
		if next, err = unitAt(q, (n+1)*UnitSize); err != nil {
			return u, false, err
		}
	}
	return u, u.filler(next), nil
}

// rangeErr turns segment's "no such file" errors into ErrOutOfRange: the offset was below the
// queue's first file (or in a file deleted meanwhile), which is an offset too small.
func rangeErr(err error) error {
	if errors.Is(err, segment.ErrOutOfRange) || errors.Is(err, segment.ErrDeleted) {
		return fmt.Errorf("%w: %w", ErrOutOfRange, err)
	}
	return err
}

// PullStatus classifies a queue offset a consumer asks for, as RocketMQ's getMessage does.
type PullStatus int

const (
	// Found: the offset is in [MinOffset, MaxOffset).
	Found PullStatus = iota
	// NoMessageInQueue: MaxOffset is 0.
	NoMessageInQueue
	// OffsetTooSmall: the offset is below MinOffset.
	OffsetTooSmall
	// OffsetOverflowOne: the offset is MaxOffset, where the next message will be.
	OffsetOverflowOne
	// OffsetOverflowBadly: the offset is past MaxOffset.
	OffsetOverflowBadly
)

var pullStatusNames = [...]string{"FOUND", "NO_MESSAGE_IN_QUEUE", "OFFSET_TOO_SMALL", "OFFSET_OVERFLOW_ONE", "OFFSET_OVERFLOW_BADLY"}

// String is RocketMQ's name of the status (GetMessageStatus).
func (s PullStatus) String() string {
	if s >= 0 && int(s) < len(pullStatusNames) {
		return pullStatusNames[s]
	}
	return fmt.Sprintf("PullStatus(%d)", int(s))
}

// PullStatus classifies offset against the queue's current bounds (STORE-FORMAT §3.3), in
// RocketMQ's order: an empty queue first, then too small, then at or past the end.
func (cq *ConsumeQueue) PullStatus(offset int64) PullStatus {
	maxOff := cq.MaxOffset()
	switch {
	case maxOff == 0:
		return NoMessageInQueue
	case offset < cq.MinOffset():
		return OffsetTooSmall
	case offset == maxOff:
		return OffsetOverflowOne
	case offset > maxOff:
		return OffsetOverflowBadly
	}
	return Found
}

// OffsetByTime returns the first queue offset in [MinOffset, MaxOffset) whose message was
// stored at or after t (milliseconds), RocketMQ's getOffsetInQueueByTime with the LOWER
// boundary. storeTime returns the store timestamp of the record at (phys, size); the read side
// passes one that reads the CommitLog. Boundaries: if every message is older than t the result
// is MaxOffset (where the next message will be); if none is, MinOffset; an empty queue gives
// MaxOffset. Blank units count as older than any t. The search is binary, so it assumes store
// timestamps do not decrease along the queue, as they do not along the CommitLog (they are
// taken under the append lock); should the clock step back, the answer is some offset whose
// predecessor is older than t. An error from storeTime ends the search and is returned.
func (cq *ConsumeQueue) OffsetByTime(t int64, storeTime func(phys int64, size int32) (int64, error)) (int64, error) {
	q, err := cq.use()
	if err != nil {
		return 0, err
	}
	defer cq.mu.RUnlock()
	end := cq.endOf(q)
	lo, hi := max(cq.minLogic.Load(), 0)/UnitSize, end/UnitSize
	for lo < hi {
		mid := lo + (hi-lo)/2
		u, older, err := fillerAt(q, mid, end)
		if err != nil {
			return 0, fmt.Errorf("consumequeue %s: offset %d: %w", cq, mid, err)
		}
		if !older {
			ts, err := storeTime(u.Phys, u.Size)
			if err != nil {
				return 0, fmt.Errorf("consumequeue %s: offset %d: %w", cq, mid, err)
			}
			older = ts < t
		}
		if older {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo, nil
}
