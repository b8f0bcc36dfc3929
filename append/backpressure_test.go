package appender

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/internal/store/segment"
	"github.com/rocketstore/engine/internal/vfs"
	"github.com/rocketstore/engine/stages"
)

// TestAppenderBackPressure holds Dispatched back: the appender stops once it is MaxLag bytes (plus
// the round it had already checked for) ahead, then In fills and the producer blocks; each
// advance of Dispatched lets it go exactly as far again.
func TestAppenderBackPressure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const (
			recSize = 100
			maxLag  = 1000
			inCap   = 4
		)
		log := &fakeLog{}
		in := make(chan *stages.Batch, inCap)
		out := make(chan *stages.Batch, 64)
		written, dispatched := stages.NewWatermark(0), stages.NewWatermark(0)
		a := New(Config{Log: log, In: in, Out: out, Written: written, Dispatched: dispatched, MaxLag: maxLag, MaxBatch: 1})
		done := make(chan error, 1)
		go func() { done <- a.Run(context.Background()) }()

		const total = 30
		var sent atomic.Int64
		go func() {
			for range total {
				in <- &stages.Batch{Records: []stages.Record{{Bytes: make([]byte, recSize)}}}
				sent.Add(1)
			}
			close(in)
		}()
		synctest.Wait()
		// A round starts only while Written-MaxLag <= Dispatched: with Dispatched at 0 the
		// appender writes up to MaxLag+recSize, holds the next batch, and In fills behind it.
		if got, want := written.Load(), int64(maxLag+recSize); got != want {
			t.Fatalf("Written = %d with Dispatched held at 0, want %d", got, want)
		}
		if got, want := sent.Load(), int64((maxLag+recSize)/recSize+1+inCap); got != want {
			t.Fatalf("producer sent %d batches before blocking, want %d", got, want)
		}
		if len(in) != inCap {
			t.Fatalf("In holds %d, want it full (%d)", len(in), inCap)
		}
		if len(out) != log.appends || log.appends != (maxLag+recSize)/recSize {
			t.Fatalf("%d appends, %d batches passed on", log.appends, len(out))
		}
		dispatched.Advance(3 * recSize)
		synctest.Wait()
		if got, want := written.Load(), int64(maxLag+4*recSize); got != want {
			t.Fatalf("after Dispatched moved to %d: Written = %d, want %d", 3*recSize, got, want)
		}
		if got := written.Load() - dispatched.Load(); got > maxLag+recSize {
			t.Fatalf("lag %d > MaxLag + one round", got)
		}
		dispatched.Advance(math.MaxInt64)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if written.Load() != total*recSize || sent.Load() != total {
			t.Fatalf("Written %d, sent %d", written.Load(), sent.Load())
		}
	})
}

// TestAppenderBackPressureDispatchFailed: the appender waiting for dispatch stops when dispatch
// fails, with that error, and hands every batch of the round it held over to the ack stage,
// each record refused with the error (none of them is in the log), so that every publisher gets
// an answer.
func TestAppenderBackPressureDispatchFailed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const held = 3
		in := make(chan *stages.Batch, held)
		out := make(chan *stages.Batch, held+1)
		written, dispatched := stages.NewWatermark(500), stages.NewWatermark(0)
		log := &fakeLog{end: 500}
		a := New(Config{Log: log, In: in, Out: out, Written: written, Dispatched: dispatched, MaxLag: 100, MaxBatch: held})
		for range held {
			in <- &stages.Batch{Records: []stages.Record{{Bytes: make([]byte, 10)}, {Bytes: make([]byte, 10)}}}
		}
		done := make(chan error, 1)
		go func() { done <- a.Run(context.Background()) }()
		synctest.Wait()
		if len(in) != 0 {
			t.Fatalf("the writer took %d of %d batches into its round", held-len(in), held)
		}
		boom := errors.New("dispatch broke")
		dispatched.Fail(boom)
		if err := <-done; !errors.Is(err, boom) {
			t.Fatalf("Run = %v", err)
		}
		if !errors.Is(written.Err(), boom) {
			t.Fatalf("Written failed with %v", written.Err())
		}
		var got int
		for b := range out { // closed by Run's return
			got++
			for i, r := range b.Records {
				if !errors.Is(r.Err, boom) {
					t.Fatalf("batch %d record %d: error %v, want the dispatch failure", got, i, r.Err)
				}
			}
		}
		if got != held || log.appends != 0 {
			t.Fatalf("%d of the %d batches held were handed over, %d records appended", got, held, log.appends)
		}
	})
}

func TestAppenderKicksAllocator(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &fakeLog{}
		in := make(chan *stages.Batch)
		out := make(chan *stages.Batch, 8)
		kick := make(chan struct{}, 1)
		a := New(Config{Log: log, In: in, Out: out, Kick: kick,
			Written: stages.NewWatermark(0), Dispatched: stages.NewWatermark(math.MaxInt64)})
		done := make(chan error, 1)
		go func() { done <- a.Run(context.Background()) }()
		batch := func() *stages.Batch { return &stages.Batch{Records: []stages.Record{{Bytes: make([]byte, 10)}}} }
		in <- batch()
		synctest.Wait()
		if len(kick) != 0 {
			t.Fatal("kicked while the log did not need the next segment")
		}
		log.needsNext = true // safe: the appender is blocked on In
		in <- batch()
		in <- batch() // a second kick while one is pending must not block the writer
		synctest.Wait()
		if len(kick) != 1 || len(out) != 3 {
			t.Fatalf("%d kicks pending, %d batches out", len(kick), len(out))
		}
		close(in)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}

func TestAllocator(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		kick := make(chan struct{})
		var prepared, failed int
		fail := errors.New("no space")
		a := &Allocator{
			Kick: kick,
			Prepare: func() error {
				prepared++
				if prepared == 2 {
					return fail
				}
				return nil
			},
			Failed: func() { failed++ },
		}
		done := make(chan error, 1)
		go func() { done <- a.Run(context.Background()) }()
		for range 3 {
			kick <- struct{}{}
		}
		close(kick)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if prepared != 3 || failed != 1 {
			t.Fatalf("prepared %d, failed %d", prepared, failed)
		}
	})
}

// BenchmarkAppenderBatch measures the appender alone: encoded records through Run into a real
// commitlog.Log on a temporary directory (segments fallocated and prefaulted ahead, as in the
// engine), Dispatched always ahead, a consumer recycling appended batches. An op is one batch;
// records/s and allocs/record cover the whole run, the final drain included.
func BenchmarkAppenderBatch(b *testing.B) {
	for _, size := range []int{128, 1024} {
		for _, batch := range []int{1, 64} {
			b.Run(fmt.Sprintf("rec=%d/batch=%d", size, batch), func(b *testing.B) {
				benchAppender(b, size, batch)
			})
		}
	}
}

// sizedRecord encodes a record of exactly size bytes (when size allows it).
func sizedRecord(b *testing.B, size int) stages.Record {
	b.Helper()
	empty := encode(b, "bench", 0, "", "", 0)
	body := make([]byte, max(0, size-len(empty.Bytes)))
	r := encode(b, "bench", 0, string(body), "", 0)
	if len(r.Bytes) != size {
		b.Fatalf("record is %d bytes, want %d", len(r.Bytes), size)
	}
	return r
}

func benchAppender(b *testing.B, size, batchLen int) {
	const fileSize = 256 << 20
	log, err := commitlog.OpenLog(commitlog.LogOptions{FS: vfs.Default, Dir: b.TempDir(), FileSize: fileSize, Prefault: true})
	if err != nil {
		b.Fatal(err)
	}
	defer log.Close()
	first, err := log.Queue().Roll(0)
	if err != nil {
		b.Fatal(err)
	}
	if err := first.Prefault(); err != nil {
		b.Fatal(err)
	}

	const inFlight = 512
	in := make(chan *stages.Batch, 256)
	out := make(chan *stages.Batch, 256)
	kick := make(chan struct{}, 1)
	free := make(chan *stages.Batch, inFlight)
	rec := sizedRecord(b, size)
	for range inFlight {
		bt := &stages.Batch{Records: make([]stages.Record, batchLen)}
		for i := range bt.Records {
			bt.Records[i] = rec
		}
		free <- bt
	}
	written := stages.NewWatermark(0)
	a := New(Config{
		Log: log, In: in, Out: out, Written: written, Dispatched: stages.NewWatermark(math.MaxInt64),
		MaxLag: 1 << 30, MaxBatch: 64, Kick: kick,
	})
	alloc := &Allocator{Prepare: log.PrepareNext, Kick: kick}
	allocDone := make(chan error, 1)
	go func() { allocDone <- alloc.Run(context.Background()) }()
	runDone := make(chan error, 1)
	go func() { runDone <- a.Run(context.Background()) }()
	ackDone := make(chan struct{})
	go func() { // the ack stage: recycle batches, drop segments two behind the writer
		defer close(ackDone)
		n := 0
		for bt := range out {
			for i := range bt.Records {
				if bt.Records[i].Err != nil {
					b.Error(bt.Records[i].Err)
				}
			}
			bt.End = 0
			free <- bt
			if n++; n%1024 == 0 {
				end := written.Load()
				log.Queue().DeleteFirst(4, func(f *segment.File) bool { return f.End() <= end-2*fileSize })
			}
		}
	}()

	b.SetBytes(int64(size * batchLen))
	b.ReportAllocs()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	mallocs := ms.Mallocs
	start := time.Now()
	var batches int64
	for b.Loop() {
		in <- <-free
		batches++
	}
	close(in)
	if err := <-runDone; err != nil {
		b.Fatal(err)
	}
	elapsed := time.Since(start)
	runtime.ReadMemStats(&ms)
	<-ackDone
	if err := <-allocDone; err != nil {
		b.Fatal(err)
	}
	records := float64(batches * int64(batchLen))
	if want := batches * int64(size*batchLen); a.Stats().Bytes != want {
		b.Fatalf("appended %d bytes, want %d", a.Stats().Bytes, want)
	}
	b.ReportMetric(records/elapsed.Seconds(), "records/s")
	b.ReportMetric(float64(ms.Mallocs-mallocs)/records, "allocs/record")
}
