package verify

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path"
	"strings"
	"testing"

	"github.com/rocketstore/engine/engine"
	"github.com/rocketstore/engine/internal/store/consumequeue"
	"github.com/rocketstore/engine/internal/vfs"
)

func TestCleanStoreVerifies(t *testing.T) {
	fsys, res := newStore(t, 600)
	r := mustVerify(t, fsys)
	requireClean(t, r)
	t.Log(dump(r))
	if r.CommitLog.Records != int64(len(res)) || r.ConsumeQueue.Units != int64(len(res)) || r.ConsumeQueue.Records != int64(len(res)) {
		t.Fatalf("counted %d records, %d units, %d queue records; want %d", r.CommitLog.Records, r.ConsumeQueue.Units, r.ConsumeQueue.Records, len(res))
	}
	if r.Index.Entries != 3*int64(len(res)) {
		t.Fatalf("%d index entries, want %d", r.Index.Entries, 3*len(res))
	}
}

// queueResults groups results by "topic/queue" in queue-offset order.
func queueResults(res []engine.Result) map[string][]engine.Result {
	out := make(map[string][]engine.Result)
	for _, r := range res {
		k := fmt.Sprintf("%s/%d", r.Topic, r.QueueID)
		out[k] = append(out[k], r)
	}
	return out
}

// cqFile is the path of the file holding unit n of topic/queue.
func cqFile(topic string, queue int32, n int64) string {
	size := int64(testUnits * consumequeue.UnitSize)
	pos := n * consumequeue.UnitSize
	return path.Join(testDir, "consumequeue", topic, fmt.Sprint(queue), fmt.Sprintf("%020d", pos-pos%size))
}

// patchUnit rewrites unit n of topic/queue.
func patchUnit(t testing.TB, fsys vfs.FS, topic string, queue int32, n int64, fn func(u *consumequeue.Unit)) {
	t.Helper()
	size := int64(testUnits * consumequeue.UnitSize)
	pos := n * consumequeue.UnitSize % size
	patch(t, fsys, cqFile(topic, queue, n), func(b []byte) {
		u := consumequeue.DecodeUnit(b[pos:])
		fn(&u)
		u.Encode(b[pos:])
	})
}

// TestBitFlipsDetected flips single bits in the header, body and properties of records spread
// over the log (the first, one at a segment start, middle ones, the last) and checks that each
// flip makes the record at its exact offset corrupt, and nothing before it.
func TestBitFlipsDetected(t *testing.T) {
	fsys, res := newStore(t, 300)
	requireClean(t, mustVerify(t, fsys))
	var picks []engine.Result
	picks = append(picks, res[0], res[len(res)-1])
	for i, r := range res {
		if i > 0 && r.PhysOffset%testSegment == 0 && len(picks) < 4 {
			picks = append(picks, r) // first record of a segment
		}
	}
	picks = append(picks, res[len(res)/3], res[len(res)/2], res[2*len(res)/3], res[len(res)-2])
	rng := rand.New(rand.NewPCG(1, 2))
	flips := 0
	for _, rec := range picks {
		seg := rec.PhysOffset - rec.PhysOffset%testSegment
		pos := rec.PhysOffset - seg
		size := int64(rec.Size)
		var offsets []int64
		for range 8 { // header: TOTALSIZE .. BODYLENGTH
			offsets = append(offsets, rng.Int64N(88))
		}
		for range 8 { // body and topic
			offsets = append(offsets, 88+rng.Int64N(size-88-60))
		}
		for range 9 { // properties, the __CRC32# entry included
			offsets = append(offsets, size-60+rng.Int64N(60))
		}
		for _, off := range offsets {
			bit := byte(1) << rng.IntN(8)
			flip := func(b []byte) { b[pos+off] ^= bit }
			patch(t, fsys, logFile(seg), flip)
			r := mustVerify(t, fsys)
			p := requireProblem(t, r, KindLogCorrupt, fmt.Sprintf("%020d", seg), rec.PhysOffset)
			if r.CommitLog.End != rec.PhysOffset || r.Verdict != VerdictCorrupt {
				t.Fatalf("flip of bit %#x at +%d of the record at %d: log ends at %d, verdict %s: %s",
					bit, off, rec.PhysOffset, r.CommitLog.End, r.Verdict, p.Desc)
			}
			if n := r.Counts[KindLogCorrupt] + r.Counts[KindLogTorn]; n != 1 {
				t.Fatalf("%d CommitLog problems for one flip:\n%s", n, dump(r))
			}
			patch(t, fsys, logFile(seg), flip) // flip it back
			flips++
		}
	}
	if flips < 200 {
		t.Fatalf("only %d flips", flips)
	}
	requireClean(t, mustVerify(t, fsys))
}

// TestStoreWithoutPropCRC: a store written without the whole-record CRC (its checkpoint says
// no record is known to carry it) verifies clean as it is, with --no-prop-crc or without: a
// record without the property is valid on its body CRC, which still catches a flipped body bit.
func TestStoreWithoutPropCRC(t *testing.T) {
	fsys := vfs.NewMem()
	eopts := engineOptions(t, fsys, testDir)
	eopts.NoPropCRC = true
	e, err := engine.Open(eopts)
	if err != nil {
		t.Fatal(err)
	}
	res := put(t, e, 0, 100)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	opts := options(fsys, testDir)
	for _, no := range []bool{false, true} {
		opts.NoPropCRC = no
		r, err := Verify(context.Background(), opts)
		if err != nil {
			t.Fatal(err)
		}
		requireClean(t, r)
		if r.CommitLog.PropCRC != "where present" || r.CommitLog.Records != 100 {
			t.Fatalf("--no-prop-crc=%v: prop CRC %q, %d records", no, r.CommitLog.PropCRC, r.CommitLog.Records)
		}
	}
	victim := res[40]
	seg := victim.PhysOffset - victim.PhysOffset%testSegment
	patch(t, fsys, logFile(seg), func(b []byte) { b[victim.PhysOffset-seg+int64(victim.Size)/2] ^= 1 })
	p := requireProblem(t, mustVerify(t, fsys), KindLogCorrupt, "commitlog/", victim.PhysOffset)
	if !strings.Contains(p.Desc, "body CRC mismatch") {
		t.Fatalf("problem %s", p.Desc)
	}
}

// TestProgress: each phase is reported from 0 to its total, never going down.
func TestProgress(t *testing.T) {
	fsys, _ := newStore(t, 300)
	opts := options(fsys, testDir)
	var got []Progress
	opts.Progress = func(p Progress) { got = append(got, p) } // calls are serialised
	if _, err := Verify(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	last := make(map[Phase]Progress)
	var order []Phase
	for _, p := range got {
		prev, seen := last[p.Phase]
		if !seen {
			order = append(order, p.Phase)
		}
		if p.Done < prev.Done || p.Done > p.Total || (seen && p.Total != prev.Total) {
			t.Fatalf("progress %+v after %+v", p, prev)
		}
		last[p.Phase] = p
	}
	if fmt.Sprint(order) != fmt.Sprint([]Phase{PhaseCommitLog, PhaseConsumeQueue, PhaseIndex}) {
		t.Fatalf("phases %v", order)
	}
	for ph, p := range last {
		if p.Done != p.Total || p.Total == 0 || p.Bytes == (ph == PhaseConsumeQueue) {
			t.Fatalf("%s ends at %+v", ph, p)
		}
	}
}
