package stages

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

func TestWatermarkReleasesWaitersInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := NewWatermark(10)
		if err := w.Wait(t.Context(), 10); err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var released []int64
		var wg sync.WaitGroup
		for _, off := range []int64{30, 20, 40} {
			wg.Go(func() {
				if err := w.Wait(t.Context(), off); err != nil {
					t.Error(err)
				}
				mu.Lock()
				released = append(released, off)
				mu.Unlock()
			})
		}
		synctest.Wait()
		if len(released) != 0 {
			t.Fatalf("released early: %v", released)
		}
		w.Advance(25)
		synctest.Wait()
		if len(released) != 1 || released[0] != 20 {
			t.Fatalf("after 25: %v", released)
		}
		w.Advance(15) // never moves down
		if w.Load() != 25 {
			t.Fatalf("moved down to %d", w.Load())
		}
		w.Advance(40)
		wg.Wait()
		if len(released) != 3 {
			t.Fatalf("after 40: %v", released)
		}
	})
}

func TestWatermarkFailIsSticky(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := NewWatermark(0)
		w.Advance(5)
		boom := errors.New("sync failed")
		errc := make(chan error, 1)
		go func() { errc <- w.Wait(context.Background(), 9) }()
		synctest.Wait()
		w.Fail(boom)
		if err := <-errc; !errors.Is(err, boom) {
			t.Fatalf("waiter got %v", err)
		}
		if err := w.Wait(context.Background(), 5); err != nil {
			t.Fatalf("wait below the frozen mark: %v", err)
		}
		if err := w.Wait(context.Background(), 6); !errors.Is(err, boom) {
			t.Fatalf("later waiter got %v", err)
		}
		w.Fail(ErrClosed)
		if !errors.Is(w.Err(), boom) {
			t.Fatal("second Fail replaced the first error")
		}
	})
}

func TestWatermarkWaitCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := NewWatermark(0)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := w.Wait(ctx, 1); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("got %v", err)
		}
	})
}

func TestGroupFirstErrorCancelsAll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, _ := NewGroup(context.Background())
		boom := errors.New("boom")
		g.Go("waiter", func(ctx context.Context) error {
			<-ctx.Done()
			return ctx.Err()
		})
		g.Go("failer", func(ctx context.Context) error { return boom })
		g.Go("clean", func(ctx context.Context) error { return nil })
		err := g.Wait()
		if !errors.Is(err, boom) || err.Error() != "failer: boom" {
			t.Fatalf("Wait = %v", err)
		}
	})
}

func TestGroupCleanStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, _ := NewGroup(context.Background())
		in := make(chan int)
		g.Go("consumer", func(ctx context.Context) error {
			for range in {
			}
			return nil
		})
		in <- 1
		close(in)
		if err := g.Wait(); err != nil {
			t.Fatal(err)
		}
	})
}

// TestGroupRunning: Running names the loops that have not returned, in the order they started,
// as they return.
func TestGroupRunning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, _ := NewGroup(context.Background())
		stop := map[string]chan struct{}{"a": make(chan struct{}), "b": make(chan struct{}), "c": make(chan struct{})}
		for _, name := range []string{"a", "b", "c"} {
			g.Go(name, func(context.Context) error { <-stop[name]; return nil })
		}
		if got := g.Running(); !slices.Equal(got, []string{"a", "b", "c"}) {
			t.Fatalf("Running = %v", got)
		}
		close(stop["b"])
		synctest.Wait()
		if got := g.Running(); !slices.Equal(got, []string{"a", "c"}) {
			t.Fatalf("after b returned: Running = %v", got)
		}
		close(stop["a"])
		close(stop["c"])
		if err := g.Wait(); err != nil || len(g.Running()) != 0 {
			t.Fatalf("Wait = %v, Running = %v", err, g.Running())
		}
	})
}

func TestDrain(t *testing.T) {
	ch := make(chan int, 10)
	for i := range 7 {
		ch <- i
	}
	batch, ok := Drain(ch, []int{-1}, 5)
	if !ok || len(batch) != 5 || batch[0] != -1 || batch[4] != 3 {
		t.Fatalf("%v %v", batch, ok)
	}
	batch, ok = Drain(ch, batch[:0], 5)
	if !ok || len(batch) != 3 {
		t.Fatalf("%v %v", batch, ok)
	}
	close(ch)
	if batch, ok = Drain(ch, batch[:0], 5); ok || len(batch) != 0 {
		t.Fatalf("closed: %v %v", batch, ok)
	}
}
