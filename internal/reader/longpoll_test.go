package reader

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rocketstore/engine/internal/vfs"
)

// TestLongPollLeavesNoWaiter: long polls at the head of an idle store that end by their wait
// running out or by their context leave no waiter on the Dispatched watermark; without it the
// waiters of an idle engine pile up until the next dispatch. The watermark is the real one;
// time is synctest's.
func TestLongPollLeavesNoWaiter(t *testing.T) {
	const polls = 64
	// run starts polls long polls at the head of queue T/0 with ctx, waits until every one of
	// them is blocked on the watermark, calls during, then collects their results.
	run := func(t *testing.T, s *testStore, ctx context.Context, wait time.Duration, during func()) []error {
		t.Helper()
		errs := make([]error, polls)
		var wg sync.WaitGroup
		for i := range polls {
			req := GetRequest{Topic: "T", Offset: 3, Wait: wait}
			if i%2 == 1 {
				req.Tags = []string{"other"} // filtered up to the head: waits too
			}
			wg.Go(func() {
				res, err := s.r.Get(ctx, req)
				if res.Status != OffsetOverflowOne && res.Status != NoMatchedMessage {
					t.Errorf("poll %d: %v", i, res.Status)
				}
				errs[i] = err
			})
		}
		synctest.Wait()
		if n := s.dispatched.Waiters(); n != polls {
			t.Fatalf("%d waiters while %d polls wait", n, polls)
		}
		if during != nil {
			during()
		}
		wg.Wait()
		if n := s.dispatched.Waiters(); n != 0 {
			t.Fatalf("%d waiters left behind by %d long polls", n, polls)
		}
		return errs
	}
	newStore := func(t *testing.T) *testStore {
		s := newTestStore(t, vfs.NewMem(), "/store", small)
		for i := range 3 {
			s.put(msg{body: body(i)})
		}
		return s
	}

	t.Run("timeout", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := newStore(t)
			for i, err := range run(t, s, t.Context(), time.Second, nil) {
				if err != nil {
					t.Fatalf("poll %d: %v", i, err)
				}
			}
		})
	})
	t.Run("woken by another queue, then timeout", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := newStore(t)
			errs := run(t, s, t.Context(), time.Second, func() {
				s.put(msg{queue: 1, body: body(100)}) // every poll wakes, reads, waits again
				synctest.Wait()
				if n := s.dispatched.Waiters(); n != polls {
					t.Fatalf("%d waiters after the wake-up", n)
				}
			})
			for i, err := range errs {
				if err != nil {
					t.Fatalf("poll %d: %v", i, err)
				}
			}
		})
	})
	t.Run("context cancelled", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := newStore(t)
			ctx, cancel := context.WithCancel(t.Context())
			for i, err := range run(t, s, ctx, time.Hour, cancel) {
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("poll %d: %v", i, err)
				}
			}
		})
	})
	t.Run("context deadline before the wait", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := newStore(t)
			ctx, cancel := context.WithTimeout(t.Context(), time.Second)
			defer cancel()
			for i, err := range run(t, s, ctx, time.Hour, nil) {
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("poll %d: %v", i, err)
				}
			}
		})
	})
}

// TestGetUnknownIsEmpty: with UnknownIsEmpty a queue the store does not have reads as an empty
// one, and a long poll on it is woken by its first message.
func TestGetUnknownIsEmpty(t *testing.T) {
	s := newTestStore(t, vfs.NewMem(), "/store", small)
	s.put(msg{body: body(0)}) // T/0 only
	if _, err := s.r.Get(t.Context(), GetRequest{Topic: "T", QueueID: 5}); !errors.Is(err, ErrUnknownQueue) {
		t.Fatalf("unknown queue: %v", err)
	}
	for _, req := range []GetRequest{{Topic: "T", QueueID: 5}, {Topic: "U", QueueID: 0}, {Topic: "T", QueueID: 5, Offset: 7}} {
		req.UnknownIsEmpty = true
		res, err := s.r.Get(t.Context(), req)
		if err != nil || res.Status != NoMessageInQueue || res.NextOffset != 0 || res.MaxOffset != 0 || len(res.Messages) != 0 {
			t.Fatalf("%+v: %+v, %v", req, res, err)
		}
	}
	res, errc, waits := poll(t, t.Context(), s.r, GetRequest{Topic: "T", QueueID: 5, UnknownIsEmpty: true, Wait: time.Hour})
	<-waits
	s.put(msg{queue: 4, body: body(1)}) // another queue: wakes, finds no queue 5 yet, waits again
	<-waits
	s.put(msg{queue: 5, body: body(2)})
	got := <-res
	noErr(t, <-errc)
	if got.Status != Found || len(got.Messages) != 1 || got.Messages[0].QueueID != 5 || got.NextOffset != 1 {
		t.Fatalf("%v, %d messages, next %d", got.Status, len(got.Messages), got.NextOffset)
	}
}
