package consumequeue

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rocketstore/engine/internal/vfs"
)

func TestStoreLoadListsQueues(t *testing.T) {
	root := t.TempDir()
	s := openStore(t, vfs.Default, root, tinyUnits)
	for _, topic := range []string{"b", "a", "%RETRY%g"} {
		for _, id := range []int32{2, 0, 11} {
			putRange(t, queue(t, s, topic, id), 0, int64(id)+1)
		}
	}
	queue(t, s, "memory-only", 0) // never written: no directory
	noErr(t, s.FlushAll(0))
	noErr(t, s.Close())
	if _, err := s.FindOrCreate("x", 0); !errors.Is(err, ErrClosed) {
		t.Fatalf("FindOrCreate after Close: %v", err)
	}

	dir := filepath.Join(root, "consumequeue")
	for _, d := range []string{"a/007", "a/-1", "a/x", "a/4294967296"} {
		noErr(t, os.MkdirAll(filepath.Join(dir, d), 0o755))
	}
	noErr(t, os.WriteFile(filepath.Join(dir, "stray"), nil, 0o644))
	noErr(t, os.WriteFile(filepath.Join(dir, "b", "stray"), nil, 0o644))

	s = openStore(t, vfs.Default, root, tinyUnits)
	defer s.Close()
	skipped, err := s.Load()
	noErr(t, err)
	var rel []string
	for _, p := range skipped {
		rel = append(rel, strings.TrimPrefix(p, dir+"/"))
	}
	slices.Sort(rel)
	if want := []string{"a/-1", "a/007", "a/4294967296", "a/x", "b/stray", "stray"}; !slices.Equal(rel, want) {
		t.Fatalf("skipped %v, want %v", rel, want)
	}
	if MappedQueues := s.MappedQueues(); MappedQueues != 0 {
		t.Fatalf("Load mapped %d queues", MappedQueues)
	}
	if got := s.Topics(); !slices.Equal(got, []string{"%RETRY%g", "a", "b"}) {
		t.Fatalf("topics %v", got)
	}
	if got := s.QueueIDs("a"); !slices.Equal(got, []int32{0, 2, 11}) {
		t.Fatalf("queue ids %v", got)
	}
	if _, err := s.RecoverAll(); err != nil {
		t.Fatal(err)
	}
	offs := s.MaxOffsets()
	for _, topic := range []string{"a", "b", "%RETRY%g"} {
		for _, id := range []int32{0, 2, 11} {
			if offs[topic][id] != int64(id)+1 {
				t.Fatalf("%s/%d: max offset %d", topic, id, offs[topic][id])
			}
		}
	}
	if s.MaxPhysicalOffset() != unitFor(11).End() {
		t.Fatalf("max physical offset %d", s.MaxPhysicalOffset())
	}
	if qs := s.Queues(); len(qs) != 9 || qs[0].Topic() != "%RETRY%g" || qs[0].QueueID() != 0 || qs[8].QueueID() != 11 {
		t.Fatalf("queues %v", qs)
	}
}

func TestStoreRefusesBadNames(t *testing.T) {
	s := openStore(t, vfs.Default, t.TempDir(), tinyUnits)
	defer s.Close()
	for _, topic := range []string{"", ".", "..", "a/b", "/abs", "a\x00b"} {
		if _, err := s.FindOrCreate(topic, 0); !errors.Is(err, ErrBadName) {
			t.Errorf("topic %q: %v", topic, err)
		}
	}
	if _, err := s.FindOrCreate("ok", -1); !errors.Is(err, ErrBadName) {
		t.Errorf("queue -1: %v", err)
	}
	if s.Find("ok", 0) != nil {
		t.Error("Find created a queue")
	}
	a, b := queue(t, s, "ok", 0), queue(t, s, "ok", 0)
	if a != b {
		t.Error("two queues for one name")
	}
	if _, err := Open(Options{}); err == nil {
		t.Error("no root accepted")
	}
	if _, err := Open(Options{Root: t.TempDir(), UnitsPerFile: -1}); err == nil {
		t.Error("negative file size accepted")
	}
}

// TestMappingBound: with MaxMapped 3, flushed idle queues are unmapped, and they map again,
// with their end, min offset and max physical offset, when used.
func TestMappingBound(t *testing.T) {
	root := t.TempDir()
	s, err := Open(Options{Root: root, UnitsPerFile: tinyUnits, ReserveUnits: 4, MaxMapped: 3})
	noErr(t, err)
	defer s.Close()
	var qs []*ConsumeQueue
	for i := range 10 {
		cq := queue(t, s, "T", int32(i))
		putRange(t, cq, int64(i), int64(i)+15) // queue i starts at offset i
		qs = append(qs, cq)
	}
	// Idle queues are flushed and unmapped as new ones map: the bound holds before any flush
	// (give or take the queues in use while the hand passes).
	if n := s.MappedQueues(); n > 4 {
		t.Fatalf("%d mapped, bound 3", n)
	}
	noErr(t, s.FlushAll(0))
	if n := s.MappedQueues(); n > 3 {
		t.Fatalf("%d mapped after flushing, bound 3", n)
	}
	unmapped := 0
	for i, cq := range qs {
		if cq.seg == nil {
			unmapped++
		}
		if cq.MaxOffset() != int64(i)+15 || cq.MinOffset() != int64(i) || cq.MaxPhysicalOffset() != unitFor(int64(i)+14).End() {
			t.Fatalf("queue %d: min %d max %d phys %d", i, cq.MinOffset(), cq.MaxOffset(), cq.MaxPhysicalOffset())
		}
	}
	if unmapped < 7 {
		t.Fatalf("%d unmapped", unmapped)
	}
	// Unmapped queues answer the recovery and retention steps without mapping.
	noErr(t, s.TruncateDirtyAll(unitFor(100).Phys))
	noErr(t, s.CorrectMinOffsetAll(0))
	if _, err := s.DeleteExpiredAll(0); err != nil {
		t.Fatal(err)
	}
	if n := s.MappedQueues(); n > 3 {
		t.Fatalf("%d mapped by steps that had nothing to do", n)
	}
	for round := range 3 {
		for i, cq := range qs {
			lo := int64(i) + 15 + int64(round)*5
			putRange(t, cq, lo, lo+5)
			checkUnits(t, cq, int64(i), lo+5)
			noErr(t, cq.Flush(0))
		}
	}
	noErr(t, s.FlushAll(0))
	if n := s.MappedQueues(); n > 3 {
		t.Fatalf("%d mapped", n)
	}
	s2 := reopen(t, s, vfs.Default, root, tinyUnits)
	defer s2.Close()
	for i := range qs {
		cq := s2.Find("T", int32(i))
		if cq.MaxOffset() != int64(i)+30 || cq.MinOffset() != int64(i) {
			t.Fatalf("queue %d after restart: min %d max %d", i, cq.MinOffset(), cq.MaxOffset())
		}
	}
}
