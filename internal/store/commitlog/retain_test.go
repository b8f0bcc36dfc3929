package commitlog

import (
	"bytes"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rocketstore/engine/internal/store/segment"
	"github.com/rocketstore/engine/internal/vfs"
)

// handClock is a clock a test moves by hand.
type handClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *handClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *handClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// fillSegments appends records until the log has n segments, flushing after each so that
// every segment's mtime is the clock's time when it was written, and returns the offsets.
func fillSegments(t *testing.T, l *Log, n int, clock *handClock) []int64 {
	t.Helper()
	var offs []int64
	for seq := 0; len(l.Queue().Files()) < n; seq++ {
		rec := encodeTest(t, seq, 200, true)
		phys, err := l.Append(rec, int64(seq), 1, true)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Flush(l.MaxOffset()); err != nil {
			t.Fatal(err)
		}
		offs = append(offs, phys)
		if clock != nil && len(l.Queue().Files()) > 1 && l.Queue().Last().Wrote() == int64(len(rec)) {
			clock.Add(time.Hour) // each segment one hour younger than the one before
		}
	}
	return offs
}

func TestLogSegmentsAndDeleteFirst(t *testing.T) {
	clock := &handClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	fsys := vfs.NewMem(vfs.WithClock(clock.Now))
	l := openTestLog(t, fsys, "/store/commitlog", 4096)
	defer l.Close()
	fillSegments(t, l, 6, clock)

	segs, err := l.Segments()
	if err != nil || len(segs) != 6 {
		t.Fatalf("%d segments: %v", len(segs), err)
	}
	for i, s := range segs {
		if s.Base != int64(i)*4096 || s.Size != 4096 || s.End() != s.Base+4096 || filepath.Base(s.Name) != segment.Name(s.Base) {
			t.Fatalf("segment %d: %+v", i, s)
		}
		if i > 0 && s.ModTime.Before(segs[i-1].ModTime) {
			t.Fatalf("segment %d modified at %v, before %v", i, s.ModTime, segs[i-1].ModTime)
		}
	}
	if d := segs[5].ModTime.Sub(segs[0].ModTime); d < 4*time.Hour {
		t.Fatalf("first and last segments modified %v apart", d)
	}

	// Nothing at or past limit goes, whatever del says.
	got, err := l.DeleteFirst(10, segs[1].End()-1, func(Segment) bool { return true })
	if err != nil || len(got) != 1 || got[0].Base != 0 {
		t.Fatalf("deleted %+v: %v", got, err)
	}
	if l.MinOffset() != 4096 {
		t.Fatalf("min offset %d", l.MinOffset())
	}
	if _, err := fsys.Stat(segs[0].Name); err == nil {
		t.Fatal("deleted segment still listed")
	}
	// It stops at the first segment kept, even if a later one would go.
	got, err = l.DeleteFirst(10, l.MaxOffset(), func(s Segment) bool { return s.Base != 4096 })
	if err != nil || len(got) != 0 {
		t.Fatalf("deleted %+v past a kept segment: %v", got, err)
	}
	// At most max per call.
	got, err = l.DeleteFirst(2, l.MaxOffset(), func(Segment) bool { return true })
	if err != nil || len(got) != 2 || got[0].Base != 4096 || got[1].Base != 8192 {
		t.Fatalf("deleted %+v: %v", got, err)
	}
	// Never the last, even when everything is allowed.
	got, err = l.DeleteFirst(100, l.MaxOffset(), func(Segment) bool { return true })
	if err != nil || len(got) != 2 || len(l.Queue().Files()) != 1 {
		t.Fatalf("deleted %+v, %d left: %v", got, len(l.Queue().Files()), err)
	}
	if _, _, err := l.Read(0); !errors.Is(err, segment.ErrOutOfRange) {
		t.Fatalf("read of a deleted offset: %v", err)
	}
	// Writing and flushing go on.
	if _, err := l.Append(encodeTest(t, 1000, 100, true), 1000, 1, true); err != nil {
		t.Fatal(err)
	}
	if err := l.Flush(l.MaxOffset()); err != nil || l.FlushedOffset() != l.MaxOffset() {
		t.Fatalf("flushed to %d of %d: %v", l.FlushedOffset(), l.MaxOffset(), err)
	}
}

// A reader holding a segment keeps valid bytes while it is deleted, on the real file system
// (where an early munmap would fault).
func TestLogDeleteUnderReader(t *testing.T) {
	l := openTestLog(t, vfs.Default, t.TempDir(), 4096)
	defer l.Close()
	offs := fillSegments(t, l, 4, nil)
	v, release, err := l.Read(offs[0])
	if err != nil {
		t.Fatal(err)
	}
	want := bytes.Clone(v.Bytes())
	got, err := l.DeleteFirst(10, l.MaxOffset(), func(Segment) bool { return true })
	if err != nil || len(got) != 3 {
		t.Fatalf("deleted %+v: %v", got, err)
	}
	if !bytes.Equal(v.Bytes(), want) {
		t.Fatal("record changed under its reader")
	}
	release()
	if _, _, err := l.Read(offs[0]); !errors.Is(err, segment.ErrOutOfRange) {
		t.Fatalf("read after delete: %v", err)
	}
}

func TestLogDeleteFirstReadOnly(t *testing.T) {
	fsys := vfs.NewMem()
	l := openTestLog(t, fsys, "/store/commitlog", 4096)
	fillSegments(t, l, 3, nil)
	l.Close()
	ro, err := OpenLog(LogOptions{FS: fsys, Dir: "/store/commitlog", FileSize: 4096, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if got, err := ro.DeleteFirst(10, 1<<40, func(Segment) bool { return true }); err == nil || len(got) != 0 {
		t.Fatalf("read-only log deleted %+v: %v", got, err)
	}
}
