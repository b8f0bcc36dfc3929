package engine

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/rocketstore/engine/internal/vfs"
)

// TestCrashKeepsAckedMessages runs the whole pipeline on the in-memory file system, stops it
// abruptly at a random point, takes a crash image (unsynced pages lost, kept or torn at random),
// reopens the image and checks: every message acked in sync mode is in its ConsumeQueue at the
// ack's position with its body, every queue is a gap-free prefix of what was written to it, and
// new messages continue the offsets.
func TestCrashKeepsAckedMessages(t *testing.T) {
	seeds := 500
	if testing.Short() {
		seeds = 30
	}
	for seed := range uint64(seeds) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 11))
			fsys := vfs.NewMem()
			opts := testOptions(t, "/store")
			opts.FS = fsys
			opts.CommitLogFileSize = 16 << 10
			opts.ConsumeQueueUnits = 50
			if rng.IntN(3) == 0 {
				opts.CQFlushThoroughInterval = 1 // a checkpoint on every tick
			}
			e := mustOpen(t, opts)
			acked := putMany(t, e, 1+rng.IntN(5), 50+rng.IntN(400), 0)
			if err := e.Abort(); err != nil {
				t.Fatalf("abort: %v", err)
			}
			img := fsys.CrashImage(rng, vfs.CrashOptions{UnsyncedDirChanges: rng.IntN(2) == 0})
			opts.FS = img
			e2 := mustOpen(t, opts)
			defer e2.Close()
			if rec := e2.Recovery(); rec.CleanExit {
				t.Fatal("recovery after a crash took the exit as clean")
			}
			checkQueues(t, e2, acked)
			for key, rs := range acked {
				cq := e2.cq.Find(rs[0].Topic, rs[0].QueueID)
				for off := range cq.MaxOffset() {
					u, err := cq.Unit(off)
					if err != nil {
						t.Fatalf("%s@%d: %v", key, off, err)
					}
					v, release, err := e2.log.Read(u.Phys)
					if err != nil {
						t.Fatalf("%s@%d -> %d: %v", key, off, u.Phys, err)
					}
					if v.QueueOffset() != off || !bytes.HasPrefix(v.Body(), []byte(key+"/")) {
						t.Fatalf("%s@%d: record %s@%d %q", key, off, v.Topic(), v.QueueOffset(), v.Body()[:20])
					}
					release()
				}
			}
			// The index agrees: every acked message is found by its unique key and by its key.
			for _, rs := range acked {
				for _, r := range rs {
					v, release, err := e2.log.Read(r.PhysOffset)
					if err != nil {
						t.Fatal(err)
					}
					uniq, _ := v.UniqKey()
					id := string(uniq)
					release()
					found, err := e2.Query(context.Background(), QueryRequest{Topic: r.Topic, Key: id})
					if err != nil {
						t.Fatal(err)
					}
					if !slices.ContainsFunc(found, func(m ReadMessage) bool { return m.PhysicalOffset == r.PhysOffset }) {
						t.Fatalf("%s: %s at %d not found by its unique key (%d found)", r.Topic, id, r.PhysOffset, len(found))
					}
				}
			}
			more := putMany(t, e2, 3, 30, 100000)
			checkQueues(t, e2, more)
		})
	}
}

// TestCrashStartedQueues: queues started above offset 0 (partitions taken over), the first of
// them holding the CommitLog's first record (offset 0, no tags: a unit that differs from the
// blank units before it only by its size), crash with their blank units and first units
// unsynced: lost, kept, torn or turned to garbage at random. After recovery every acked message
// is at its ack's position, each queue reads from its start (no torn blank unit is taken for a
// message, and its first message is not taken for a blank unit), every unit from there names
// its record, and new messages continue the offsets.
func TestCrashStartedQueues(t *testing.T) {
	seeds := 300
	if testing.Short() {
		seeds = 30
	}
	for seed := range uint64(seeds) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 13))
			fsys := vfs.NewMem()
			opts := testOptions(t, "/store")
			opts.FS = fsys
			opts.CommitLogFileSize = 16 << 10
			opts.ConsumeQueueUnits = 50
			if rng.IntN(3) == 0 {
				opts.CQFlushThoroughInterval = 1 // a checkpoint on every tick
			}
			e := mustOpen(t, opts)
			ctx := context.Background()
			starts := map[int32]int64{}
			for q := range int32(3) {
				starts[q] = 1 + rng.Int64N(120)
				if err := e.StartQueue(ctx, "s", q, starts[q]); err != nil {
					t.Fatal(err)
				}
			}
			acked := map[string][]Result{}
			for i := range 1 + rng.IntN(60) {
				q := int32(i % 3)
				if i > 0 {
					q = rng.Int32N(3)
				}
				rs, err := e.Put(ctx, Message{Topic: "s", QueueID: q, Body: body("s", q, i)})
				if err != nil || rs[0].Err != nil {
					t.Fatalf("put: %v %+v", err, rs)
				}
				if i == 0 && rs[0].PhysOffset != 0 {
					t.Fatalf("the first put is at %d", rs[0].PhysOffset)
				}
				key := fmt.Sprintf("s/%d", q)
				acked[key] = append(acked[key], rs[0])
			}
			if err := e.Abort(); err != nil {
				t.Fatalf("abort: %v", err)
			}
			garbage := []float64{0, 0.3}[rng.IntN(2)]
			opts.FS = fsys.CrashImage(rng, vfs.CrashOptions{UnsyncedDirChanges: rng.IntN(2) == 0, GarbageProb: garbage})
			e2 := mustOpen(t, opts)
			defer e2.Close()
			checkQueues(t, e2, acked)
			for q, start := range starts {
				cq := e2.cq.Find("s", q)
				n := int64(len(acked[fmt.Sprintf("s/%d", q)]))
				if n == 0 {
					continue
				}
				if cq.MinOffset() != start || cq.MaxOffset() != start+n {
					t.Fatalf("queue %d started at %d with %d messages: [%d, %d)", q, start, n, cq.MinOffset(), cq.MaxOffset())
				}
				for off := start; off < start+n; off++ {
					u, err := cq.Unit(off)
					if err != nil {
						t.Fatal(err)
					}
					v, release, err := e2.log.Read(u.Phys)
					if err != nil || v.QueueID() != q || v.QueueOffset() != off {
						t.Fatalf("queue %d@%d: unit %+v names the wrong record (%v)", q, off, u, err)
					}
					release()
				}
				rs, err := e2.Put(ctx, Message{Topic: "s", QueueID: q, Body: []byte("more")})
				if err != nil || rs[0].Err != nil || rs[0].QueueOffset != start+n {
					t.Fatalf("queue %d went on: %v %+v, want offset %d", q, err, rs, start+n)
				}
			}
		})
	}
}

// TestPowerLossAfterCleanStop: the checkpoint a clean stop writes covers every queue, so the
// directories and files of the queues made during the run, which are synced by the
// ConsumeQueue flush and not when they are made, must be durable by then. A power loss right
// after the stop keeps every acked message in its queue.
func TestPowerLossAfterCleanStop(t *testing.T) {
	fsys := vfs.NewMem()
	opts := testOptions(t, "/store")
	opts.FS = fsys
	opts.ConsumeQueueUnits = 50
	e := mustOpen(t, opts)
	acked := putMany(t, e, 5, 300, 0)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	opts.FS = fsys.CrashImage(nil, vfs.CrashOptions{SyncedOnly: true})
	e2 := mustOpen(t, opts)
	defer e2.Close()
	checkQueues(t, e2, acked)
}
