package stages

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
)

// isClosed reports whether ch is closed, without blocking.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestWatermarkWaitChanAfterReaching(t *testing.T) {
	w := NewWatermark(10)
	if !isClosed(w.WaitChan(10)) || !isClosed(w.WaitChan(-5)) {
		t.Fatal("WaitChan at or below the mark is not closed")
	}
	ch := w.WaitChan(11)
	if isClosed(ch) {
		t.Fatal("WaitChan above the mark is closed")
	}
	w.Advance(11)
	if !isClosed(ch) {
		t.Fatal("Advance did not close the waiter's channel")
	}
	if !isClosed(w.WaitChan(11)) {
		t.Fatal("WaitChan after reaching is not closed")
	}
	if err := w.Wait(context.Background(), 11); err != nil {
		t.Fatalf("Wait after reaching: %v", err)
	}
	if w.Err() != nil {
		t.Fatalf("Err = %v before any Fail", w.Err())
	}
}

func TestWatermarkWaitChanAfterFail(t *testing.T) {
	w := NewWatermark(7)
	before := w.WaitChan(8)
	never := w.WaitChan(math.MaxInt64) // how the flushers watch for the owner's end
	boom := errors.New("boom")
	w.Fail(boom)
	if !isClosed(before) || !isClosed(never) {
		t.Fatal("Fail did not close the channels of present waiters")
	}
	after := w.WaitChan(100)
	if !isClosed(after) {
		t.Fatal("WaitChan after Fail is not closed")
	}
	if got := w.Load(); got != 7 {
		t.Fatalf("Fail moved the mark to %d", got)
	}
	// The channel says "over"; Wait tells which way.
	if err := w.Wait(context.Background(), 100); !errors.Is(err, boom) {
		t.Fatalf("Wait above the frozen mark = %v, want %v", err, boom)
	}
	if err := w.Wait(context.Background(), 7); err != nil {
		t.Fatalf("Wait at the frozen mark = %v", err)
	}
}

func TestWatermarkMaxInt64ClosesOnlyOnFail(t *testing.T) {
	w := NewWatermark(0)
	ch := w.WaitChan(math.MaxInt64)
	for _, off := range []int64{1, 1 << 20, math.MaxInt64 - 1} {
		w.Advance(off)
		if isClosed(ch) {
			t.Fatalf("closed at %d", off)
		}
	}
	w.Fail(nil)
	if !isClosed(ch) || !errors.Is(w.Err(), ErrClosed) {
		t.Fatalf("after Fail(nil): closed=%v err=%v", isClosed(ch), w.Err())
	}
}

// TestWatermarkAdvanceOrder advances in shuffled orders (including steps down, which must be
// ignored) and checks after every call that exactly the waiters at or below the highest value so
// far are released.
func TestWatermarkAdvanceOrder(t *testing.T) {
	const n = 40
	for seed := range uint64(50) {
		rng := rand.New(rand.NewPCG(seed, 1))
		w := NewWatermark(0)
		chans := make([]<-chan struct{}, n+1)
		for off := n; off >= 1; off-- { // registered out of order too
			chans[off] = w.WaitChan(int64(off))
		}
		order := rng.Perm(n)
		var high int64
		for _, v := range order {
			off := int64(v + 1)
			w.Advance(off)
			high = max(high, off)
			if got := w.Load(); got != high {
				t.Fatalf("seed %d: Load = %d after advancing to %d, want %d", seed, got, off, high)
			}
			for o := 1; o <= n; o++ {
				if want := int64(o) <= high; isClosed(chans[o]) != want {
					t.Fatalf("seed %d: waiter at %d closed=%v with mark %d", seed, o, !want, high)
				}
			}
		}
	}
}

// TestWatermarkRace runs many waiters (some cancelled, some with WaitChan) against one owner
// that advances in random steps and then fails; meant for -race.
func TestWatermarkRace(t *testing.T) {
	const (
		waiters = 64
		final   = 10_000
	)
	w := NewWatermark(0)
	boom := errors.New("owner stopped")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, waiters)
	for i := range waiters {
		rng := rand.New(rand.NewPCG(uint64(i), 2))
		wg.Go(func() {
			for range 50 {
				off := rng.Int64N(final + 500) // some beyond the final mark: they must get boom
				var err error
				switch i % 3 {
				case 0:
					err = w.Wait(ctx, off)
				case 1:
					<-w.WaitChan(off)
					err = w.Wait(ctx, off) // returns at once now
				case 2:
					c, stop := context.WithCancel(ctx)
					stop() // a cancelled wait must not disturb the others
					if err = w.Wait(c, off); errors.Is(err, context.Canceled) {
						err = w.Wait(ctx, off)
					}
				}
				reached := w.Load() >= off
				switch {
				case err == nil && !reached:
					errs <- errors.New("Wait returned nil below the mark")
					return
				case err != nil && (!errors.Is(err, boom) || off <= final):
					errs <- err
					return
				}
			}
		})
	}
	rng := rand.New(rand.NewPCG(99, 3))
	for off := int64(0); off < final; {
		off = min(final, off+1+rng.Int64N(50))
		w.Advance(off)
	}
	w.Fail(boom)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestWatermarkConcurrentAdvance has several goroutines advance the mark at once (only the
// owner does in the engine, but Advance must still never move the mark down).
func TestWatermarkConcurrentAdvance(t *testing.T) {
	w := NewWatermark(0)
	waits := make([]<-chan struct{}, 0, 100)
	for off := int64(1); off <= 100; off++ {
		waits = append(waits, w.WaitChan(off*10))
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := int64(g); i <= 100; i += 8 {
				w.Advance(i * 10)
			}
		})
	}
	wg.Wait()
	if got := w.Load(); got != 1000 {
		t.Fatalf("Load = %d, want 1000", got)
	}
	for i, ch := range waits {
		if !isClosed(ch) {
			t.Fatalf("waiter at %d not released", (i+1)*10)
		}
	}
}

// TestWatermarkCancelledWaitIsForgotten: waits that end on their context leave nothing behind,
// so long polls that time out at an idle head do not pile up.
func TestWatermarkCancelledWaitIsForgotten(t *testing.T) {
	w := NewWatermark(0)
	for range 1000 {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := w.Wait(ctx, 10); !errors.Is(err, context.Canceled) {
			t.Fatal(err)
		}
	}
	if n := w.Waiters(); n != 0 {
		t.Fatalf("%d waiters left behind", n)
	}
}
