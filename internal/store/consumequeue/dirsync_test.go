package consumequeue

import (
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/rocketstore/engine/internal/vfs"
)

// TestNewQueuesSyncedByFlushAll: the dispatcher's Puts on new queues make no directory sync (a
// new topic's four queues used to cost nine on its path); a crash before FlushAll loses them
// whole, and once FlushAll has run, a crash keeps every queue created before it, with every
// unit flushed.
func TestNewQueuesSyncedByFlushAll(t *testing.T) {
	mem := vfs.NewMem()
	var syncs atomic.Int64
	fsys := vfs.NewFaulty(mem, func(op vfs.Op, _ string) error {
		if op == vfs.OpSyncDir {
			syncs.Add(1)
		}
		return nil
	})
	s := openStore(t, fsys, "store", tinyUnits)
	const topics, units = 20, tinyUnits - 2 // one file each: a roll syncs at once (see segment.Queue.create)
	for i := range topics {
		for id := range int32(4) {
			putRange(t, queue(t, s, "T"+strconv.Itoa(i), id), 0, units)
		}
	}
	if n := syncs.Load(); n != 0 {
		t.Fatalf("Put synced %d directories", n)
	}
	// A crash before the flush loses the new queues whole (recovery re-dispatches them from
	// the checkpoint), and what it leaves loads.
	early := load(t, mem.CrashImage(nil, vfs.CrashOptions{SyncedOnly: true}), "store", tinyUnits)
	if n := len(early.Queues()); n != 0 {
		t.Fatalf("a crash before FlushAll kept %d queues", n)
	}
	noErr(t, early.Close())
	noErr(t, s.FlushAll(0))
	// consumequeue/, each topic's directory and each queue's: one sync each.
	if n, want := syncs.Load(), int64(1+topics+4*topics); n != want {
		t.Fatalf("FlushAll synced %d directories, want %d", n, want)
	}
	img := mem.CrashImage(nil, vfs.CrashOptions{SyncedOnly: true})
	noErr(t, s.Close())

	s = load(t, img, "store", tinyUnits)
	defer s.Close()
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
