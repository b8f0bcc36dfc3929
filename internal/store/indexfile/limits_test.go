package indexfile

import (
	"math"
	"testing"

	"github.com/rocketstore/engine/internal/vfs"
)

// TestRelinkEndSaturates: Relink sets the end timestamp from the begin timestamp and the last
// kept entry's timeDiff; with a begin near 2^63 (a torn header, set here through the writer's
// own setter) the sum saturates at MaxInt64 instead of wrapping negative, which took the file
// out of every time window.
func TestRelinkEndSaturates(t *testing.T) {
	f := newMemFile(t, vfs.NewMem(), Geometry{Slots: 8, Entries: 16}, 0)
	const t0 = 1_700_000_000_000
	for i := range int64(3) {
		mustPut(t, f, "T#k", 100*i, t0+1000*i)
	}
	f.wmu.Lock()
	f.setInt64(&f.beginTS, offBeginTimestamp, math.MaxInt64-500)
	f.wmu.Unlock()
	kept, dropped, err := f.Relink(func(no int32, _ Entry) bool { return no < 3 }, 0, 0, nil)
	if err != nil || kept != 2 || dropped != 1 {
		t.Fatalf("relink: kept %d, dropped %d, %v", kept, dropped, err)
	}
	if end := f.EndTimestamp(); end != math.MaxInt64 {
		t.Fatalf("end timestamp %d, want MaxInt64", end)
	}
	if h, _ := DecodeHeader(f.data); h.EndTimestamp != math.MaxInt64 {
		t.Fatalf("end timestamp on disk %d", h.EndTimestamp)
	}
}
