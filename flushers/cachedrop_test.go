package flushers

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/rocketstore/engine/stages"
)

// dropRecorder is a CacheLog that hands every call to the test.
type dropRecorder struct {
	calls chan [2]int64
	err   error
}

func (r *dropRecorder) DropCache(from, to int64) error {
	err := r.err // before the send: the test changes it once it has the call
	r.calls <- [2]int64{from, to}
	return err
}

// TestCacheDropperFollowsBothMarks: the dropper drops 2 MiB-aligned ranges, contiguous, up to
// Window below the lower of Durable and Dispatched and never past it, logs a failed drop once
// and goes on, and returns when a mark is closed.
func TestCacheDropperFollowsBothMarks(t *testing.T) {
	const mib = 1 << 20
	durable, dispatched := stages.NewWatermark(5*mib), stages.NewWatermark(5*mib)
	rec := &dropRecorder{calls: make(chan [2]int64), err: errors.New("fadvise: not today")}
	var logs bytes.Buffer
	d := &CacheDropper{Log: rec, Durable: durable, Dispatched: dispatched, Window: 8 * mib, Step: 2 * mib,
		From: 5 * mib, Logger: zerolog.New(&logs).Level(zerolog.WarnLevel)} // the debug line after each drop would race with the read below
	done := make(chan error, 1)
	go func() { done <- d.Run(context.Background()) }()
	want := func(from, to int64) {
		t.Helper()
		if got := <-rec.calls; got != [2]int64{from, to} {
			t.Fatalf("DropCache%v, want [%d MiB, %d MiB)", got, from/mib, to/mib)
		}
	}

	// It starts at the head (5 MiB, aligned down to 4), and waits for both marks to pass
	// 4 + 8 + 2 MiB: durable far ahead, dispatched behind, so dispatched sets the bound.
	durable.Advance(100 * mib)
	dispatched.Advance(15*mib + 123)
	want(4*mib, 6*mib) // 15 MiB - 8, aligned down
	dispatched.Advance(31 * mib)
	want(6*mib, 22*mib)
	rec.err = nil
	durable.Advance(200 * mib)
	dispatched.Advance(33 * mib)
	want(22*mib, 24*mib)
	if n := strings.Count(logs.String(), "could not be dropped"); n != 1 {
		t.Errorf("the failed drops were logged %d times, want once:\n%s", n, logs.String())
	}

	dispatched.Fail(stages.ErrClosed)
	if err := <-done; err != nil {
		t.Fatalf("Run after the mark closed: %v, want nil", err)
	}
	select {
	case c := <-rec.calls:
		t.Fatalf("a drop after the close: %v", c)
	default:
	}
}
