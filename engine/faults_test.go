package engine

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/internal/vfs"
)

// TestFailedSyncStopsWritesAndRecovers: an EIO from a sync, or from the CommitLog's write, is
// never retried; every later put fails, the pipeline stops with the error, the abort file
// stays, and a restart recovers a consistent store holding every message acked before the
// failure.
func TestFailedSyncStopsWritesAndRecovers(t *testing.T) {
	for _, op := range []vfs.Op{vfs.OpSegmentSync, vfs.OpSegmentWrite} {
		t.Run(op.String(), func(t *testing.T) { testFailedIOStopsWrites(t, op) })
	}
}

func testFailedIOStopsWrites(t *testing.T, op vfs.Op) {
	dir := filepath.Join(t.TempDir(), "store")
	opts := testOptions(t, dir)
	eio := fmt.Errorf("injected: %w", syscall.EIO)
	opts.FS = vfs.NewFaulty(vfs.Default, vfs.OnNth(op, 40, eio))
	e := mustOpen(t, opts)
	var acked []Result
	failed := false
	for i := 0; i < 200 && !failed; i++ {
		res, err := e.Put(context.Background(), Message{Topic: "t", QueueID: int32(i % 2), Body: fmt.Appendf(nil, "m%d", i)})
		switch {
		case err != nil:
			failed = true
		case res[0].Err != nil:
			if !errors.Is(res[0].Err, syscall.EIO) {
				t.Fatalf("put %d: %v, want the injected EIO", i, res[0].Err)
			}
			failed = true
		default:
			acked = append(acked, res[0])
		}
	}
	if !failed {
		t.Fatal("no put failed after the sync failed")
	}
	<-e.Done()
	if !errors.Is(e.Err(), syscall.EIO) {
		t.Fatalf("pipeline error %v", e.Err())
	}
	if _, err := e.Put(context.Background(), Message{Topic: "t", Body: []byte("after")}); err == nil {
		t.Fatal("a put after the failed sync was taken")
	}
	if err := e.Close(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("close: %v", err)
	}

	opts.FS = nil
	e = mustOpen(t, opts)
	defer e.Close()
	if e.Recovery().CleanExit {
		t.Fatal("the failed run looked clean")
	}
	checkQueues(t, e, map[string][]Result{"t": acked})
}

// TestRecoveryDetectsBitFlips flips single bits in records that recovery scans. Below the
// checkpoint's durable offset a flip is damage to sealed data: recovery refuses to start and
// names it, rather than cutting the store there. Past it, the flipped record is a torn tail:
// recovery cuts there and keeps everything before it.
func TestRecoveryDetectsBitFlips(t *testing.T) {
	base := filepath.Join(t.TempDir(), "base")
	opts := testOptions(t, base)
	e := mustOpen(t, opts)
	putMany(t, e, 3, 300, 0)
	end := e.Offsets().Durable
	if err := e.Abort(); err != nil { // unclean: the next open scans from the checkpoint
		t.Fatal(err)
	}
	recs, sizes := recordsOf(t, base, opts.CommitLogFileSize, end)
	for i := range 60 {
		r := i * 7 % len(recs)
		bit := (i*131 + 17) % (sizes[r] * 8)
		sealed := i%3 != 0
		dir := filepath.Join(t.TempDir(), fmt.Sprint("flip", i))
		copyDir(t, base, dir)
		durable := end
		if !sealed {
			durable = recs[r] // the flipped record is past what the checkpoint says was synced
		}
		setCheckpoint(t, dir, 0, durable)
		flipBit(t, filepath.Join(dir, "commitlog"), opts.CommitLogFileSize, recs[r]+int64(bit/8), uint(bit%8))
		o := opts
		o.Dir = dir
		e, err := Open(o)
		if sealed {
			if !errors.Is(err, commitlog.ErrSealedCorrupt) {
				t.Fatalf("flip of bit %d of record %d at %d (sealed): open gave %v, want ErrSealedCorrupt", bit, r, recs[r], err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("flip of bit %d of record %d at %d (tail): %v", bit, r, recs[r], err)
		}
		if got := e.Offsets().Written; got != recs[r] {
			t.Fatalf("flip of bit %d of record %d at %d (tail): the log ends at %d", bit, r, recs[r], got)
		}
		e.Close()
	}
}
