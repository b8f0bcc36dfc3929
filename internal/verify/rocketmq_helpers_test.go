package verify

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rocketstore/engine/internal/rmqfixture"
	"github.com/rocketstore/engine/internal/store/checkpoint"
	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/internal/store/consumequeue"
	"github.com/rocketstore/engine/internal/store/derive"
	"github.com/rocketstore/engine/internal/store/indexfile"
	"github.com/rocketstore/engine/internal/vfs"
)

// hashFiles hashes every file below dir.
func hashFiles(t testing.TB, fsys vfs.FS, dir string) map[string][32]byte {
	t.Helper()
	out := make(map[string][32]byte)
	var walk func(d string)
	walk = func(d string) {
		ents, err := fsys.ReadDir(d)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			p := path.Join(d, e.Name)
			if e.IsDir {
				walk(p)
				continue
			}
			b, err := fsys.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			out[p] = sha256.Sum256(b)
		}
	}
	walk(dir)
	return out
}

func requireSameFiles(t testing.TB, before, after map[string][32]byte) {
	t.Helper()
	for name, h := range before {
		if g, ok := after[name]; !ok {
			t.Errorf("%s was removed", name)
		} else if g != h {
			t.Errorf("%s changed", name)
		}
	}
	for name := range after {
		if _, ok := before[name]; !ok {
			t.Errorf("%s was created", name)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
}

// fixtureStore copies a store RocketMQ wrote into a temporary directory.
func fixtureStore(t testing.TB, name string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	rmqfixture.Copy(t, name, dir)
	return dir
}

func fixtureOptions(dir string) Options {
	return Options{Dir: dir, CommitLogFileSize: rmqfixture.CommitLogSize, ConsumeQueueUnits: rmqfixture.CQUnits,
		IndexSlots: rmqfixture.IndexSlots, IndexEntries: rmqfixture.IndexEntries}
}

// edgeRecords are the records of the edge fixture, byte for byte as RocketMQ wrote them: IPv6
// hosts, flag and reconsume times, no properties, a V2 topic, a compressed body, a prepared
// transaction, none with __CRC32#, properties in RocketMQ's order.
func edgeRecords(t testing.TB) [][]byte {
	t.Helper()
	seg, err := os.ReadFile(filepath.Join(rmqfixture.Dir(t), "edge", "commitlog", "00000000000000000000"))
	if err != nil {
		t.Fatal(err)
	}
	var recs [][]byte
	if _, tail, err := commitlog.Scan(seg, 0, commitlog.Check{}, func(_ int, v commitlog.View) error {
		recs = append(recs, bytes.Clone(v.Bytes()))
		return nil
	}); err != nil || tail != commitlog.TailClean || len(recs) != 9 {
		t.Fatalf("edge fixture: %d records, %v, %v", len(recs), tail, err)
	}
	var flags int32
	for _, r := range recs {
		v, _ := commitlog.Parse(r)
		flags |= v.SysFlag()
		if v.HasPropCRC() {
			t.Fatalf("an edge record has __CRC32#")
		}
	}
	if want := commitlog.FlagBornHostV6 | commitlog.FlagStoreHostV6 | commitlog.FlagCompressed | commitlog.TxPrepared; flags&want != want {
		t.Fatalf("edge fixture sysflags %#x lack %#x", flags, want)
	}
	return recs
}

// appendAsRocketMQ appends recs to the CommitLog of the store at testDir as RocketMQ's writer
// does (its bytes, with the queue offset, physical offset and store timestamp stamped, no
// __CRC32#, a blank filler where a segment is full), syncs them when sync, and returns where
// each went and the log's new end.
func appendAsRocketMQ(t testing.TB, fsys vfs.FS, recs [][]byte, ts int64, sync bool) ([]int64, int64) {
	t.Helper()
	l, err := commitlog.OpenLog(commitlog.LogOptions{FS: fsys, Dir: path.Join(testDir, "commitlog"), FileSize: testSegment})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := l.Recover(commitlog.RecoverOptions{}); err != nil {
		t.Fatal(err)
	}
	var at []int64
	for i, r := range recs {
		v, err := commitlog.Parse(r)
		if err != nil {
			t.Fatal(err)
		}
		phys, err := l.Append(r, v.QueueOffset(), ts+int64(i), false)
		if err != nil {
			t.Fatal(err)
		}
		at = append(at, phys)
	}
	if sync {
		if err := l.Flush(l.MaxOffset()); err != nil {
			t.Fatal(err)
		}
	}
	return at, l.MaxOffset()
}

// dispatchAsRocketMQ builds the ConsumeQueue units and index entries of the records in
// [from, to), as RocketMQ's reput does after it appends them, and flushes them.
func dispatchAsRocketMQ(t testing.TB, fsys vfs.FS, from, to int64) {
	t.Helper()
	l, err := commitlog.OpenLog(commitlog.LogOptions{FS: fsys, Dir: path.Join(testDir, "commitlog"), FileSize: testSegment, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	cq, err := consumequeue.Open(consumequeue.Options{FS: fsys, Root: testDir, UnitsPerFile: testUnits})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cq.Load(); err != nil {
		t.Fatal(err)
	}
	if _, err := cq.RecoverAll(); err != nil {
		t.Fatal(err)
	}
	index, err := indexfile.Open(indexfile.Options{FS: fsys, Dir: path.Join(testDir, "index"),
		Geometry: indexfile.Geometry{Slots: testSlots, Entries: testEntries}})
	if err != nil {
		t.Fatal(err)
	}
	b := derive.NewBuilder(cq, index, nil)
	if _, err := l.Each(from, to, commitlog.Check{}, b.Apply); err != nil {
		t.Fatal(err)
	}
	if err := cq.FlushAll(0); err != nil {
		t.Fatal(err)
	}
	if err := index.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := index.Close(); err != nil {
		t.Fatal(err)
	}
	if err := cq.Close(); err != nil {
		t.Fatal(err)
	}
}

// rewriteCheckpointAsRocketMQ does to the checkpoint what RocketMQ's shutdown does (the
// fixture checkpoint/after-rocketmq): it rewrites bytes 0-39 (here the timestamps and
// confirmPhyOffset) and leaves the rest as it was.
func rewriteCheckpointAsRocketMQ(t testing.TB, fsys vfs.FS, ts, confirm int64) {
	t.Helper()
	name := path.Join(testDir, checkpoint.FileName)
	b, err := fsys.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	b = slices.Clone(b)
	be := binary.BigEndian
	be.PutUint64(b[0:], uint64(ts))
	be.PutUint64(b[8:], uint64(ts))
	be.PutUint64(b[32:], uint64(confirm))
	f, err := fsys.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func mustRepair(t testing.TB, opts Options) *RepairReport {
	t.Helper()
	rep, err := Repair(context.Background(), opts)
	if err != nil {
		t.Fatalf("repair: %v\n%s", err, repairText(rep))
	}
	return rep
}

// requirePlanMatches checks that the repair removed exactly what its plan said.
func requirePlanMatches(t testing.TB, rep *RepairReport) {
	t.Helper()
	if !rep.Needed {
		return
	}
	p := rep.Plan
	if p == nil {
		t.Fatalf("a repair without a plan:\n%s", repairText(rep))
	}
	var segs, index []string
	queues := make(map[string]Removal)
	var cut *Removal
	for _, r := range p.Removals {
		switch {
		case r.Part == "commitlog" && r.Whole:
			segs = append(segs, r.File)
		case r.Part == "commitlog":
			cut = &r
		case r.Part == "consumequeue":
			queues[strings.TrimPrefix(r.File, "consumequeue/")] = r
		default:
			index = append(index, r.File)
		}
	}
	if c := rep.Cut; (c == nil) != (cut == nil && len(segs) == 0) ||
		(cut != nil && (c.From != cut.From || c.To != cut.To || c.Records != cut.Count)) {
		t.Fatalf("cut %+v, plan %+v:\n%s", rep.Cut, p.Removals, repairText(rep))
	}
	if rep.Cut != nil && !slices.Equal(slices.Sorted(slices.Values(rep.Cut.Deleted)), slices.Sorted(slices.Values(segs))) {
		t.Fatalf("segments deleted %v, plan %v", rep.Cut.Deleted, segs)
	}
	for _, q := range rep.Queues {
		r, ok := queues[q.Queue]
		switch {
		case q.Dropped == 0 && !q.Rebuilt:
		case !ok:
			t.Fatalf("queue %s changed (%+v) without a plan:\n%s", q.Queue, q, repairText(rep))
		case r.Whole != q.Rebuilt || (!q.Unreadable && r.Count != q.Dropped):
			t.Fatalf("queue %s: %+v, plan %+v", q.Queue, q, r)
		}
		delete(queues, q.Queue)
	}
	if len(queues) > 0 {
		t.Fatalf("planned queue removals not done: %+v", queues)
	}
	if !slices.Equal(slices.Sorted(slices.Values(rep.IndexDeleted)), slices.Sorted(slices.Values(index))) {
		t.Fatalf("index files deleted %v, plan %v:\n%s", rep.IndexDeleted, index, repairText(rep))
	}
}
