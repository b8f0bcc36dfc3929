package commitlog

import (
	"errors"
	"time"

	"github.com/rocketstore/engine/internal/store/segment"
)

// Segment describes one CommitLog segment for retention.
type Segment struct {
	// Name is the file's path; its base name is Base in 20 digits.
	Name string
	// Base is the offset of the segment's first byte; Size its fixed size.
	Base, Size int64
	// ModTime is the file's modification time: the age RocketMQ's retention goes by, not the
	// timestamps of the records inside.
	ModTime time.Time
}

// End is the offset just past the segment.
func (s Segment) End() int64 { return s.Base + s.Size }

// Segments lists the segments, oldest first, with their modification times.
func (l *Log) Segments() ([]Segment, error) {
	files := l.q.Files()
	out := make([]Segment, 0, len(files))
	for _, f := range files {
		mt, err := l.q.ModTime(f)
		if err != nil {
			return out, err
		}
		out = append(out, Segment{Name: f.Name(), Base: f.Base(), Size: f.Size(), ModTime: mt})
	}
	return out, nil
}

// DeleteFirst deletes segments from the oldest on while del says so (RocketMQ's
// deleteExpiredFileByTime): at most max of them, never the last one (the segment being
// written), and only segments that end at or below limit. It stops at the first segment it
// keeps, so the log stays contiguous. limit must be at most the writer's written offset; the
// engine passes the lowest of the durable, dispatched and checkpointed offsets, so that nothing
// can still need a deleted byte. A segment whose modification time cannot be read is
// kept (and ends the pass).
//
// A deleted segment is unlinked at once and unmapped when its last reader releases it: a reader
// holding it (Read, Each) keeps reading valid bytes; later reads of its offsets fail with
// segment.ErrOutOfRange. It returns the segments deleted, oldest first.
func (l *Log) DeleteFirst(max int, limit int64, del func(Segment) bool) ([]Segment, error) {
	var out []Segment
	var statErr error
	names, err := l.q.DeleteFirst(max, func(f *segment.File) bool {
		if f.End() > limit {
			return false
		}
		mt, err := l.q.ModTime(f)
		if err != nil {
			statErr = err
			return false
		}
		s := Segment{Name: f.Name(), Base: f.Base(), Size: f.Size(), ModTime: mt}
		if !del(s) {
			return false
		}
		out = append(out, s)
		return true
	})
	// After a failed unlink the later segments stay on disk (they are deleted again after the
	// next Open): they are not reported.
	return out[:len(names)], errors.Join(statErr, err)
}
