package verify

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/rocketstore/engine/engine"
	"github.com/rocketstore/engine/internal/store/checkpoint"
	"github.com/rocketstore/engine/internal/store/consumequeue"
	"github.com/rocketstore/engine/internal/store/indexfile"
	"github.com/rocketstore/engine/internal/store/meta"
	"github.com/rocketstore/engine/internal/vfs"
)

// damage is one way to break a store written by newStore, and what Verify must say about it.
type damage struct {
	name string
	// apply breaks the store and returns the problem Verify must report (kind, file, offset).
	apply func(t *testing.T, fsys *vfs.Mem, res []engine.Result) (Kind, string, int64)
	// keep is how many of the messages survive a repair (-1: all).
	keep func(res []engine.Result) int
}

func all([]engine.Result) int { return -1 }

func logEnd(res []engine.Result) int64 {
	last := res[len(res)-1]
	return last.PhysOffset + int64(last.Size)
}

func saveCheckpoint(t *testing.T, fsys vfs.FS, fn func(cp *checkpoint.Checkpoint)) {
	t.Helper()
	name := path.Join(testDir, checkpoint.FileName)
	cp, err := checkpoint.Load(fsys, name)
	if err != nil {
		t.Fatal(err)
	}
	fn(&cp)
	if err := checkpoint.Save(fsys, name, cp); err != nil {
		t.Fatal(err)
	}
}

func indexFiles(t *testing.T, fsys vfs.FS) []string {
	t.Helper()
	ents, err := fsys.ReadDir(path.Join(testDir, "index"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, path.Join(testDir, "index", e.Name))
	}
	return names
}

var damages = []damage{
	{
		name: "torn tail",
		apply: func(t *testing.T, fsys *vfs.Mem, res []engine.Result) (Kind, string, int64) {
			// The first 150 bytes of a record, written past the end, the rest lost.
			last, end := res[len(res)-1], logEnd(res)
			seg := end - end%testSegment
			patch(t, fsys, logFile(seg), func(b []byte) {
				src := b[last.PhysOffset-seg:]
				copy(b[end-seg:end-seg+150], src[:150])
			})
			return KindLogTorn, fmt.Sprintf("%020d", seg), end
		},
		keep: all,
	},
	{
		name: "corrupt sealed segment",
		apply: func(t *testing.T, fsys *vfs.Mem, res []engine.Result) (Kind, string, int64) {
			for _, r := range res {
				if r.PhysOffset > testSegment+1000 {
					patch(t, fsys, logFile(testSegment), func(b []byte) { b[r.PhysOffset-testSegment+100] ^= 0x10 })
					return KindLogCorrupt, fmt.Sprintf("%020d", testSegment), r.PhysOffset
				}
			}
			t.Fatal("no record in the second segment")
			return "", "", 0
		},
		keep: func(res []engine.Result) int {
			for i, r := range res {
				if r.PhysOffset > testSegment+1000 {
					return i
				}
			}
			return -1
		},
	},
	{
		name: "unit names the wrong record",
		apply: func(t *testing.T, fsys *vfs.Mem, res []engine.Result) (Kind, string, int64) {
			q := queueResults(res)["topic-0/0"]
			patchUnit(t, fsys, "topic-0", 0, 5, func(u *consumequeue.Unit) { u.Phys, u.Size = q[6].PhysOffset, q[6].Size })
			return KindCQUnit, "consumequeue/topic-0/0/", 5 * consumequeue.UnitSize
		},
		keep: all,
	},
	{
		name: "unit with the wrong tags code",
		apply: func(t *testing.T, fsys *vfs.Mem, res []engine.Result) (Kind, string, int64) {
			patchUnit(t, fsys, "topic-1", 0, 30, func(u *consumequeue.Unit) { u.TagsCode++ })
			return KindCQUnit, "consumequeue/topic-1/0/", 30 * consumequeue.UnitSize
		},
		keep: all,
	},
	{
		name: "missing unit",
		apply: func(t *testing.T, fsys *vfs.Mem, res []engine.Result) (Kind, string, int64) {
			q := queueResults(res)["topic-1/1"]
			last := q[len(q)-1]
			patchUnit(t, fsys, "topic-1", 1, last.QueueOffset, func(u *consumequeue.Unit) { *u = consumequeue.Unit{} })
			return KindCQMissing, "commitlog/", last.PhysOffset
		},
		keep: all,
	},
	{
		name: "stale unit past the end",
		apply: func(t *testing.T, fsys *vfs.Mem, res []engine.Result) (Kind, string, int64) {
			n := int64(len(queueResults(res)["topic-2/0"]))
			patchUnit(t, fsys, "topic-2", 0, n, func(u *consumequeue.Unit) {
				*u = consumequeue.Unit{Phys: logEnd(res) + 64, Size: 300, TagsCode: 7}
			})
			return KindCQPastEnd, "consumequeue/topic-2/0/", n * consumequeue.UnitSize
		},
		keep: all,
	},
	{
		name: "broken index chain",
		apply: func(t *testing.T, fsys *vfs.Mem, res []engine.Result) (Kind, string, int64) {
			name := indexFiles(t, fsys)[1]
			g := indexfile.Geometry{Slots: testSlots, Entries: testEntries}
			at := g.EntryOffset(10)
			patch(t, fsys, name, func(b []byte) { b[at+19] = 10 }) // prevIndex 10: a loop
			return KindIndexChain, path.Base(name), at
		},
		keep: all,
	},
	{
		name: "index entry with the wrong key hash",
		apply: func(t *testing.T, fsys *vfs.Mem, res []engine.Result) (Kind, string, int64) {
			name := indexFiles(t, fsys)[0]
			g := indexfile.Geometry{Slots: testSlots, Entries: testEntries}
			at := g.EntryOffset(3)
			patch(t, fsys, name, func(b []byte) { b[at+1] ^= 0x01 })
			return KindIndexEntry, path.Base(name), at
		},
		keep: all,
	},
	{
		name: "newest index file lost",
		apply: func(t *testing.T, fsys *vfs.Mem, res []engine.Result) (Kind, string, int64) {
			names := indexFiles(t, fsys)
			if err := fsys.Remove(names[len(names)-1]); err != nil {
				t.Fatal(err)
			}
			// The first record the remaining files do not index.
			g := indexfile.Geometry{Slots: testSlots, Entries: testEntries}
			indexed := int64(len(names)-1) * int64(g.Entries-1) / 3 // 3 keys a message
			return KindIndexMissing, "commitlog/", res[indexed].PhysOffset
		},
		keep: all,
	},
	{
		name: "consumequeue file of the wrong size",
		apply: func(t *testing.T, fsys *vfs.Mem, res []engine.Result) (Kind, string, int64) {
			name := cqFile("topic-0", 0, 0)
			if err := fsys.Remove(name); err != nil {
				t.Fatal(err)
			}
			f, err := fsys.Create(name)
			if err != nil {
				t.Fatal(err)
			}
			f.Write(make([]byte, 100))
			f.Close()
			return KindCQFile, path.Base(name), 0
		},
		keep: all,
	},
	{
		name: "checkpoint lost",
		apply: func(t *testing.T, fsys *vfs.Mem, res []engine.Result) (Kind, string, int64) {
			if err := fsys.Remove(path.Join(testDir, checkpoint.FileName)); err != nil {
				t.Fatal(err)
			}
			return KindCheckpoint, checkpoint.FileName, 0
		},
		keep: all,
	},
	{
		name: "checkpoint beyond the end",
		apply: func(t *testing.T, fsys *vfs.Mem, res []engine.Result) (Kind, string, int64) {
			saveCheckpoint(t, fsys, func(cp *checkpoint.Checkpoint) {
				cp.Ext.DurableOffset = logEnd(res) + 4096
				cp.Ext.DispatchedOffset = logEnd(res) + 4096
			})
			return KindCheckpoint, checkpoint.FileName, cpDurable
		},
		keep: all,
	},
	{
		name: "checkpoint dispatched inside a record",
		apply: func(t *testing.T, fsys *vfs.Mem, res []engine.Result) (Kind, string, int64) {
			saveCheckpoint(t, fsys, func(cp *checkpoint.Checkpoint) { cp.Ext.DispatchedOffset = res[100].PhysOffset + 10 })
			return KindCheckpoint, checkpoint.FileName, cpDispatched
		},
		keep: all,
	},
	{
		name: "checkpoint timestamp in the future",
		apply: func(t *testing.T, fsys *vfs.Mem, res []engine.Result) (Kind, string, int64) {
			saveCheckpoint(t, fsys, func(cp *checkpoint.Checkpoint) { cp.LogicsMsgTimestamp = res[len(res)-1].StoreTimestamp + 60_000 })
			return KindCheckpoint, checkpoint.FileName, cpLogics
		},
		keep: all,
	},
}

// TestDamageDetectedAndRepaired breaks a clean store in one way per case and checks that
// Verify reports it where it is, that Repair fixes it (the store then verifies clean, opens
// with engine.Open, keeps every message it should, and takes new ones), and that repairing
// again finds nothing to do.
func TestDamageDetectedAndRepaired(t *testing.T) {
	for _, d := range damages {
		t.Run(strings.ReplaceAll(d.name, " ", "_"), func(t *testing.T) {
			fsys, res := newStore(t, 300)
			kind, file, off := d.apply(t, fsys, res)
			r := mustVerify(t, fsys)
			requireProblem(t, r, kind, file, off)
			if r.Consistent() {
				t.Fatal("damaged store verified as consistent")
			}

			rep, err := Repair(context.Background(), options(fsys, testDir))
			if err != nil {
				t.Fatalf("repair: %v\n%s", err, repairText(rep))
			}
			if !rep.Needed || rep.After == nil {
				t.Fatalf("repair did nothing:\n%s", repairText(rep))
			}
			requirePlanMatches(t, rep)
			requireClean(t, rep.After)
			want := len(res)
			if k := d.keep(res); k >= 0 {
				want = k
				if rep.Cut == nil || rep.Cut.From != res[k].PhysOffset {
					t.Fatalf("cut %+v, want one at %d:\n%s", rep.Cut, res[k].PhysOffset, repairText(rep))
				}
			} else if kind != KindLogTorn && rep.Cut != nil {
				t.Fatalf("the log was cut for a problem of a derived file:\n%s", repairText(rep))
			}
			if got := rep.After.CommitLog.Records; got != int64(want) {
				t.Fatalf("%d records after repair, want %d:\n%s", got, want, repairText(rep))
			}
			if got := rep.After.ConsumeQueue.Units; got != int64(want) {
				t.Fatalf("%d units after repair, want %d:\n%s", got, want, repairText(rep))
			}
			t.Log(repairText(rep))

			// The engine opens it as after a clean stop, and it takes new messages.
			e, err := engine.Open(engineOptions(t, fsys, testDir))
			if err != nil {
				t.Fatalf("open after repair: %v", err)
			}
			if rec := e.Recovery(); !rec.CleanExit || rec.End != rep.After.CommitLog.End {
				t.Fatalf("recovery after repair: %+v", rec)
			}
			more := put(t, e, 10000, 40)
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			r = mustVerify(t, fsys)
			requireClean(t, r)
			if r.CommitLog.Records != int64(want+len(more)) {
				t.Fatalf("%d records after more puts, want %d", r.CommitLog.Records, want+len(more))
			}
			again, err := Repair(context.Background(), options(fsys, testDir))
			if err != nil || again.Needed {
				t.Fatalf("second repair: %v\n%s", err, repairText(again))
			}
		})
	}
}

func repairText(r *RepairReport) string {
	if r == nil {
		return "(no report)"
	}
	var b strings.Builder
	r.WriteText(&b)
	return b.String()
}

// TestRepairRefusesWhileLocked: an open engine holds the store's lock; Repair must not touch
// the store and must say why.
func TestRepairRefusesWhileLocked(t *testing.T) {
	fsys, _ := newStore(t, 50)
	e, err := engine.Open(engineOptions(t, fsys, testDir))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	rep, err := Repair(context.Background(), options(fsys, testDir))
	if !errors.Is(err, ErrNotRepairable) || !errors.Is(err, vfs.ErrLocked) || rep != nil {
		t.Fatalf("repair of a locked store: %v, %v", rep, err)
	}
	var inUse *meta.InUseError
	if !errors.As(err, &inUse) {
		t.Fatalf("error %v does not name the holder", err)
	}
	// Verify still runs next to the engine, and says an engine may be running.
	r := mustVerify(t, fsys)
	if !r.AbortPresent {
		t.Fatalf("verify did not see the abort marker:\n%s", dump(r))
	}
}

// TestSealedCorruptionFollowedBySegments: a bad record is corruption, not a torn tail, when
// valid segments follow it, even with no durable offset to go by; the report and the repair
// count what the later segments hold.
func TestSealedCorruptionFollowedBySegments(t *testing.T) {
	fsys, res := newStore(t, 300)
	saveCheckpoint(t, fsys, func(cp *checkpoint.Checkpoint) { cp.Ext.DurableOffset, cp.Ext.DispatchedOffset = 0, 0 })
	victim := res[5]
	patch(t, fsys, logFile(0), func(b []byte) { b[victim.PhysOffset+40] ^= 0x80 })
	r := mustVerify(t, fsys)
	p := requireProblem(t, r, KindLogCorrupt, fmt.Sprintf("%020d", 0), victim.PhysOffset)
	d := r.CommitLog.Drop
	var later int64
	segs := make(map[int64]bool)
	for _, x := range res {
		if x.PhysOffset >= testSegment {
			later++
			segs[x.PhysOffset/testSegment] = true
		}
	}
	if d == nil || !d.Sealed || d.LaterRecords != later || len(d.LaterSegments) != len(segs) || r.Verdict != VerdictCorrupt {
		t.Fatalf("drop %+v (want %d later records), verdict %s: %s", d, later, r.Verdict, p.Desc)
	}
	// The flipped byte is in BORNTIMESTAMP: only the whole-record CRC sees it, and RocketMQ's own
	// recovery keeps the record and those after it in its segment. Repair refuses to cut them
	// unless forced, and changes nothing.
	before := hashFiles(t, fsys, testDir)
	rep, err := Repair(context.Background(), options(fsys, testDir))
	if !errors.Is(err, ErrNotRepairable) || !strings.Contains(err.Error(), "--force-cut") || rep == nil ||
		rep.Plan == nil || rep.Plan.RocketMQKeeps == nil || rep.Plan.RocketMQKeeps.From != victim.PhysOffset || rep.Cut != nil {
		t.Fatalf("unforced repair: %v\n%s", err, repairText(rep))
	}
	requireSameFiles(t, before, hashFiles(t, fsys, testDir))
	opts := options(fsys, testDir)
	opts.ForceCut = true
	rep, err = Repair(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Cut == nil || !rep.Cut.Sealed || rep.Cut.LaterRecords != later || len(rep.Cut.Deleted) < len(segs) {
		t.Fatalf("cut %+v", rep.Cut)
	}
	text := repairText(rep)
	if !strings.Contains(text, "DATA LOSS") {
		t.Fatalf("a sealed cut is not reported as data loss:\n%s", text)
	}
	requireClean(t, rep.After)
	if rep.After.CommitLog.Records != 5 {
		t.Fatalf("%d records kept, want 5", rep.After.CommitLog.Records)
	}
}

// TestRepairAfterCrash: crash images of an engine stopped abruptly (unsynced pages lost, kept
// or torn at random) are repaired into stores that verify clean, open, and keep every message
// acknowledged in sync mode.
func TestRepairAfterCrash(t *testing.T) {
	seeds := 20
	if testing.Short() {
		seeds = 5
	}
	for seed := range uint64(seeds) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 3))
			fsys := vfs.NewMem()
			opts := engineOptions(t, fsys, testDir)
			e, err := engine.Open(opts)
			if err != nil {
				t.Fatal(err)
			}
			acked := put(t, e, 0, 50+rng.IntN(300))
			if err := e.Abort(); err != nil {
				t.Fatal(err)
			}
			img := fsys.CrashImage(rng, vfs.CrashOptions{UnsyncedDirChanges: rng.IntN(2) == 0})
			rep, err := Repair(context.Background(), options(img, testDir))
			if err != nil {
				t.Fatalf("repair: %v\n%s", err, repairText(rep))
			}
			requirePlanMatches(t, rep)
			after := rep.After
			if after == nil {
				after = rep.Before
			}
			if !after.Consistent() {
				t.Fatalf("%s", repairText(rep))
			}
			if after.CommitLog.Records < int64(len(acked)) {
				t.Fatalf("%d records after repair, %d were acked:\n%s", after.CommitLog.Records, len(acked), repairText(rep))
			}
			opts.FS = img
			e, err = engine.Open(opts)
			if err != nil {
				t.Fatalf("open after repair: %v", err)
			}
			for _, a := range acked[len(acked)-3:] {
				got, err := e.Get(context.Background(), engine.GetRequest{Topic: a.Topic, QueueID: a.QueueID, Offset: a.QueueOffset, Max: 1})
				if err != nil || len(got.Messages) != 1 || got.Messages[0].PhysicalOffset != a.PhysOffset {
					t.Fatalf("acked %s/%d@%d at %d: %+v, %v", a.Topic, a.QueueID, a.QueueOffset, a.PhysOffset, got, err)
				}
			}
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestRepairRefusesLogLayout: CommitLog files that are not a sequence of whole segments are
// for a person to sort out; Repair changes nothing.
func TestRepairRefusesLogLayout(t *testing.T) {
	fsys, _ := newStore(t, 200)
	name := logFile(testSegment)
	data, err := fsys.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := fsys.Remove(name); err != nil {
		t.Fatal(err)
	}
	r := mustVerify(t, fsys)
	requireProblem(t, r, KindLogFile, fmt.Sprintf("%020d", 2*testSegment), 0) // does not follow
	if r.Verdict != VerdictCorrupt {
		t.Fatalf("verdict %s", r.Verdict)
	}
	rep, err := Repair(context.Background(), options(fsys, testDir))
	if !errors.Is(err, ErrNotRepairable) || rep == nil || rep.Cut != nil {
		t.Fatalf("repair: %v, %+v", err, rep)
	}
	// Put back, the store is whole again: nothing was changed.
	f, err := fsys.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(data)
	f.Close()
	requireClean(t, mustVerify(t, fsys))
}

// TestEmptyLastSegmentIsNoProblem: a zero-length last segment is a creation cut short, which
// the engine deletes when it opens the store.
func TestEmptyLastSegmentIsNoProblem(t *testing.T) {
	fsys, _ := newStore(t, 100)
	ents, _ := fsys.ReadDir(path.Join(testDir, "commitlog"))
	last := ents[len(ents)-1].Name
	base, _ := strconv.ParseInt(last, 10, 64)
	f, err := fsys.Create(logFile(base + testSegment))
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	r := mustVerify(t, fsys)
	requireClean(t, r)
	if len(r.Notes) == 0 || !strings.Contains(strings.Join(r.Notes, " "), "is empty") {
		t.Fatalf("no note of the empty segment:\n%s", dump(r))
	}
	e, err := engine.Open(engineOptions(t, fsys, testDir))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestNotAStore(t *testing.T) {
	fsys := vfs.NewMem()
	if _, err := Verify(context.Background(), options(fsys, "/nothing")); !errors.Is(err, ErrNoStore) {
		t.Fatalf("missing directory: %v", err)
	}
	if err := fsys.MkdirAll("/empty"); err != nil {
		t.Fatal(err)
	}
	if _, err := Verify(context.Background(), options(fsys, "/empty")); !errors.Is(err, ErrNoStore) {
		t.Fatalf("empty directory: %v", err)
	}
	if _, err := Repair(context.Background(), options(fsys, "/empty")); !errors.Is(err, ErrNoStore) {
		t.Fatalf("repair of an empty directory: %v", err)
	}
	if _, err := fsys.ReadDir("/empty"); err != nil {
		t.Fatal(err)
	}
	if ents, _ := fsys.ReadDir("/empty"); len(ents) != 0 {
		t.Fatalf("verify created %v", ents)
	}
}

// TestIndexEndingInsideARecord: an index file filled up in the middle of a record's keys, and
// the file that held the rest is lost. Verify must see the record half indexed, and repair must
// index it whole again.
func TestIndexEndingInsideARecord(t *testing.T) {
	fsys := vfs.NewMem()
	eopts := engineOptions(t, fsys, testDir)
	eopts.IndexEntries = 258 // 257 keys a file: 3 keys a message split over files
	e, err := engine.Open(eopts)
	if err != nil {
		t.Fatal(err)
	}
	res := put(t, e, 0, 150)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	opts := options(fsys, testDir)
	opts.IndexEntries = eopts.IndexEntries
	names := indexFiles(t, fsys)
	if len(names) != 2 {
		t.Fatalf("%d index files", len(names))
	}
	if err := fsys.Remove(names[1]); err != nil {
		t.Fatal(err)
	}
	split := res[257/3] // its first two keys are in the first file, the third was in the second
	r, err := Verify(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	p := requireProblem(t, r, KindIndexMissing, "commitlog/", split.PhysOffset)
	if !strings.Contains(p.Desc, "middle of the keys") {
		t.Fatalf("problem %q", p.Desc)
	}
	rep, err := Repair(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	requireClean(t, rep.After)
	e, err = engine.Open(eopts)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	for _, key := range []string{fmt.Sprintf("id-%08d", 257/3), fmt.Sprintf("key-%d", 257/3), fmt.Sprintf("order-%d", 257/3%7)} {
		found, err := e.Query(context.Background(), engine.QueryRequest{Topic: split.Topic, Key: key})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(found, func(m engine.ReadMessage) bool { return m.PhysicalOffset == split.PhysOffset }) {
			t.Fatalf("key %s of the split record not found after repair", key)
		}
	}
}

// TestRepairQueueMissingItsHead: a queue whose first file is gone starts at the next file, as
// after retention, but the CommitLog still holds the records: they lack units below the queue's
// start, where none can be appended, so repair builds the queue anew.
func TestRepairQueueMissingItsHead(t *testing.T) {
	fsys, res := newStore(t, 600) // 100 units a queue: 2 files
	if err := fsys.Remove(cqFile("topic-0", 0, 0)); err != nil {
		t.Fatal(err)
	}
	q := queueResults(res)["topic-0/0"]
	r := mustVerify(t, fsys)
	p := requireProblem(t, r, KindCQMissing, "commitlog/", q[0].PhysOffset)
	if !strings.Contains(p.Desc, fmt.Sprintf("%d records", testUnits)) {
		t.Fatalf("problem %s", p.Desc)
	}
	rep, err := Repair(context.Background(), options(fsys, testDir))
	if err != nil {
		t.Fatal(err)
	}
	requireClean(t, rep.After)
	if len(rep.Queues) != 1 || !rep.Queues[0].Rebuilt || rep.Queues[0].Added != int64(len(q)) {
		t.Fatalf("queues %+v", rep.Queues)
	}
}
