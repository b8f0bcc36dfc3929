package flushers

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/internal/vfs"
	"github.com/rocketstore/engine/stages"
)

// fakeSyncer is a Syncer for synctest: each Flush takes delay on the bubble's clock (a sleep,
// which is durably blocking there) and call number failOn returns err. The mutex is held only
// around the bookkeeping, never while blocked.
type fakeSyncer struct {
	delay  time.Duration
	failOn int
	err    error

	mu      sync.Mutex
	targets []int64
	at      []time.Time
}

func (s *fakeSyncer) Flush(target int64) error {
	s.mu.Lock()
	s.targets = append(s.targets, target)
	s.at = append(s.at, time.Now())
	n := len(s.targets)
	s.mu.Unlock()
	if s.delay > 0 {
		time.Sleep(s.delay)
	}
	if n == s.failOn {
		return s.err
	}
	return nil
}

func (s *fakeSyncer) calls() []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.targets)
}

func runFlusher(ctx context.Context, f *CommitLog) <-chan error {
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	return done
}

// writer is a stand-in for the appender: the one owner of Written, appending size bytes per
// request and answering with the new end.
func writer(written *stages.Watermark, size int64) chan<- chan int64 {
	reqs := make(chan chan int64)
	go func() {
		var end int64
		for reply := range reqs {
			end += size
			written.Advance(end)
			reply <- end
		}
	}()
	return reqs
}

// TestGroupCommitBatchesSyncs: 200 writers arrive over 20 ms while each sync takes 2 ms; one
// sync releases everyone who arrived during the previous one, so there are far fewer syncs than
// writers and no writer waits for more than the sync in flight plus one.
func TestGroupCommitBatchesSyncs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const (
			writers  = 200
			syncTime = 2 * time.Millisecond
			recSize  = 128
		)
		sy := &fakeSyncer{delay: syncTime}
		written, durable := stages.NewWatermark(0), stages.NewWatermark(0)
		f := &CommitLog{Log: sy, Mode: Sync, Written: written, Durable: durable}
		done := runFlusher(t.Context(), f)
		reqs := writer(written, recSize)

		var wg sync.WaitGroup
		var longest atomic.Int64
		for i := range writers {
			wg.Go(func() {
				time.Sleep(time.Duration(i) * 100 * time.Microsecond)
				reply := make(chan int64, 1)
				reqs <- reply
				end := <-reply
				start := time.Now()
				if err := durable.Wait(t.Context(), end); err != nil {
					t.Error(err)
				}
				waited := time.Since(start)
				for {
					cur := longest.Load()
					if int64(waited) <= cur || longest.CompareAndSwap(cur, int64(waited)) {
						break
					}
				}
			})
		}
		wg.Wait()
		close(reqs)
		written.Fail(stages.ErrClosed)
		if err := <-done; err != nil {
			t.Fatalf("Run after a clean stop: %v", err)
		}

		targets := sy.calls()
		if n := f.Syncs(); n != int64(len(targets)) {
			t.Fatalf("Syncs() = %d, Flush called %d times", n, len(targets))
		}
		if len(targets) >= writers/10 {
			t.Fatalf("%d syncs for %d writers: no group commit", len(targets), writers)
		}
		if len(targets) == 0 || targets[len(targets)-1] != writers*recSize {
			t.Fatalf("sync targets %v", targets)
		}
		for i := 1; i < len(targets); i++ {
			if targets[i] <= targets[i-1] {
				t.Fatalf("sync %d to %d repeats or goes back from %d", i, targets[i], targets[i-1])
			}
		}
		if w := time.Duration(longest.Load()); w > 2*syncTime {
			t.Fatalf("a writer waited %v for durability, more than two syncs (%v)", w, 2*syncTime)
		}
		if durable.Load() != writers*recSize || !errors.Is(durable.Err(), stages.ErrClosed) {
			t.Fatalf("Durable %d, err %v", durable.Load(), durable.Err())
		}
		t.Logf("%d writers, %d syncs", writers, len(targets))
	})
}

// TestGroupCommitBurst: writers that all arrive while the first sync runs share the second one.
func TestGroupCommitBurst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sy := &fakeSyncer{delay: time.Millisecond}
		written, durable := stages.NewWatermark(0), stages.NewWatermark(0)
		done := runFlusher(t.Context(), &CommitLog{Log: sy, Written: written, Durable: durable})
		reqs := writer(written, 100)
		var wg sync.WaitGroup
		for range 200 {
			wg.Go(func() {
				reply := make(chan int64, 1)
				reqs <- reply
				if err := durable.Wait(t.Context(), <-reply); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		close(reqs)
		written.Fail(nil)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if n := len(sy.calls()); n > 2 {
			t.Fatalf("%d syncs for a burst of 200 writers at one instant, want at most 2", n)
		}
	})
}

// TestSyncErrorIsSticky: the second sync fails; its waiters and every later one get the error,
// waits below the last good sync still succeed, and the flusher never syncs again.
func TestSyncErrorIsSticky(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		boom := errors.New("EIO")
		sy := &fakeSyncer{delay: time.Millisecond, failOn: 2, err: boom}
		written, durable := stages.NewWatermark(0), stages.NewWatermark(0)
		done := runFlusher(t.Context(), &CommitLog{Log: sy, Written: written, Durable: durable})

		written.Advance(100)
		if err := durable.Wait(t.Context(), 100); err != nil {
			t.Fatalf("first sync: %v", err)
		}
		waits := make(chan error, 3)
		for _, off := range []int64{150, 200, 250} {
			go func() { waits <- durable.Wait(t.Context(), off) }()
		}
		synctest.Wait()
		written.Advance(200) // the sync to 200 fails
		err := <-done
		if !errors.Is(err, boom) {
			t.Fatalf("Run = %v, want %v", err, boom)
		}
		for range 3 {
			if err := <-waits; !errors.Is(err, boom) {
				t.Fatalf("present waiter got %v", err)
			}
		}
		written.Advance(300) // the writer would go on; nobody syncs it
		synctest.Wait()
		if err := durable.Wait(t.Context(), 101); !errors.Is(err, boom) {
			t.Fatalf("later waiter got %v", err)
		}
		if err := durable.Wait(t.Context(), 100); err != nil {
			t.Fatalf("wait below the last good sync: %v", err)
		}
		if got := sy.calls(); !slices.Equal(got, []int64{100, 200}) {
			t.Fatalf("syncs %v, want [100 200] and no retry", got)
		}
		if durable.Load() != 100 {
			t.Fatalf("Durable moved to %d past a failed sync", durable.Load())
		}
	})
}

// TestSyncCleanStop: when the writer stops, the flusher syncs what is still dirty, then fails
// Durable with ErrClosed.
func TestSyncCleanStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sy := &fakeSyncer{delay: time.Millisecond}
		written, durable := stages.NewWatermark(1000), stages.NewWatermark(1000)
		done := runFlusher(t.Context(), &CommitLog{Log: sy, Written: written, Durable: durable})
		written.Advance(1100)
		time.Sleep(time.Millisecond / 2) // the sync to 1100 is under way
		written.Advance(1250)
		written.Advance(1300)
		written.Fail(stages.ErrClosed)
		if err := <-done; err != nil {
			t.Fatalf("Run = %v", err)
		}
		if got := sy.calls(); !slices.Equal(got, []int64{1100, 1300}) {
			t.Fatalf("syncs %v, want [1100 1300]", got)
		}
		if durable.Load() != 1300 || !errors.Is(durable.Err(), stages.ErrClosed) {
			t.Fatalf("Durable %d, err %v", durable.Load(), durable.Err())
		}
		if err := durable.Wait(t.Context(), 1301); !errors.Is(err, stages.ErrClosed) {
			t.Fatalf("wait past the end: %v", err)
		}
	})
}

// TestSyncWriterFailed: a writer that failed leaves no final sync to do; the flusher stops with
// the writer's error.
func TestSyncWriterFailed(t *testing.T) {
	for _, mode := range []Mode{Sync, Async} {
		synctest.Test(t, func(t *testing.T) {
			sy := &fakeSyncer{}
			written, durable := stages.NewWatermark(0), stages.NewWatermark(0)
			done := runFlusher(t.Context(), &CommitLog{Log: sy, Mode: mode, Written: written, Durable: durable})
			synctest.Wait()
			boom := errors.New("append failed")
			written.Fail(boom)
			if err := <-done; !errors.Is(err, boom) {
				t.Fatalf("mode %d: Run = %v", mode, err)
			}
			if n := len(sy.calls()); n != 0 {
				t.Fatalf("mode %d: %d syncs", mode, n)
			}
			if !errors.Is(durable.Err(), boom) {
				t.Fatalf("mode %d: Durable failed with %v", mode, durable.Err())
			}
		})
	}
}

const page = 4096

func TestAsyncFlushSchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const (
			interval = 500 * time.Millisecond
			thorough = 10 * time.Second
		)
		sy := &fakeSyncer{}
		written, durable := stages.NewWatermark(0), stages.NewWatermark(0)
		f := &CommitLog{Log: sy, Mode: Async, Written: written, Durable: durable,
			Interval: interval, LeastPages: 4, ThoroughInterval: thorough}
		start := time.Now()
		done := runFlusher(t.Context(), f)
		at := func(d time.Duration) { // move the clock to start+d and let the flusher run
			time.Sleep(start.Add(d).Sub(time.Now()))
			synctest.Wait()
		}
		expect := func(when string, want ...int64) {
			t.Helper()
			if got := sy.calls(); !slices.Equal(got, want) {
				t.Fatalf("%s: syncs %v, want %v", when, got, want)
			}
		}

		written.Advance(10 * page)
		at(interval - time.Nanosecond)
		expect("before the first interval")
		at(interval)
		expect("at the first interval", 10*page)

		written.Advance(13 * page) // 3 dirty pages: fewer than LeastPages
		at(2 * interval)
		expect("3 dirty pages", 10*page)
		written.Advance(14 * page) // 4 dirty pages
		at(3 * interval)
		expect("4 dirty pages", 10*page, 14*page)

		written.Advance(14*page + 100) // under a page dirty: only a thorough flush takes it
		at(thorough - time.Nanosecond)
		expect("before the thorough interval", 10*page, 14*page)
		at(thorough)
		expect("at the thorough interval", 10*page, 14*page, 14*page+100)
		if durable.Load() != 14*page+100 {
			t.Fatalf("Durable %d", durable.Load())
		}

		// The thorough clock restarts: the next one is due a full ThoroughInterval later.
		written.Advance(14*page + 200)
		at(2*thorough - interval)
		expect("before the second thorough interval", 10*page, 14*page, 14*page+100)
		at(2 * thorough)
		expect("second thorough interval", 10*page, 14*page, 14*page+100, 14*page+200)

		// Clean stop: the last bytes are flushed at once, without waiting for a tick.
		written.Advance(14*page + 300)
		stopAt := time.Now()
		written.Fail(stages.ErrClosed)
		if err := <-done; err != nil {
			t.Fatalf("Run = %v", err)
		}
		if time.Since(stopAt) != 0 {
			t.Fatalf("final flush waited %v", time.Since(stopAt))
		}
		expect("after stop", 10*page, 14*page, 14*page+100, 14*page+200, 14*page+300)
		if durable.Load() != 14*page+300 || !errors.Is(durable.Err(), stages.ErrClosed) {
			t.Fatalf("Durable %d, err %v", durable.Load(), durable.Err())
		}
	})
}

// TestAsyncDefaults: the zero settings are RocketMQ's (500 ms, 4 pages, 10 s).
func TestAsyncDefaults(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sy := &fakeSyncer{}
		written, durable := stages.NewWatermark(0), stages.NewWatermark(0)
		start := time.Now()
		done := runFlusher(t.Context(), &CommitLog{Log: sy, Mode: Async, Written: written, Durable: durable})
		check := func(d time.Duration, want ...int64) {
			t.Helper()
			time.Sleep(start.Add(d).Sub(time.Now()))
			synctest.Wait()
			if got := sy.calls(); !slices.Equal(got, want) {
				t.Fatalf("at %v: syncs %v, want %v", d, got, want)
			}
		}
		written.Advance(3 * page) // under 4 pages: left for the thorough flush
		check(500 * time.Millisecond)
		check(10*time.Second - time.Nanosecond)
		check(10*time.Second, 3*page)
		written.Advance(6 * page)
		check(10*time.Second+500*time.Millisecond, 3*page)
		written.Advance(7 * page)
		check(11*time.Second, 3*page, 7*page)
		written.Fail(nil)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}

// TestAsyncFlushErrorStops: a failed periodic flush stops the flusher and fails Durable.
func TestAsyncFlushErrorStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		boom := errors.New("EIO")
		sy := &fakeSyncer{failOn: 1, err: boom}
		written, durable := stages.NewWatermark(0), stages.NewWatermark(0)
		done := runFlusher(t.Context(), &CommitLog{Log: sy, Mode: Async, Written: written, Durable: durable,
			Interval: time.Second, LeastPages: 1})
		written.Advance(2 * page)
		if err := <-done; !errors.Is(err, boom) {
			t.Fatalf("Run = %v", err)
		}
		if !errors.Is(durable.Err(), boom) || durable.Load() != 0 {
			t.Fatalf("Durable %d, err %v", durable.Load(), durable.Err())
		}
	})
}

func TestFlusherCancel(t *testing.T) {
	for _, mode := range []Mode{Sync, Async} {
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			sy := &fakeSyncer{}
			durable := stages.NewWatermark(0)
			done := runFlusher(ctx, &CommitLog{Log: sy, Mode: mode, Written: stages.NewWatermark(0), Durable: durable})
			synctest.Wait()
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Fatalf("mode %d: Run = %v", mode, err)
			}
			if !errors.Is(durable.Err(), context.Canceled) {
				t.Fatalf("mode %d: Durable failed with %v", mode, durable.Err())
			}
		})
	}
}

// BenchmarkGroupCommit is the group-commit benchmark: an op appends one 128-byte record through
// a real commitlog.Log on a temporary directory and waits for Durable, with the real flusher
// syncing (msync) in Sync mode. A small single writer stands in for the appender (flushers does
// not import it): it takes what is queued, appends it, advances Written and answers each op with
// its end. Reported: syncs/op (1 at parallelism 1 falling as writers share syncs) and the p99
// latency of an op. RunParallel runs par x GOMAXPROCS goroutines.
func BenchmarkGroupCommit(b *testing.B) {
	for _, par := range []int{1, 8, 64, 256} {
		b.Run(fmt.Sprintf("par=%d", par), func(b *testing.B) {
			benchGroupCommit(b, par)
		})
	}
}

func benchGroupCommit(b *testing.B, par int) {
	const fileSize = 256 << 20
	log, err := commitlog.OpenLog(commitlog.LogOptions{FS: vfs.Default, Dir: b.TempDir(), FileSize: fileSize, Prefault: true})
	if err != nil {
		b.Fatal(err)
	}
	defer log.Close()
	if f, err := log.Queue().Roll(0); err != nil {
		b.Fatal(err)
	} else if err := f.Prefault(); err != nil {
		b.Fatal(err)
	}
	m := commitlog.Message{
		Topic: "bench", BornTimestamp: 1, BornHost: netip.MustParseAddrPort("10.0.0.1:40000"),
		StoreHost: netip.MustParseAddrPort("127.0.0.1:10911"), Body: make([]byte, 12),
	}
	rec, err := commitlog.AppendRecord(nil, &m, commitlog.EncodeOptions{PropCRC: true})
	if err != nil {
		b.Fatal(err)
	}
	if len(rec) != 128 {
		b.Fatalf("record is %d bytes, want 128", len(rec))
	}

	written, durable := stages.NewWatermark(0), stages.NewWatermark(0)
	flusher := &CommitLog{Log: log, Mode: Sync, Written: written, Durable: durable}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	flushDone := make(chan error, 1)
	go func() { flushDone <- flusher.Run(ctx) }()

	reqs := make(chan chan<- int64, 1024)
	kick := make(chan struct{}, 1)
	allocDone := make(chan struct{})
	go func() { // allocate the next segment off the writer
		defer close(allocDone)
		for range kick {
			if err := log.PrepareNext(); err != nil {
				b.Error(err)
			}
		}
	}()
	writerDone := make(chan error, 1)
	go func() { // the single writer
		defer close(kick)
		batch := make([]chan<- int64, 0, 256)
		var qo int64
		var werr error
		for first := range reqs {
			batch, _ = stages.Drain(reqs, append(batch[:0], first), cap(batch))
			for range batch {
				if werr != nil {
					break
				}
				if _, werr = log.Append(rec, qo, 1, true); werr != nil {
					written.Fail(werr) // the flusher stops, and Durable fails every wait below
				}
				qo++
			}
			end := log.MaxOffset()
			if werr != nil {
				end = math.MaxInt64 // never durable: the wait gets the error
			} else {
				written.Advance(end)
			}
			for _, reply := range batch {
				reply <- end
			}
			if log.NeedsNext() {
				select {
				case kick <- struct{}{}:
				default:
				}
			}
		}
		writerDone <- werr
	}()

	var (
		mu      sync.Mutex
		samples []time.Duration
	)
	b.SetBytes(int64(len(rec)))
	b.ReportAllocs()
	b.SetParallelism(par)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		reply := make(chan int64, 1)
		local := make([]time.Duration, 0, 1024)
		for pb.Next() {
			start := time.Now()
			reqs <- reply
			if err := durable.Wait(ctx, <-reply); err != nil {
				b.Error(err)
				return
			}
			local = append(local, time.Since(start))
		}
		mu.Lock()
		samples = append(samples, local...)
		mu.Unlock()
	})
	b.StopTimer()
	syncs := flusher.Syncs()
	close(reqs)
	if err := <-writerDone; err != nil {
		b.Fatal(err)
	}
	<-allocDone
	written.Fail(stages.ErrClosed)
	if err := <-flushDone; err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(syncs)/float64(b.N), "syncs/op")
	if len(samples) > 0 {
		slices.Sort(samples)
		p99 := samples[(len(samples)-1)*99/100]
		b.ReportMetric(float64(p99.Microseconds()), "p99-us")
	}
}
