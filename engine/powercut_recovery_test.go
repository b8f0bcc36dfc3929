package engine

import (
	"cmp"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/rocketstore/engine/internal/store/checkpoint"
	"github.com/rocketstore/engine/internal/store/consumequeue"
	"github.com/rocketstore/engine/internal/store/meta"
	"github.com/rocketstore/engine/internal/store/segment"
	"github.com/rocketstore/engine/internal/verify"
	"github.com/rocketstore/engine/internal/vfs"
)

// TestRecoveryStartsAtTheDurableOffset: an async engine's checkpoint from before the
// checkpointer kept the dispatched offset under the durable one: dispatched at the end of the
// log, durable at 0, the ConsumeQueues and the index flushed, and the power cut before the log
// was ever synced. Recovery scans from the durable offset, so it finds the log empty, cuts every
// unit and entry (all point past the end), and the store verifies clean. Scanning from the
// dispatched offset found zeros there and took them for a clean end at the old end: units naming
// lost records, and a log that would go on after a hole.
func TestRecoveryStartsAtTheDurableOffset(t *testing.T) {
	fsys := vfs.NewMem()
	opts := testOptions(t, "/store")
	opts.FS = fsys
	opts.FlushMode = FlushAsync
	opts.FlushInterval, opts.FlushThoroughInterval = time.Hour, time.Hour // the log is never synced
	opts.CQFlushInterval, opts.CQFlushThoroughInterval = time.Hour, time.Hour
	e := mustOpen(t, opts)
	putMany(t, e, 3, 200, 0)
	end := e.Offsets().Written
	ctx := context.Background()
	if err := e.WaitDispatched(ctx, end); err != nil {
		t.Fatal(err)
	}
	// What the old checkpointer did: flush what dispatch had built, record it as dispatched.
	if err := e.cq.FlushAll(0); err != nil {
		t.Fatal(err)
	}
	if err := e.index.Flush(); err != nil {
		t.Fatal(err)
	}
	if d := e.Offsets().Durable; d != 0 {
		t.Fatalf("the log was synced up to %d", d)
	}
	if err := e.Abort(); err != nil {
		t.Fatal(err)
	}
	img := fsys.SyncedImage()
	name := filepath.Join(opts.Dir, checkpoint.FileName)
	cp, err := checkpoint.Load(img, name)
	if err != nil {
		t.Fatal(err)
	}
	cp.Ext.DispatchedOffset, cp.Ext.DurableOffset = end, 0
	cp.PhysicMsgTimestamp, cp.LogicsMsgTimestamp = 0, 0
	if err := checkpoint.Save(img, name, cp); err != nil {
		t.Fatal(err)
	}

	opts.FS = img
	e2 := mustOpen(t, opts)
	if rec := e2.Recovery(); rec.Start != 0 || rec.End != 0 {
		t.Fatalf("recovery scanned [%d, %d), want from the durable offset 0 to an empty log: %+v", rec.Start, rec.End, rec)
	}
	for _, cq := range e2.cq.Queues() {
		if cq.MaxOffset() != cq.MinOffset() {
			t.Fatalf("queue %s keeps units [%d, %d) of records that are gone", cq, cq.MinOffset(), cq.MaxOffset())
		}
	}
	more := putMany(t, e2, 2, 20, 1000)
	checkQueues(t, e2, more)
	if err := e2.Close(); err != nil {
		t.Fatal(err)
	}
	verifyConsistent(t, opts)
}

// TestRecoveryClearsUnitsPastAQueuesEnd: after an unclean exit, a unit a crash stranded past a
// queue's end (its page written back, an earlier one lost) is cleared by recovery: left there,
// it would join the queue once the queue is written up to it, naming a record that is not its
// own. Verify reports such a unit; after recovery the store verifies clean. The queue's units
// lie below the checkpoint's dispatched offset (written in a run that stopped cleanly), so that
// recovery keeps the queue as it is rather than building it again.
func TestRecoveryClearsUnitsPastAQueuesEnd(t *testing.T) {
	fsys := vfs.NewMem()
	opts := testOptions(t, "/store")
	opts.FS = fsys
	e := mustOpen(t, opts)
	acked := putMany(t, e, 1, 40, 0)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e = mustOpen(t, opts)
	if rs, err := e.Put(context.Background(), Message{Topic: "other", Body: []byte("x")}); err != nil || rs[0].Err != nil {
		t.Fatalf("put: %v %+v", err, rs)
	}
	if err := e.Abort(); err != nil {
		t.Fatal(err)
	}
	img := fsys.SyncedImage()
	// Queue topic-0/0 holds 10 units; its second, copied 5 units past the end, is stranded.
	rs := acked["topic-0/0"]
	name := filepath.Join(opts.Dir, "consumequeue", "topic-0", "0", segment.Name(0))
	size := int64(opts.ConsumeQueueUnits) * consumequeue.UnitSize
	seg, err := img.OpenSegment(name, size, vfs.ReadWrite)
	if err != nil {
		t.Fatal(err)
	}
	at := int64(len(rs)+5) * consumequeue.UnitSize
	if err := seg.Reserve(at + consumequeue.UnitSize); err != nil {
		t.Fatal(err)
	}
	copy(seg.Data()[at:], seg.Data()[consumequeue.UnitSize:2*consumequeue.UnitSize])
	if err := seg.Sync(at, at+consumequeue.UnitSize); err != nil {
		t.Fatal(err)
	}
	seg.Close()
	opts.FS = img
	if r, err := verify.Verify(context.Background(), verifyOptions(opts)); err != nil || r.Counts[verify.KindCQUnit] != 1 {
		t.Fatalf("verify before recovery: %v, %+v; want the stranded unit reported", err, r.Problems)
	}

	e2 := mustOpen(t, opts)
	checkQueues(t, e2, acked)
	if err := e2.Close(); err != nil {
		t.Fatal(err)
	}
	verifyConsistent(t, opts)
}

// TestRecoveryReindexesWhatDroppedIndexFilesHeld: a crash lost the log's last records, whose
// keys the IndexFiles held (the index's pages reached the disk, the log's did not), and the
// checkpoint's offsets lie below them. Recovery scans from the checkpoint and finds the log's new
// end; the newest index files hold entries past it, so they are dropped, and what they held
// below the new end is indexed again, the scanned range included: the scan itself indexed
// nothing there, the newest file still saying it reached past it. Every record left is found by
// its keys.
func TestRecoveryReindexesWhatDroppedIndexFilesHeld(t *testing.T) {
	fsys := vfs.NewMem()
	opts := testOptions(t, "/store")
	opts.FS = fsys
	opts.IndexEntries = 64 // 63 keys a file: 100 messages of 2 keys fill three and start a fourth
	e := mustOpen(t, opts)
	var rs []Result
	for _, q := range putMany(t, e, 1, 100, 0) {
		rs = append(rs, q...)
	}
	slices.SortFunc(rs, func(a, b Result) int { return cmp.Compare(a.PhysOffset, b.PhysOffset) })
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	img := fsys.SyncedImage()
	// The log lost records 90 to 99; the checkpoint says durable and dispatched at record 80.
	x, y, end := rs[80].PhysOffset, rs[90].PhysOffset, rs[99].PhysOffset+int64(rs[99].Size)
	seg, err := img.OpenSegment(filepath.Join(opts.Dir, "commitlog", segment.Name(0)), opts.CommitLogFileSize, vfs.ReadWrite)
	if err != nil {
		t.Fatal(err)
	}
	if err := seg.Reserve(end); err != nil {
		t.Fatal(err)
	}
	clear(seg.Data()[y:end])
	if err := seg.Sync(y, end); err != nil {
		t.Fatal(err)
	}
	seg.Close()
	name := filepath.Join(opts.Dir, checkpoint.FileName)
	cp, err := checkpoint.Load(img, name)
	if err != nil {
		t.Fatal(err)
	}
	cp.Ext.DispatchedOffset, cp.Ext.DurableOffset = x, x
	if err := checkpoint.Save(img, name, cp); err != nil {
		t.Fatal(err)
	}
	if err := meta.CreateAbort(img, opts.Dir, 1); err != nil {
		t.Fatal(err)
	}

	opts.FS = img
	e2 := mustOpen(t, opts)
	if rec := e2.Recovery(); rec.End != y || len(rec.IndexDropped) < 2 {
		t.Fatalf("recovery %+v: want the end at record 90 (%d) and the index files past it dropped", rec, y)
	}
	for i, r := range rs[:90] {
		found, err := e2.Query(context.Background(), QueryRequest{Topic: r.Topic, Key: fmt.Sprintf("key-%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(found, func(m ReadMessage) bool { return m.PhysicalOffset == r.PhysOffset }) {
			t.Fatalf("record %d at %d is not found by its key", i, r.PhysOffset)
		}
	}
	if err := e2.Close(); err != nil {
		t.Fatal(err)
	}
	verifyConsistent(t, opts)
}
