package offsets

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/rs/zerolog"

	"github.com/rocketstore/engine/internal/store/meta"
	"github.com/rocketstore/engine/internal/vfs"
)

const store = "/s"

func open(t *testing.T, fsys vfs.FS, opts Options) *Table {
	t.Helper()
	opts.Logger = zerolog.New(zerolog.NewTestWriter(t))
	tb, err := Open(fsys, store, opts)
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

func commit(t *testing.T, tb *Table, group, topic string, q int32, off int64) {
	t.Helper()
	if err := tb.Commit(Commit{Group: group, Topic: topic, QueueID: q, Offset: off, Epoch: 3, Member: "m1"}); err != nil {
		t.Fatal(err)
	}
}

func want(t *testing.T, tb *Table, group, topic string, q int32, off int64) {
	t.Helper()
	got, ok := tb.Get(group, topic, q)
	if !ok || got.Offset != off {
		t.Fatalf("%s@%s/%d: %+v %v, want offset %d", topic, group, q, got, ok, off)
	}
}

// TestCommitsSurviveCloseAndCrash: after a clean Close, consumerOffset.json is RocketMQ's table
// with every offset and the journal is empty; after a crash (no Close, only what was synced) the
// journal brings back every commit that returned, in sync mode.
func TestCommitsSurviveCloseAndCrash(t *testing.T) {
	fsys := vfs.NewMem()
	tb := open(t, fsys, Options{Sync: true})
	commit(t, tb, "billing", "orders", 0, 7)
	commit(t, tb, "billing", "orders", 1, 9)
	commit(t, tb, "audit", "orders", 0, 2)
	if err := tb.Close(); err != nil {
		t.Fatal(err)
	}
	var f meta.ConsumerOffsetFile
	if _, err := meta.Load(fsys, store+"/config/consumerOffset.json", &f); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(f.OffsetTable) != "map[orders@audit:map[0:2] orders@billing:map[0:7 1:9]]" {
		t.Fatalf("consumerOffset.json: %v", f.OffsetTable)
	}
	if j, err := fsys.ReadFile(store + "/config/" + JournalFileName); err != nil || len(j) != journalHeaderSize {
		t.Fatalf("journal after Close: %d bytes, %v; want only its header", len(j), err)
	}

	tb = open(t, fsys, Options{Sync: true})
	want(t, tb, "billing", "orders", 1, 9)
	if o, _ := tb.Get("billing", "orders", 1); o.Epoch != 3 || o.Member != "m1" || o.Time == 0 {
		t.Fatalf("details after a restart: %+v", o)
	}
	commit(t, tb, "billing", "orders", 1, 12)
	commit(t, tb, "new", "orders", 3, 1)
	// Power loss: only what was synced.
	img := fsys.SyncedImage()
	tb2 := open(t, img, Options{Sync: true})
	want(t, tb2, "billing", "orders", 1, 12)
	want(t, tb2, "new", "orders", 3, 1)
	want(t, tb2, "audit", "orders", 0, 2)
}

// TestCrashImagesKeepEveryAnsweredCommit cuts the power at a random moment of a stream of
// commits from several goroutines, with random writeback of what was not synced: every commit
// answered before the cut is there after it, with its value or a later one of the same queue.
func TestCrashImagesKeepEveryAnsweredCommit(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			fsys := vfs.NewMem()
			tb := open(t, fsys, Options{Sync: true, CompactBytes: 600}) // compactions along the way
			var mu sync.Mutex
			answered := make(map[int32]int64) // queue -> highest offset answered
			progress := make(chan struct{}, 160)
			var wg sync.WaitGroup
			for w := range 4 {
				wg.Go(func() {
					for i := range 40 {
						q := int32(w)
						if err := tb.Commit(Commit{Group: "g", Topic: "t", QueueID: q, Offset: int64(i + 1)}); err != nil {
							t.Error(err)
							return
						}
						mu.Lock()
						answered[q] = int64(i + 1)
						mu.Unlock()
						progress <- struct{}{}
					}
				})
			}
			// Cut after a random number of answered commits, while the others go on: the
			// image is taken under the Mem's lock, at one instant.
			for range 1 + rng.IntN(150) {
				<-progress
			}
			mu.Lock()
			floor := make(map[int32]int64)
			for q, o := range answered {
				floor[q] = o
			}
			img := fsys.CrashImage(rng, vfs.CrashOptions{UnsyncedDirChanges: true, GarbageProb: 0.2})
			mu.Unlock()
			wg.Wait()
			after := open(t, img, Options{Sync: true})
			for q, o := range floor {
				got, ok := after.Get("g", "t", q)
				if !ok || got.Offset < o {
					t.Fatalf("queue %d: %+v %v after the cut, want at least %d (answered before it)", q, got, ok, o)
				}
			}
		})
	}
}

// TestStaleJournalIgnored: a consumerOffset.json rewritten after the engine crashed (RocketMQ's
// broker ran on the store) wins over the engine's older journal.
func TestStaleJournalIgnored(t *testing.T) {
	fsys := vfs.NewMem()
	tb := open(t, fsys, Options{Sync: true})
	commit(t, tb, "g", "t", 0, 5)
	img := fsys.SyncedImage() // a crash: the journal holds the commit
	// RocketMQ opens the crashed store: its table (without the journal's commit) moves on.
	if err := meta.Save(img, store+"/config/consumerOffset.json", meta.ConsumerOffsetFile{OffsetTable: map[string]map[int32]int64{"t@g": {0: 40}}}); err != nil {
		t.Fatal(err)
	}
	after := open(t, img, Options{Sync: true})
	want(t, after, "g", "t", 0, 40)
}

// TestMaxGroups: at the bound a new group is refused with a clear error and nothing else
// changes; the groups there go on committing; deleting one makes room.
func TestMaxGroups(t *testing.T) {
	fsys := vfs.NewMem()
	tb := open(t, fsys, Options{MaxGroups: 2, Sync: true})
	commit(t, tb, "a", "t", 0, 1)
	commit(t, tb, "b", "t", 0, 1)
	commit(t, tb, "b", "u", 0, 1) // another topic of a group there: not a new group
	err := tb.Commit(Commit{Group: "c", Topic: "t", QueueID: 0, Offset: 1})
	if !errors.Is(err, ErrTooManyGroups) || !strings.Contains(err.Error(), "max_groups") {
		t.Fatalf("a third group: %v", err)
	}
	if _, ok := tb.Get("c", "t", 0); ok || tb.Groups() != 2 {
		t.Fatalf("the refused group is there: %d groups", tb.Groups())
	}
	commit(t, tb, "a", "t", 0, 2)
	if ok, err := tb.Delete("a", "t"); !ok || err != nil {
		t.Fatalf("delete: %v %v", ok, err)
	}
	commit(t, tb, "c", "t", 0, 1)
	// The deletion is journaled: a crash keeps it.
	after := open(t, fsys.SyncedImage(), Options{MaxGroups: 2})
	if _, ok := after.Get("a", "t", 0); ok {
		t.Fatal("deleted group back after a crash")
	}
	want(t, after, "c", "t", 0, 1)
}

// TestUnchangedCommitWritesNothing: only what changed is written.
func TestUnchangedCommitWritesNothing(t *testing.T) {
	fsys := vfs.NewMem()
	tb := open(t, fsys, Options{})
	commit(t, tb, "g", "t", 0, 1)
	st, _ := fsys.Stat(store + "/config/" + JournalFileName)
	for range 10 {
		commit(t, tb, "g", "t", 0, 1)
	}
	if st2, _ := fsys.Stat(store + "/config/" + JournalFileName); st2.Size != st.Size {
		t.Fatalf("journal grew from %d to %d bytes on commits that changed nothing", st.Size, st2.Size)
	}
}

// TestFullDisk: with no room, a commit fails with the disk's error and the engine's table stays
// usable; a start on a full disk works (commits refused); once room returns commits go on and
// nothing answered is lost.
func TestFullDisk(t *testing.T) {
	fsys := vfs.NewMem()
	tb := open(t, fsys, Options{Sync: true, CompactBytes: 200})
	commit(t, tb, "g", "t", 0, 1)
	used, _ := fsys.DiskUsage(store)
	fsys.SetCapacity(int64(used.Total - used.Free)) // not one more byte
	var failed error
	for i := range 20 { // past CompactBytes: appends, then a compaction, fail
		if failed = tb.Commit(Commit{Group: "g", Topic: "t", QueueID: 0, Offset: int64(i + 2)}); failed != nil {
			break
		}
	}
	if failed == nil {
		t.Fatal("commits on a full disk all succeeded")
	}
	// A restart on the full disk.
	img := fsys.SyncedImage()
	img.SetCapacity(int64(used.Total - used.Free))
	tb2 := open(t, img, Options{Sync: true})
	if err := tb2.Commit(Commit{Group: "g", Topic: "t", QueueID: 0, Offset: 100}); err == nil {
		t.Fatal("a commit succeeded with no room")
	}
	img.SetCapacity(0)
	commit(t, tb2, "g", "t", 0, 101)
	if err := tb2.Close(); err != nil {
		t.Fatal(err)
	}
	want(t, open(t, img.SyncedImage(), Options{}), "g", "t", 0, 101)
}

// TestDamagedJournalHeader: a journal that is not a journal stops the start with the way out.
func TestDamagedJournalHeader(t *testing.T) {
	fsys := vfs.NewMem()
	tb := open(t, fsys, Options{})
	commit(t, tb, "g", "t", 0, 1)
	name := filepath.Join(store, "config", JournalFileName)
	b, _ := fsys.ReadFile(name)
	b[3] ^= 1
	if err := meta.WriteFileAtomic(fsys, name, b); err != nil {
		t.Fatal(err)
	}
	_, err := Open(fsys, store, Options{})
	if !errors.Is(err, meta.ErrCorrupt) || !strings.Contains(err.Error(), "remove "+name) {
		t.Fatalf("open with a damaged journal: %v", err)
	}
}

// TestTornTail: a record cut by a crash is left out, the ones before it kept.
func TestTornTail(t *testing.T) {
	fsys := vfs.NewMem()
	tb := open(t, fsys, Options{})
	commit(t, tb, "g", "t", 0, 1)
	commit(t, tb, "g", "t", 0, 2)
	name := filepath.Join(store, "config", JournalFileName)
	b, _ := fsys.ReadFile(name)
	if err := meta.WriteFileAtomic(fsys, name, b[:len(b)-5]); err != nil {
		t.Fatal(err)
	}
	want(t, open(t, fsys, Options{}), "g", "t", 0, 1)
}

// TestRocketMQTable: a consumerOffset.json as RocketMQ's fastjson writes it (bare queue ids) is
// read, and its groups are kept through a compaction.
func TestRocketMQTable(t *testing.T) {
	fsys := vfs.NewMem()
	if err := fsys.MkdirAll(store + "/config"); err != nil {
		t.Fatal(err)
	}
	if err := meta.WriteFileAtomic(fsys, store+"/config/consumerOffset.json", []byte(`{"offsetTable":{"TopicTest@please_rename_unique_group_name_4":{0:250,1:249}}}`)); err != nil {
		t.Fatal(err)
	}
	tb := open(t, fsys, Options{})
	want(t, tb, "please_rename_unique_group_name_4", "TopicTest", 1, 249)
	commit(t, tb, "please_rename_unique_group_name_4", "TopicTest", 0, 251)
	if err := tb.Close(); err != nil {
		t.Fatal(err)
	}
	tb = open(t, fsys, Options{})
	want(t, tb, "please_rename_unique_group_name_4", "TopicTest", 0, 251)
	want(t, tb, "please_rename_unique_group_name_4", "TopicTest", 1, 249)
}

// TestReadOnlyLoad: Load reads the journal and writes nothing.
func TestReadOnlyLoad(t *testing.T) {
	fsys := vfs.NewMem()
	tb := open(t, fsys, Options{})
	commit(t, tb, "g", "t", 0, 4)
	ro, err := Load(vfs.ReadOnlyFS{FS: fsys}, store, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	want(t, ro, "g", "t", 0, 4)
	if err := ro.Commit(Commit{Group: "g", Topic: "t", Offset: 1}); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("commit on a read-only table: %v", err)
	}
}

// TestGroupCommit: concurrent commits share journal writes.
func TestGroupCommit(t *testing.T) {
	var syncs atomic.Int64
	fsys := vfs.NewFaulty(vfs.NewMem(), func(op vfs.Op, _ string) error {
		if op == vfs.OpFileSync {
			syncs.Add(1)
		}
		return nil
	})
	tb := open(t, fsys, Options{Sync: true})
	var wg sync.WaitGroup
	start := make(chan struct{})
	for w := range 16 {
		wg.Go(func() {
			<-start
			for i := range 50 {
				if err := tb.Commit(Commit{Group: "g", Topic: "t", QueueID: int32(w), Offset: int64(i + 1)}); err != nil {
					t.Error(err)
				}
			}
		})
	}
	before := syncs.Load()
	close(start)
	wg.Wait()
	t.Logf("%d commits, %d fsyncs", 16*50, syncs.Load()-before)
	for w := range 16 {
		want(t, tb, "g", "t", int32(w), 50)
	}
}

// TestValidate: group names RocketMQ's table cannot hold, invalid topics, negative numbers and
// long member ids are refused; the names RocketMQ uses are taken.
func TestValidate(t *testing.T) {
	tb := open(t, vfs.NewMem(), Options{})
	for _, g := range []string{"", "a@b", "tab\there", "nl\n", "\xff\xfe", strings.Repeat("g", MaxGroupLen+1), "bell\a"} {
		if err := tb.Commit(Commit{Group: g, Topic: "T", Offset: 1}); !errors.Is(err, ErrInvalidGroup) {
			t.Fatalf("group %q: %v, want ErrInvalidGroup", g, err)
		}
	}
	for _, g := range []string{"g", "GID_orders-1", "with space", "grüße", "%DLQ%x", strings.Repeat("g", MaxGroupLen)} {
		commit(t, tb, g, "T", 0, 1)
	}
	for name, c := range map[string]Commit{
		"bad topic":       {Group: "g", Topic: "a/b"},
		"topic with @":    {Group: "g", Topic: "a@b"},
		"negative queue":  {Group: "g", Topic: "T", QueueID: -1},
		"negative offset": {Group: "g", Topic: "T", Offset: -1},
		"negative epoch":  {Group: "g", Topic: "T", Epoch: -1},
		"long member":     {Group: "g", Topic: "T", Member: strings.Repeat("m", MaxMemberLen+1)},
	} {
		if err := tb.Commit(c); !errors.Is(err, ErrInvalidCommit) {
			t.Fatalf("%s: %v, want ErrInvalidCommit", name, err)
		}
	}
}
