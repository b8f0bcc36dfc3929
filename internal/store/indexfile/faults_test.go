package indexfile

import (
	"errors"
	"slices"
	"testing"

	"github.com/rocketstore/engine/internal/vfs"
)

// TestFaults injects file-system errors into every write path: each one comes back as an error,
// leaves the service consistent, and the operation works once the fault is gone (a message whose
// put failed is indexed when dispatched again).
func TestFaults(t *testing.T) {
	for _, op := range []vfs.Op{vfs.OpCreateSegment, vfs.OpSyncDir, vfs.OpReserve, vfs.OpSegmentSync, vfs.OpRemove} {
		t.Run(op.String(), func(t *testing.T) {
			mem := vfs.NewMem()
			toggle := vfs.NewToggle(vfs.OnOp(op, vfs.ErrInjected))
			fsys := vfs.NewFaulty(mem, toggle.Inject)
			s := openService(t, Options{FS: fsys, Geometry: tiny, ReserveStep: 64})
			for i := range int64(4) { // one full file
				build(t, s, i, t0+i, "k")
			}
			toggle.On()
			_, buildErr := s.BuildHashes(4, t0+4, hashes("T", "k")) // rolls
			flushErr := s.Flush()
			var deleted []string
			var delErr error
			if op == vfs.OpRemove {
				deleted, delErr = s.DeleteExpired(1 << 40)
			}
			toggle.Off()

			want := []int64{5, 4, 3, 2, 1, 0}
			switch op {
			case vfs.OpCreateSegment, vfs.OpSyncDir, vfs.OpReserve, vfs.OpSegmentSync:
				// A roll flushes the full file, creates the next one, syncs its header and its
				// directory entry: any of them failing fails the roll.
				if !errors.Is(buildErr, vfs.ErrInjected) {
					t.Fatalf("BuildHashes: %v", buildErr)
				}
				if op == vfs.OpSegmentSync && !errors.Is(flushErr, vfs.ErrInjected) {
					t.Fatalf("Flush: %v", flushErr)
				}
				wantFiles := 1
				if op == vfs.OpReserve {
					wantFiles = 2 // the new file exists; its first put could not reserve
				}
				if len(s.Files()) != wantFiles {
					t.Fatalf("a failed roll left %v", names(s.Files()))
				}
				if op == vfs.OpSyncDir {
					if ents, _ := mem.ReadDir("/store/index"); len(ents) != 1 {
						t.Fatalf("a file whose entry could not be synced was left: %v", ents)
					}
				}
				build(t, s, 4, t0+4, "k")         // re-dispatch
				if err := s.Flush(); err != nil { // still dirty: the next flush syncs it
					t.Fatalf("Flush after the fault: %v", err)
				}
			case vfs.OpRemove:
				if buildErr != nil || !errors.Is(delErr, vfs.ErrInjected) || len(deleted) != 0 || len(s.Files()) != 2 {
					t.Fatalf("DeleteExpired: %v %v, files %v", deleted, delErr, names(s.Files()))
				}
				if deleted, err := s.DeleteExpired(1 << 40); err != nil || len(deleted) != 1 {
					t.Fatalf("DeleteExpired after the fault: %v %v", deleted, err)
				}
				want = []int64{5, 4}
			}
			build(t, s, 5, t0+5, "k")
			if got := query(t, s, "k", 64, 0, 1<<62); !slices.Equal(got, want) {
				t.Fatalf("after the fault: %v, want %v", got, want)
			}
		})
	}
}

// TestBuildHashesAllocs: the writer's path allocates nothing per message.
func TestBuildHashesAllocs(t *testing.T) {
	s := openService(t, Options{Geometry: Geometry{Slots: 1024, Entries: 10_000}})
	h := hashes("TopicTest", "7F00000112340A0B0C0D000000640001", "OrderID188", "OrderID189")
	var phy int64
	if _, err := s.BuildHashes(phy, 0, h); err != nil { // creates the file
		t.Fatal(err)
	}
	n := testing.AllocsPerRun(100, func() {
		phy++
		if _, err := s.BuildHashes(phy, 0, h); err != nil {
			t.Fatal(err)
		}
	})
	if n != 0 {
		t.Fatalf("BuildHashes allocates %v times per message", n)
	}
	dst := make([]int64, 0, DefaultMaxQueryNum)
	n = testing.AllocsPerRun(100, func() {
		if _, err := s.Query(dst, "TopicTest", "OrderID188", 64, 0, 1<<62); err != nil {
			t.Fatal(err)
		}
	})
	if n != 0 {
		t.Fatalf("Query allocates %v times", n)
	}
}
