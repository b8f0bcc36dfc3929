package consumequeue

import (
	"errors"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/rocketstore/engine/internal/vfs"
)

// TestNewQueuesSyncedByFlushAll: the dispatcher's Puts on new queues make no directory sync (a
// new topic's four queues used to cost nine on its path); a crash before FlushAll loses them
// whole, and once FlushAll has run, a crash keeps every queue created before it, with every
// unit flushed. FlushAll syncs them one by one up to SyncFSAbove files and directories: with 80
// queues (101 directories) that is 101 directory syncs and 80 file syncs; past the bound (the
// default) it is one sync of the file system, whatever the number (issue 27: 20,000 new topics
// made a stop take seconds), and a crash keeps just as much.
func TestNewQueuesSyncedByFlushAll(t *testing.T) {
	for _, tc := range []struct {
		name                    string
		above                   int
		dirSyncs, files, syncFS int64
	}{
		{"one by one", -1, 1 + 20 + 4*20, 4 * 20, 0},
		{"at once", 0, 0, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := vfs.NewMem()
			var counts [vfs.OpSyncFS + 1]atomic.Int64
			fsys := vfs.NewFaulty(mem, func(op vfs.Op, _ string) error {
				counts[op].Add(1)
				return nil
			})
			s, err := Open(Options{FS: fsys, Root: "store", UnitsPerFile: tinyUnits, ReserveUnits: 4, SyncFSAbove: tc.above})
			noErr(t, err)
			const topics, units = 20, tinyUnits - 2 // one file each: a roll syncs at once (see segment.Queue.create)
			for i := range topics {
				for id := range int32(4) {
					putRange(t, queue(t, s, "T"+strconv.Itoa(i), id), 0, units)
				}
			}
			if n := counts[vfs.OpSyncDir].Load() + counts[vfs.OpSegmentSync].Load() + counts[vfs.OpSyncFS].Load(); n != 0 {
				t.Fatalf("Put synced %d times", n)
			}
			// A crash before the flush loses the new queues whole (recovery re-dispatches them
			// from the checkpoint), and what it leaves loads.
			early := load(t, mem.CrashImage(nil, vfs.CrashOptions{SyncedOnly: true}), "store", tinyUnits)
			if n := len(early.Queues()); n != 0 {
				t.Fatalf("a crash before FlushAll kept %d queues", n)
			}
			noErr(t, early.Close())
			noErr(t, s.FlushAll(0))
			// consumequeue/, each topic's directory and each queue's: one sync each; or one in all.
			if d, f, a := counts[vfs.OpSyncDir].Load(), counts[vfs.OpSegmentSync].Load(), counts[vfs.OpSyncFS].Load(); d != tc.dirSyncs || f != tc.files || a != tc.syncFS {
				t.Fatalf("FlushAll synced %d directories, %d files, %d file systems; want %d, %d, %d", d, f, a, tc.dirSyncs, tc.files, tc.syncFS)
			}
			noErr(t, s.FlushAll(0))
			if a := counts[vfs.OpSyncFS].Load(); a != tc.syncFS {
				t.Fatalf("a FlushAll with nothing written synced the file system (%d)", a)
			}
			rng := rand.New(rand.NewPCG(7, 8))
			imgs := []*vfs.Mem{mem.CrashImage(nil, vfs.CrashOptions{SyncedOnly: true}),
				mem.CrashImage(rng, vfs.CrashOptions{UnsyncedDirChanges: true, GarbageProb: 0.5})}
			noErr(t, s.Close())
			for _, img := range imgs {
				s := load(t, img, "store", tinyUnits)
				for i := range topics {
					for id := range int32(4) {
						cq := s.Find("T"+strconv.Itoa(i), id)
						if cq == nil {
							t.Fatalf("queue T%d/%d lost", i, id)
						}
						if cq.MaxOffset() != units {
							t.Fatalf("queue T%d/%d recovered to %d, want %d", i, id, cq.MaxOffset(), units)
						}
						checkUnits(t, cq, 0, units)
					}
				}
				noErr(t, s.Close())
			}
		})
	}
}

// TestFlushAtOnceFails: when the sync of the file system fails, no queue's flushed mark moves
// and every directory stays pending, so that the next FlushAll syncs them all again (and the
// checkpoint that relies on them waits for it).
func TestFlushAtOnceFails(t *testing.T) {
	mem := vfs.NewMem()
	var fail atomic.Bool
	fsys := vfs.NewFaulty(mem, func(op vfs.Op, _ string) error {
		if op == vfs.OpSyncFS && fail.Load() {
			return vfs.ErrInjected
		}
		return nil
	})
	s, err := Open(Options{FS: fsys, Root: "store", UnitsPerFile: tinyUnits, ReserveUnits: 4, SyncFSAbove: 1})
	noErr(t, err)
	defer s.Close()
	var cqs []*ConsumeQueue
	for i := range 3 {
		cq := queue(t, s, "T"+strconv.Itoa(i), 0)
		putRange(t, cq, 0, 5)
		cqs = append(cqs, cq)
	}
	fail.Store(true)
	if err := s.FlushAll(0); !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("FlushAll: %v, want the injected error", err)
	}
	for _, cq := range cqs {
		if cq.seg.FlushedWhere() != 0 {
			t.Fatalf("%s flushed to %d by a failed sync", cq, cq.seg.FlushedWhere())
		}
	}
	if n := s.cfg.dirSyncs.Len(); n != 1+3+3 {
		t.Fatalf("%d directories pending after a failed sync, want 7", n)
	}
	fail.Store(false)
	noErr(t, s.FlushAll(0))
	s2 := load(t, mem.CrashImage(nil, vfs.CrashOptions{SyncedOnly: true}), "store", tinyUnits)
	defer s2.Close()
	for i := range 3 {
		if got := s2.Find("T"+strconv.Itoa(i), 0); got == nil || got.MaxOffset() != 5 {
			t.Fatalf("after the second FlushAll a crash kept %v", got)
		}
	}
}

// TestFailedDirSyncStaysPending: a directory whose sync failed is synced again by the next
// flush, and the queue's flushed mark does not claim what its directory entry does not hold.
func TestFailedDirSyncStaysPending(t *testing.T) {
	mem := vfs.NewMem()
	var fail atomic.Bool
	fsys := vfs.NewFaulty(mem, func(op vfs.Op, _ string) error {
		if op == vfs.OpSyncDir && fail.Load() {
			return vfs.ErrInjected
		}
		return nil
	})
	s := openStore(t, fsys, "store", tinyUnits)
	defer s.Close()
	cq := queue(t, s, "T", 0)
	putRange(t, cq, 0, 5)
	fail.Store(true)
	if err := s.FlushAll(0); err == nil {
		t.Fatal("FlushAll returned no error for failed directory syncs")
	}
	if cq.seg.FlushedWhere() != 0 {
		t.Fatalf("flushed to %d with its directory not synced", cq.seg.FlushedWhere())
	}
	fail.Store(false)
	noErr(t, s.FlushAll(0))
	s2 := load(t, mem.CrashImage(nil, vfs.CrashOptions{SyncedOnly: true}), "store", tinyUnits)
	defer s2.Close()
	if got := s2.Find("T", 0); got == nil || got.MaxOffset() != 5 {
		t.Fatalf("after the second FlushAll a crash kept %v", got)
	}
}
