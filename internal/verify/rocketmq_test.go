package verify

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path"
	"strings"
	"testing"

	"github.com/rocketstore/engine/engine"
	"github.com/rocketstore/engine/internal/store/checkpoint"
	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/internal/store/meta"
	"github.com/rocketstore/engine/internal/vfs"
)

// TestRocketMQFixtures: the stores RocketMQ 5.3.3 wrote (no __CRC32#, its checkpoint) verify
// clean, and repair finds nothing to do and changes no byte.
func TestRocketMQFixtures(t *testing.T) {
	for _, f := range []struct {
		name    string
		records int64
	}{{"store-5000", 5000}, {"edge", 9}} {
		t.Run(f.name, func(t *testing.T) {
			dir := fixtureStore(t, f.name)
			opts := fixtureOptions(dir)
			before := hashFiles(t, vfs.Default, dir)
			r, err := Verify(context.Background(), opts)
			if err != nil {
				t.Fatal(err)
			}
			requireClean(t, r)
			if r.CommitLog.Records != f.records || r.CommitLog.Tail != "clean" || r.CommitLog.PropCRC != "where present" {
				t.Fatalf("commitlog %+v", r.CommitLog)
			}
			rep := mustRepair(t, opts)
			if rep.Needed || rep.Plan != nil || rep.Cut != nil {
				t.Fatalf("repair of a store RocketMQ wrote:\n%s", repairText(rep))
			}
			requireSameFiles(t, before, hashFiles(t, vfs.Default, dir))
		})
	}
}

// rocketMQAppended is an engine store that RocketMQ's broker then opened and appended to: the
// edge fixture's records, byte for byte, stamped where they went, with their units and index
// entries. The checkpoint is the engine's (its extension says the engine wrote __CRC32# on
// every record from 0 up to its durable offset); rewrite says RocketMQ also rewrote its bytes
// 0-39 at shutdown.
type rocketMQAppended struct {
	fsys        *vfs.Mem
	engineEnd   int64   // where the engine's records end (its durable offset)
	at          []int64 // where RocketMQ's records went
	end         int64
	records     int64
	lastTS      int64
	engineCount int
}

func newRocketMQAppended(t *testing.T, n int, rewrite bool) *rocketMQAppended {
	fsys, res := newStore(t, n)
	s := &rocketMQAppended{fsys: fsys, engineEnd: logEnd(res), engineCount: len(res)}
	recs := edgeRecords(t)
	s.lastTS = 1_900_000_000_000
	s.at, s.end = appendAsRocketMQ(t, fsys, recs, s.lastTS-int64(len(recs)), true)
	s.lastTS--
	dispatchAsRocketMQ(t, fsys, s.engineEnd, s.end)
	if rewrite {
		rewriteCheckpointAsRocketMQ(t, fsys, s.lastTS, s.at[len(s.at)-1])
	}
	s.records = int64(n + len(recs))
	return s
}

// TestRocketMQAppendedToEngineStore: RocketMQ's records after the engine's, RocketMQ having
// rewritten the checkpoint as it does within a second of its start (its first ConsumeQueue
// flush is a thorough one), are valid: verify finds nothing wrong with the CommitLog, repair
// keeps every record, and the engine's recovery keeps them, after a clean stop and after a
// crash, and again after the engine wrote more.
func TestRocketMQAppendedToEngineStore(t *testing.T) {
	s := newRocketMQAppended(t, 300, true)
	r := mustVerify(t, s.fsys)
	for k := range r.Counts {
		if !strings.HasPrefix(string(k), "checkpoint") {
			t.Fatalf("problems:\n%s", dump(r))
		}
	}
	if r.CommitLog.Records != s.records || r.CommitLog.End != s.end || r.ConsumeQueue.Units != s.records-1 { // a prepared message has none
		t.Fatalf("records %d, end %d, units %d; want %d, %d:\n%s", r.CommitLog.Records, r.CommitLog.End,
			r.ConsumeQueue.Units, s.records, s.end, dump(r))
	}
	img := s.fsys.CrashImage(nil, vfs.CrashOptions{SyncedOnly: true})
	rep := mustRepair(t, options(s.fsys, testDir))
	if rep.Cut != nil || (rep.Plan != nil && len(rep.Plan.Removals) > 0) {
		t.Fatalf("repair removed something:\n%s", repairText(rep))
	}
	if rep.After != nil {
		requireClean(t, rep.After)
		if rep.After.CommitLog.Records != s.records {
			t.Fatalf("%d records after repair, want %d", rep.After.CommitLog.Records, s.records)
		}
	}

	// The engine's recovery keeps them too, after a clean stop (img) ...
	e, err := engine.Open(engineOptions(t, img, testDir))
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	if rec := e.Recovery(); rec.End != s.end {
		t.Fatalf("recovery ends at %d, want %d: %+v", rec.End, s.end, rec)
	}
	// ... and after it wrote more and crashed: the new checkpoint claims __CRC32# only
	// from the end of RocketMQ's records on.
	more := put(t, e, 10000, 50)
	if err := e.Abort(); err != nil {
		t.Fatal(err)
	}
	cp, err := checkpoint.Load(img, path.Join(testDir, checkpoint.FileName))
	if err != nil {
		t.Fatal(err)
	}
	if cp.Ext.PropCRCFrom != s.end {
		t.Fatalf("checkpoint claims __CRC32# from %d, RocketMQ's records end at %d", cp.Ext.PropCRCFrom, s.end)
	}
	crashed := img.CrashImage(rand.New(rand.NewPCG(1, 2)), vfs.CrashOptions{})
	e, err = engine.Open(engineOptions(t, crashed, testDir))
	if err != nil {
		t.Fatalf("open after the crash: %v", err)
	}
	if rec := e.Recovery(); rec.End < logEnd(more) {
		t.Fatalf("recovery ends at %d, the acked records at %d: %+v", rec.End, logEnd(more), rec)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	r = mustVerify(t, crashed)
	requireClean(t, r)
	if r.CommitLog.Records != s.records+int64(len(more)) {
		t.Fatalf("%d records, want %d", r.CommitLog.Records, s.records+int64(len(more)))
	}
}

// TestRocketMQAppendedWithoutItsCheckpoint: records without __CRC32# past the engine's durable
// offset under a checkpoint RocketMQ has not rewritten. While the checkpoint says the engine
// wrote last, only the engine can have written there, and it writes __CRC32# on every record:
// such a record is one torn before its property (its first page on disk, its second not), a
// phantom if kept. So verify reports a torn tail there, and says that RocketMQ's recovery keeps
// the records; repair refuses to cut them without ForceCut; the engine's recovery cuts them.
// (RocketMQ's broker rewrites the checkpoint within a second of its start; only one that
// appended and died sooner leaves this.)
func TestRocketMQAppendedWithoutItsCheckpoint(t *testing.T) {
	s := newRocketMQAppended(t, 300, false)
	img := s.fsys.CrashImage(nil, vfs.CrashOptions{SyncedOnly: true})
	r := mustVerify(t, s.fsys)
	p := requireProblem(t, r, KindLogTorn, "commitlog", s.engineEnd)
	if !strings.Contains(p.Desc, "property missing") || !strings.Contains(p.Desc, "RocketMQ's own recovery") ||
		r.CommitLog.PropCRCFrom != 0 || r.CommitLog.PropCRCTo != math.MaxInt64 {
		t.Fatalf("verify:\n%s", dump(r))
	}
	if _, err := Repair(context.Background(), options(s.fsys, testDir)); !errors.Is(err, ErrNotRepairable) {
		t.Fatalf("repair without ForceCut: %v", err)
	}
	e, err := engine.Open(engineOptions(t, img, testDir))
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	if rec := e.Recovery(); rec.End != s.engineEnd || !strings.Contains(rec.Corrupt, "property missing") {
		t.Fatalf("recovery: %+v, want the end at the engine's durable offset %d", rec, s.engineEnd)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	requireClean(t, mustVerify(t, img))
}

// TestTornTailAfterRocketMQRecords: a record torn after RocketMQ's records is cut exactly at
// the tear, by repair and by the engine's recovery, and nothing before it is removed.
func TestTornTailAfterRocketMQRecords(t *testing.T) {
	// A tear before PROPERTIESLENGTH is seen (by the body CRC or the lengths); one inside the
	// properties of a record without __CRC32# is seen by nobody, RocketMQ included. The record
	// without properties ends in its topic and a zero length, so a tear there is not seen either.
	var bodied [][]byte
	for _, r := range edgeRecords(t) {
		if v, _ := commitlog.Parse(r); len(v.Properties()) > 0 {
			bodied = append(bodied, r)
		}
	}
	for i, keep := range []int{8, 40, 90, -1} {
		t.Run(fmt.Sprint(keep), func(t *testing.T) {
			s := newRocketMQAppended(t, 300, true)
			src := bodied[i%len(bodied)]
			v, _ := commitlog.Parse(src)
			if keep < 0 {
				keep = len(src) - len(v.Properties()) - len(v.Topic()) - 4 // into the body or its length
			}
			tear := s.end
			seg := tear - tear%testSegment
			if !commitlog.Fits(len(src), int(testSegment-(tear-seg))) {
				t.Skip("the torn record would go to the next segment") // never with these sizes
			}
			patch(t, s.fsys, logFile(seg), func(b []byte) {
				copy(b[tear-seg:], src[:keep])
				binary.BigEndian.PutUint64(b[tear-seg+commitlog.PosPhysicalOffset:], uint64(tear))
			})
			img := s.fsys.CrashImage(nil, vfs.CrashOptions{SyncedOnly: true})

			r := mustVerify(t, s.fsys)
			requireProblem(t, r, KindLogTorn, fmt.Sprintf("%020d", seg), tear)
			if r.CommitLog.Records != s.records || r.CommitLog.Drop.Sealed {
				t.Fatalf("%d records before the tear, want %d:\n%s", r.CommitLog.Records, s.records, dump(r))
			}
			rep := mustRepair(t, options(s.fsys, testDir))
			if rep.Cut == nil || rep.Cut.From != tear || rep.Cut.End != tear || rep.Plan.RocketMQKeeps != nil {
				t.Fatalf("cut %+v, want at %d:\n%s", rep.Cut, tear, repairText(rep))
			}
			if len(rep.Plan.Removals) != 1 || rep.Plan.Removals[0].From != tear || rep.Plan.Removals[0].Part != "commitlog" {
				t.Fatalf("plan %+v", rep.Plan.Removals)
			}
			requireClean(t, rep.After)
			if rep.After.CommitLog.Records != s.records {
				t.Fatalf("%d records after repair, want %d", rep.After.CommitLog.Records, s.records)
			}

			e, err := engine.Open(engineOptions(t, img, testDir))
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			if rec := e.Recovery(); rec.End != tear || rec.Tail != "corrupt" {
				t.Fatalf("recovery: %+v, want the end at %d", rec, tear)
			}
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			requireClean(t, mustVerify(t, img))
		})
	}
}

// TestRocketMQCrashImages: RocketMQ appends to an engine store and the machine stops before its
// pages are synced. On every crash image, the engine's recovery and repair end the log at the
// same place verify says it ends, that place is at least the synced end, and the result
// verifies clean.
func TestRocketMQCrashImages(t *testing.T) {
	recs := edgeRecords(t)
	seeds := 12
	if testing.Short() {
		seeds = 4
	}
	for seed := range uint64(seeds) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			s := newRocketMQAppended(t, 100+int(seed)*37, true)
			// A second batch of RocketMQ's records, never synced: their queue offsets follow
			// the first batch's.
			inQueue := make(map[string]int64)
			key := func(v commitlog.View) string { return fmt.Sprintf("%s/%d", v.Topic(), v.QueueID()) }
			for _, r := range recs {
				if v, _ := commitlog.Parse(r); v.TransactionType() == commitlog.TxNotType {
					inQueue[key(v)]++
				}
			}
			var more [][]byte
			for _, r := range recs {
				v, _ := commitlog.Parse(r)
				c := append([]byte(nil), r...)
				binary.BigEndian.PutUint64(c[commitlog.PosQueueOffset:], uint64(v.QueueOffset()+inQueue[key(v)]))
				more = append(more, c)
			}
			_, _ = appendAsRocketMQ(t, s.fsys, more, s.lastTS+100, false)
			rng := rand.New(rand.NewPCG(seed, 7))
			img := s.fsys.CrashImage(rng, vfs.CrashOptions{GarbageProb: 0.3})
			twin := img.CrashImage(nil, vfs.CrashOptions{SyncedOnly: true})

			r := mustVerify(t, img)
			end := r.CommitLog.End
			if end < s.end || r.Counts[KindLogCorrupt] > 0 {
				t.Fatalf("verify ends the log at %d, below the synced %d:\n%s", end, s.end, dump(r))
			}
			rep := mustRepair(t, options(img, testDir))
			requirePlanMatches(t, rep)
			after := rep.After
			if after == nil {
				after = rep.Before
			}
			requireClean(t, after)
			if after.CommitLog.End != end {
				t.Fatalf("repair ends the log at %d, verify at %d:\n%s", after.CommitLog.End, end, repairText(rep))
			}
			e, err := engine.Open(engineOptions(t, twin, testDir))
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			if rec := e.Recovery(); rec.End != end {
				t.Fatalf("recovery ends the log at %d, verify at %d: %+v", rec.End, end, rec)
			}
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			requireClean(t, mustVerify(t, twin))
		})
	}
}

// TestRepairPlanBeforeChange: repair tells its plan before it changes anything; a dry run
// tells it and changes nothing; the repair then removes exactly what the plan said.
func TestRepairPlanBeforeChange(t *testing.T) {
	fsys, res := newStore(t, 300)
	// A torn tail (the damages table's first case) and a unit past the end.
	kind, file, off := damages[0].apply(t, fsys, res)
	saveCheckpoint(t, fsys, func(cp *checkpoint.Checkpoint) {}) // unchanged; the store has one
	r := mustVerify(t, fsys)
	requireProblem(t, r, kind, file, off)
	before := hashFiles(t, fsys, testDir)

	opts := options(fsys, testDir)
	opts.DryRun = true
	var told *Plan
	opts.OnPlan = func(_ *Report, p *Plan) { told = p }
	rep := mustRepair(t, opts)
	if !rep.DryRun || told == nil || rep.Plan != told || rep.Cut != nil || rep.After != nil {
		t.Fatalf("dry run:\n%s", repairText(rep))
	}
	requireSameFiles(t, before, hashFiles(t, fsys, testDir))
	// The engine's allocator may or may not have prepared the next segment before the store was
	// closed (it runs ahead on its own goroutine): an empty segment past the cut goes too.
	var cuts []Removal
	for _, r := range told.Removals {
		if r.Part == "commitlog" && r.Whole && r.Count == 0 && r.From > off {
			continue
		}
		cuts = append(cuts, r)
	}
	if len(cuts) != 1 || cuts[0].From != off || cuts[0].Part != "commitlog" || cuts[0].Reason == "" {
		t.Fatalf("plan %+v", told.Removals)
	}
	var b strings.Builder
	if err := rep.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	if text := b.String(); !strings.Contains(text, "repair plan") || !strings.Contains(text, fmt.Sprintf("[%d, ", off)) ||
		!strings.Contains(text, "dry run, nothing was changed") {
		t.Fatalf("dry run text:\n%s", text)
	}

	opts.DryRun = false
	changed := false
	opts.OnPlan = func(_ *Report, p *Plan) {
		told = p
		changed = fmt.Sprint(hashFiles(t, fsys, testDir)) != fmt.Sprint(before)
	}
	rep = mustRepair(t, opts)
	if changed {
		t.Fatal("the store changed before the plan was told")
	}
	if rep.Cut == nil || rep.Cut.From != told.Removals[0].From || rep.Cut.To != told.Removals[0].To || rep.Cut.Records != told.Removals[0].Count {
		t.Fatalf("cut %+v, plan %+v", rep.Cut, told.Removals)
	}
	requireClean(t, rep.After)
}

// TestPropCRCNameDamage: where the checkpoint says the engine wrote __CRC32# on every record,
// a record whose property's name is damaged does not pass for one without it: verify reports
// corruption in sealed data and the engine's recovery refuses to start, on the same record.
// RocketMQ's own recovery would keep it (it checks the body CRC only), so repair cuts there
// only with ForceCut.
func TestPropCRCNameDamage(t *testing.T) {
	fsys, res := newStore(t, 200)
	victim := res[120]
	seg := victim.PhysOffset - victim.PhysOffset%testSegment
	at := victim.PhysOffset - seg + int64(victim.Size) - int64(commitlog.PropCRCLen) + int64(len("__CRC3"))
	patch(t, fsys, logFile(seg), func(b []byte) { b[at] = '3' }) // "__CRC33#"
	// As after a crash with dispatch behind: recovery scans from res[100] on.
	saveCheckpoint(t, fsys, func(cp *checkpoint.Checkpoint) { cp.Ext.DispatchedOffset = res[100].PhysOffset })
	if err := meta.CreateAbort(fsys, testDir, 1); err != nil {
		t.Fatal(err)
	}

	r := mustVerify(t, fsys)
	p := requireProblem(t, r, KindLogCorrupt, fmt.Sprintf("%020d", seg), victim.PhysOffset)
	if !strings.Contains(p.Desc, "property missing") || !strings.Contains(p.Desc, "RocketMQ's own recovery") {
		t.Fatalf("problem %s", p.Desc)
	}
	if _, err := engine.Open(engineOptions(t, fsys.CrashImage(nil, vfs.CrashOptions{SyncedOnly: true}), testDir)); !errors.Is(err, commitlog.ErrSealedCorrupt) {
		t.Fatalf("open: %v, want ErrSealedCorrupt", err)
	}
	before := hashFiles(t, fsys, testDir)
	rep, err := Repair(context.Background(), options(fsys, testDir))
	if !errors.Is(err, ErrNotRepairable) || rep.Plan == nil || rep.Plan.RocketMQKeeps == nil || rep.Plan.RocketMQKeeps.From != victim.PhysOffset {
		t.Fatalf("unforced repair: %v\n%s", err, repairText(rep))
	}
	requireSameFiles(t, before, hashFiles(t, fsys, testDir))
	opts := options(fsys, testDir)
	opts.ForceCut = true
	rep = mustRepair(t, opts)
	if rep.Cut == nil || rep.Cut.From != victim.PhysOffset || rep.After.CommitLog.Records != 120 {
		t.Fatalf("forced repair:\n%s", repairText(rep))
	}
	requireClean(t, rep.After)
}
