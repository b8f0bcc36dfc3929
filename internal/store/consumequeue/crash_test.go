package consumequeue

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"

	"github.com/rocketstore/engine/internal/vfs"
)

// TestCrashImages writes a queue on a vfs.Mem with flushes at random points, takes crash images
// of it and recovers them: every unit below the last flush survives intact, recovery never ends
// before it, and the dispatcher can go on from the recovered end.
// CQ_CRASH_SEEDS sets the number of seeds (default 100).
func TestCrashImages(t *testing.T) {
	seeds := uint64(100)
	if v := os.Getenv("CQ_CRASH_SEEDS"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		noErr(t, err)
		seeds = n
	}
	for seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			m := vfs.NewMem()
			s := openStore(t, m, "store", tinyUnits)
			cq := queue(t, s, "T", 0)
			start := rng.Int64N(25)
			total := start + 1 + rng.Int64N(60)
			durable := int64(0) // units certainly durable
			for n := start; n < total; n++ {
				noErr(t, cq.Put(n, unitFor(n)))
				if rng.IntN(8) == 0 {
					noErr(t, cq.Flush(rng.IntN(2)))
					durable = cq.seg.FlushedWhere() / UnitSize
				}
			}
			img := m.CrashImage(rng, vfs.CrashOptions{})
			noErr(t, s.Close())

			s = load(t, img, "store", tinyUnits)
			defer s.Close()
			cq = s.Find("T", 0)
			if durable > start {
				if cq == nil {
					t.Fatal("queue lost")
				}
				if cq.MaxOffset() < durable || cq.MinOffset() != start {
					t.Fatalf("recovered [%d, %d), flushed [%d, %d)", cq.MinOffset(), cq.MaxOffset(), start, durable)
				}
				checkUnits(t, cq, start, durable)
			}
			if cq == nil {
				cq = queue(t, s, "T", 0)
			}
			// Re-dispatch from the CommitLog: drop what the CommitLog does not hold, put the rest.
			noErr(t, cq.TruncateDirty(unitFor(total).Phys))
			end := cq.MaxOffset()
			for n := max(start, end); n < total; n++ {
				noErr(t, cq.Put(n, unitFor(n)))
			}
			if cq.MaxOffset() != total && end <= total {
				t.Fatalf("after re-dispatch max %d, want %d (recovered end %d)", cq.MaxOffset(), total, end)
			}
		})
	}
}

// TestTruncatedUnitsStayDropped: units TruncateDirty dropped do not come back after a crash,
// as they would in RocketMQ, which does not zero them.
func TestTruncatedUnitsStayDropped(t *testing.T) {
	for _, keep := range []int64{23, 20, 3} {
		t.Run(fmt.Sprint(keep), func(t *testing.T) {
			m := vfs.NewMem()
			s := openStore(t, m, "store", tinyUnits)
			putRange(t, queue(t, s, "T", 0), 0, 35)
			s = reopen(t, s, m, "store", tinyUnits)
			noErr(t, s.TruncateDirtyAll(unitFor(keep).Phys))
			img := m.SyncedImage()
			noErr(t, s.Close())

			s = load(t, img, "store", tinyUnits)
			defer s.Close()
			cq := s.Find("T", 0)
			if cq.MaxOffset() != keep || cq.MaxPhysicalOffset() != unitFor(keep-1).End() {
				t.Fatalf("max %d phys %d after the crash, want %d", cq.MaxOffset(), cq.MaxPhysicalOffset(), keep)
			}
			checkUnits(t, cq, 0, keep)
		})
	}
}

// TestFullDisk: a full disk is an error from Put, not a fault, and Put works again once there
// is room.
func TestFullDisk(t *testing.T) {
	m := vfs.NewMem()
	s := openStore(t, m, "store", tinyUnits)
	defer s.Close()
	cq := queue(t, s, "T", 0)
	putRange(t, cq, 0, 4) // one reservation step: 4 units
	usage, err := m.DiskUsage("store")
	noErr(t, err)
	m.SetCapacity(int64(usage.Total - usage.Free))
	if err := cq.Put(4, unitFor(4)); err == nil {
		t.Fatal("put past the reservation on a full disk")
	}
	if cq.MaxOffset() != 4 {
		t.Fatalf("max %d", cq.MaxOffset())
	}
	m.SetCapacity(0)
	putRange(t, cq, 4, 25)
	checkUnits(t, cq, 0, 25)
}
