package engine

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketstore/engine/internal/natssubject"
	"github.com/rocketstore/engine/internal/verify"
	"github.com/rocketstore/engine/internal/vfs"
)

// powerCutSeedsEnv sets how many seeds TestPowerCutAtEverySync runs per configuration (1 by
// default): each seed is another workload, other crash images and other cut points.
const powerCutSeedsEnv = "ROCKETSTORE_POWERCUT_SEEDS"

// powerCutMaxCuts bounds the cut points tried per seed and configuration, so that the test
// stays well under a minute under -race; a run with fewer sync calls has each one cut.
const powerCutMaxCuts = 100

// TestPowerCutAtEverySync cuts the power at the sync calls of a run, in both flush modes, with
// the writer's pwrite and with copies into the mapping (--mmap-writes). A first run on the
// in-memory file system counts its sync calls (CommitLog, ConsumeQueue, IndexFile, checkpoint,
// abort file, directories); then, for each cut point k (every one while they are few, an even
// spread from a random start otherwise), the same workload runs again with the k-th sync and
// every later one refused (vfs.Mem.CutPowerAt): what was synced before stays durable, and
// nothing after reaches the disk but what a crash image keeps of the page cache. The image keeps
// unsynced pages in one of three ways (page by page written back whole or lost, as the
// kernel's writeback leaves them; torn at random; turned to garbage), with unsynced directory
// changes kept or lost entry by entry. A third of the cuts also cut the recovery that
// follows, at one of its own syncs, and take a second image from there.
//
// The store recovered from the last image must hold (checkPowerCut): in sync mode every acked
// message, once, at its ack's position; in async mode every acked message below the durable
// offset the engine had reached; in both, only whole records that were sent (no phantom: every
// record's properties decode, carry the whole-record CRC and match what was sent), every
// ConsumeQueue unit naming its record with each queue gap-free, every key found through the
// index, and `engine verify` finding the store consistent.
func TestPowerCutAtEverySync(t *testing.T) {
	seeds := 1
	if s := os.Getenv(powerCutSeedsEnv); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a positive number", powerCutSeedsEnv, s)
		}
		seeds = n
	}
	for _, mode := range []FlushMode{FlushSync, FlushAsync} {
		for _, mmap := range []bool{false, true} {
			name := mode.String() + "/pwrite"
			if mmap {
				name = mode.String() + "/mmap"
			}
			t.Run(name, func(t *testing.T) {
				var cuts, acked int
				for seed := range uint64(seeds) {
					c, a := powerCuts(t, powerCutConfig{mode: mode, mmap: mmap, seed: seed})
					cuts, acked = cuts+c, acked+a
				}
				t.Logf("%d seeds, %d cuts, %d messages acked in all", seeds, cuts, acked)
			})
		}
	}
}

type powerCutConfig struct {
	mode FlushMode
	mmap bool
	seed uint64
}

// options are the engine's options for a power-cut run on fsys: small files, so that a run
// rolls CommitLog segments, ConsumeQueue files and IndexFiles, and an index whose slot table
// spans pages apart from its header; flushes and checkpoints every few milliseconds, so that a
// short run has many of them.
func (c powerCutConfig) options(t testing.TB, fsys vfs.FS) Options {
	opts := testOptions(t, "/store")
	opts.Logger = zerolog.Nop() // every cut fails the pipeline, which logs it
	opts.FS = fsys
	opts.FlushMode = c.mode
	opts.MmapWrites = c.mmap
	opts.CommitLogFileSize = 16 << 10
	opts.ConsumeQueueUnits = 40
	opts.IndexSlots = 2048 // the slot table takes pages 0-2, the header only page 0
	opts.IndexEntries = 300
	// Async: the log is synced far less often than the ConsumeQueues and the checkpoint, so
	// that dispatch (which follows the written offset) runs well ahead of the durable offset.
	opts.FlushInterval, opts.FlushLeastPages, opts.FlushThoroughInterval = 5*time.Millisecond, 4, 20*time.Millisecond
	opts.CQFlushInterval, opts.CQFlushLeastPages, opts.CQFlushThoroughInterval = time.Millisecond, 1, 3*time.Millisecond
	opts.NoRetention = true
	return opts
}

// powerCuts runs one seed of a configuration: the counting run, then a run per cut point. It
// returns the cuts made and the messages acked over them.
func powerCuts(t *testing.T, c powerCutConfig) (cuts, acked int) {
	w := newPowerCutWork(c.seed)
	count := vfs.NewMem()
	e := mustOpen(t, c.options(t, count))
	w.run(e)
	if err := e.Abort(); err != nil {
		t.Fatalf("abort: %v", err)
	}
	n := count.Syncs()
	rng := rand.New(rand.NewPCG(c.seed, 0x9e3779b9))
	points := cutPoints(n+1, powerCutMaxCuts, rng)
	t.Logf("seed %d: %d sync calls in the counting run, %d cut points", c.seed, n, len(points))
	for _, k := range points {
		t.Run(fmt.Sprintf("seed%d/cut%d", c.seed, k), func(t *testing.T) {
			acked += powerCutAt(t, c, w, k)
		})
		if t.Failed() {
			break
		}
	}
	return len(points), acked
}

// cutPoints picks the cut points among 1..n: all of them when there are at most max, else max
// of them spread evenly from a random start.
func cutPoints(n int64, max int, rng *rand.Rand) []int64 {
	if n <= int64(max) {
		out := make([]int64, n)
		for i := range out {
			out[i] = int64(i) + 1
		}
		return out
	}
	step := float64(n) / float64(max)
	start := rng.Float64() * step
	out := make([]int64, max)
	for i := range out {
		out[i] = 1 + int64(start+float64(i)*step)
	}
	return out
}

// powerCutAt runs the workload with the power cut at sync k, recovers the image (cutting the
// recovery too, for a third of the cuts) and checks the store. It returns the messages acked.
func powerCutAt(t *testing.T, c powerCutConfig, w *powerCutWork, k int64) int {
	rng := rand.New(rand.NewPCG(c.seed, uint64(k)))
	fsys := vfs.NewMem()
	fsys.CutPowerAt(k)
	opts := c.options(t, fsys)
	got := powerCutAcks{acked: map[string]Result{}}
	var durable int64
	switch e, err := Open(opts); {
	case err == nil:
		got = w.run(e)
		durable = e.Offsets().Durable // no sync succeeds after the cut: durable at the cut or below
		if err := e.Abort(); err != nil && !errors.Is(err, vfs.ErrPowerCut) {
			t.Fatalf("abort: %v", err)
		}
	case !errors.Is(err, vfs.ErrPowerCut):
		t.Fatalf("open failed for another reason than the cut: %v", err)
	}
	co := crashOptions(rng)
	trail := fmt.Sprintf("cut at sync %d of the run, durable %d, %d acked; image %+v", k, durable, len(got.acked), co)
	img := fsys.CrashImage(rng, co)
	if rng.IntN(3) == 0 {
		var what string
		img, what = cutRecovery(t, c, img, rng)
		trail += "; " + what
	}
	opts.FS = img
	e2, err := Open(opts)
	if err != nil {
		t.Fatalf("%s; recovery: %v", trail, err)
	}
	defer func() {
		if t.Failed() {
			t.Logf("%s; recovery: %+v", trail, e2.Recovery())
			if r, err := verify.Verify(context.Background(), verifyOptions(opts)); err == nil {
				t.Logf("verify of the recovered store: %s, %+v", r.Verdict, r.Problems)
			}
		}
	}()
	want := got.acked
	if c.mode == FlushAsync {
		want = got.ackedBelow(durable) // async acks what is written; a power cut loses the rest
	}
	checkPowerCut(t, e2, w, want)
	if err := e2.Close(); err != nil {
		t.Fatal(err)
	}
	verifyConsistent(t, opts)
	return len(got.acked)
}

// crashOptions picks how a crash image treats what was never synced.
func crashOptions(rng *rand.Rand) vfs.CrashOptions {
	o := vfs.CrashOptions{UnsyncedDirChanges: rng.IntN(2) == 0}
	switch rng.IntN(4) {
	case 0, 1:
		o.Writeback = 0.5 // whole pages written back or lost: LazyFS's model
	case 2: // lost, kept, torn or mixed by sectors
	case 3:
		o.GarbageProb = 0.05
	}
	return o
}

// cutRecovery opens a copy of img with the power cut at one of the recovery's first syncs (it
// makes about ten) and returns the image that cut leaves, and what happened.
func cutRecovery(t *testing.T, c powerCutConfig, img *vfs.Mem, rng *rand.Rand) (*vfs.Mem, string) {
	t.Helper()
	cut := img.SyncedImage() // everything in an image is durable: an exact copy
	k := 1 + rng.Int64N(12)
	cut.CutPowerAt(k)
	what := fmt.Sprintf("recovery cut at its sync %d", k)
	e, err := Open(c.options(t, cut))
	switch {
	case err == nil:
		what += fmt.Sprintf(" after it recovered %+v", e.Recovery())
		if err := e.Abort(); err != nil && !errors.Is(err, vfs.ErrPowerCut) {
			t.Fatalf("abort of the recovery cut: %v", err)
		}
	case !errors.Is(err, vfs.ErrPowerCut):
		t.Fatalf("recovery failed for another reason than the cut: %v", err)
	default:
		what += fmt.Sprintf(" (%v)", err)
	}
	co := crashOptions(rng)
	return cut.CrashImage(rng, co), what + fmt.Sprintf("; image %+v", co)
}

// powerCutWork is a workload: batches for two publishers, the same in every run of a seed.
type powerCutWork struct {
	batches [2][][]Message
	sent    map[string]Message // by MsgID (UNIQ_KEY)
}

func newPowerCutWork(seed uint64) *powerCutWork {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	w := &powerCutWork{sent: make(map[string]Message)}
	for p := range w.batches {
		for b := range 10 {
			var batch []Message
			for i := range 1 + rng.IntN(10) {
				id := fmt.Sprintf("p%d-%d-%d", p, b, i)
				// Sizes from 100 B to 2.5 KiB: records cross 4 KiB pages often, and a tear can
				// fall in the body, the topic or the properties.
				m := Message{
					Topic: fmt.Sprintf("topic-%d", rng.IntN(3)), QueueID: rng.Int32N(2),
					Body: powerCutBody(id, 60+rng.IntN(1400)), MsgID: id, Keys: []string{"k-" + id}, Tags: "t",
					Properties: map[string]string{natssubject.Property: "orders." + id, "note": strings.Repeat("n", rng.IntN(1000)+1)},
				}
				batch = append(batch, m)
				w.sent[id] = m
			}
			w.batches[p] = append(w.batches[p], batch)
		}
	}
	return w
}

// powerCutBody is a body that names its message and cannot pass for another's.
func powerCutBody(id string, n int) []byte {
	b := make([]byte, 0, len(id)+1+n)
	b = append(b, id...)
	b = append(b, '|')
	for i := range n {
		b = append(b, byte('a'+(i*7+len(id))%26))
	}
	return b
}

// powerCutAcks is what a run was told: the result of every acked message, by MsgID.
type powerCutAcks struct {
	acked map[string]Result
}

// ackedBelow keeps the acks of records that end at or below off.
func (a powerCutAcks) ackedBelow(off int64) map[string]Result {
	out := make(map[string]Result)
	for id, r := range a.acked {
		if r.PhysOffset+int64(r.Size) <= off {
			out[id] = r
		}
	}
	return out
}

// run publishes the batches from two goroutines until they are done or the engine fails (the
// cut), and returns what was acked.
func (w *powerCutWork) run(e *Engine) powerCutAcks {
	var mu sync.Mutex
	acks := powerCutAcks{acked: make(map[string]Result)}
	var wg sync.WaitGroup
	for p := range w.batches {
		wg.Go(func() {
			for _, batch := range w.batches[p] {
				rs, err := e.Put(context.Background(), batch...)
				if err != nil {
					return
				}
				failed := false
				mu.Lock()
				for i, r := range rs {
					if r.Err != nil {
						failed = true
						continue
					}
					acks.acked[batch[i].MsgID] = r
				}
				mu.Unlock()
				if failed {
					return
				}
			}
		})
	}
	wg.Wait()
	return acks
}
