package stages

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
)

// ackLog collects the batches the ack stage answers, in order.
type ackLog struct {
	mu   sync.Mutex
	done []*Batch
}

func (l *ackLog) record(b *Batch) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.done = append(l.done, b)
}

func (l *ackLog) ends() []int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var ends []int64
	for _, b := range l.done {
		ends = append(ends, b.End)
	}
	return ends
}

// stored makes a batch of stored records of the given sizes starting at phys.
func stored(l *ackLog, phys int64, sizes ...int32) *Batch {
	b := &Batch{Done: l.record}
	for _, n := range sizes {
		b.Records = append(b.Records, Record{PhysOffset: phys, Size: n})
		phys += int64(n)
	}
	b.End = phys
	return b
}

func runAcks(t *testing.T, ctx context.Context, a *Acks) <-chan error {
	t.Helper()
	res := make(chan error, 1)
	go func() { res <- a.Run(ctx) }()
	return res
}

func TestAcksAnswerInOrderOnceLevelReachesEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var log ackLog
		in := make(chan *Batch, 8)
		level := NewWatermark(0)
		res := runAcks(t, t.Context(), &Acks{In: in, Level: level})
		in <- stored(&log, 0, 40, 60) // End 100
		in <- stored(&log, 100, 100)  // End 200
		in <- stored(&log, 200, 100)  // End 300
		synctest.Wait()
		if got := log.ends(); len(got) != 0 {
			t.Fatalf("answered before the level moved: %v", got)
		}
		level.Advance(99)
		synctest.Wait()
		if got := log.ends(); len(got) != 0 {
			t.Fatalf("answered below End: %v", got)
		}
		level.Advance(150)
		synctest.Wait()
		if got := log.ends(); !slices.Equal(got, []int64{100}) {
			t.Fatalf("at 150: answered %v, want [100]", got)
		}
		level.Advance(1000) // one step past both: still answered in order
		synctest.Wait()
		if got := log.ends(); !slices.Equal(got, []int64{100, 200, 300}) {
			t.Fatalf("at 1000: answered %v", got)
		}
		for _, b := range log.done {
			for i, r := range b.Records {
				if r.Err != nil {
					t.Fatalf("batch %d record %d: %v", b.End, i, r.Err)
				}
			}
		}
		close(in)
		if err := <-res; err != nil {
			t.Fatalf("Run after a clean stop: %v", err)
		}
	})
}

func TestAcksFailedLevelMarksOnlyAboveFrozenMark(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var log ackLog
		in := make(chan *Batch, 8)
		level := NewWatermark(0)
		res := runAcks(t, t.Context(), &Acks{In: in, Level: level})

		gate := errors.New("disk full")
		b1 := stored(&log, 0, 100, 100, 100) // records end at 100, 200, 300
		b1.Records = append(b1.Records, Record{Err: gate})
		// A duplicate pointing below the frozen mark keeps its success.
		b2 := &Batch{Done: log.record, Records: []Record{{PhysOffset: 0, Size: 100, Duplicate: true}}, End: 100}
		b3 := stored(&log, 300, 50)
		in <- b1
		level.Advance(200)
		synctest.Wait()
		boom := errors.New("fsync failed")
		level.Fail(boom)
		in <- b2
		in <- b3
		synctest.Wait()
		if got := log.ends(); !slices.Equal(got, []int64{300, 100, 350}) {
			t.Fatalf("answered %v", got)
		}
		want := []error{nil, nil, boom, gate}
		for i, r := range b1.Records {
			if !errors.Is(r.Err, want[i]) || (want[i] == nil) != (r.Err == nil) {
				t.Errorf("b1 record %d (end %d): err %v, want %v", i, r.End(), r.Err, want[i])
			}
		}
		if err := b2.Records[0].Err; err != nil {
			t.Errorf("duplicate below the mark: %v", err)
		}
		if err := b3.Records[0].Err; !errors.Is(err, boom) {
			t.Errorf("batch above the mark: %v", err)
		}
		close(in)
		if err := <-res; err != nil {
			t.Fatal(err)
		}
	})
}

func TestAcksCancelAnswersQueuedWithError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var log ackLog
		in := make(chan *Batch, 8)
		level := NewWatermark(50)
		cause := errors.New("abort")
		ctx, cancel := context.WithCancelCause(context.Background())
		res := runAcks(t, ctx, &Acks{In: in, Level: level})

		b1 := stored(&log, 0, 40, 40) // waits for 80: the stage blocks here
		in <- b1
		synctest.Wait()
		b2 := stored(&log, 80, 20)
		b3 := stored(&log, 100, 20)
		in <- b2
		in <- b3
		cancel(cause)
		close(in) // the writer closes its output on its way out
		if err := <-res; err != nil {
			t.Fatalf("Run after cancel: %v", err)
		}
		if got := log.ends(); !slices.Equal(got, []int64{80, 100, 120}) {
			t.Fatalf("answered %v, want every queued batch in order", got)
		}
		if err := b1.Records[0].Err; err != nil {
			t.Errorf("record below the level (end 40): %v", err)
		}
		for _, r := range []Record{b1.Records[1], b2.Records[0], b3.Records[0]} {
			if r.Err == nil {
				t.Errorf("record ending at %d answered without error", r.End())
			}
		}
		// Nothing is left behind in In.
		if len(in) != 0 {
			t.Fatalf("%d batches left unanswered", len(in))
		}
	})
}

// TestAcksCancelKeepsSuccessBelowLevel: a batch still queued when the engine stops, but already
// covered by the level, is durable; its publisher must not be told it failed. With both In and
// ctx.Done ready, select picks either, so the case is repeated to cover both paths.
func TestAcksCancelKeepsSuccessBelowLevel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for round := range 20 {
			var log ackLog
			in := make(chan *Batch, 8)
			level := NewWatermark(0)
			ctx, cancel := context.WithCancel(context.Background())
			cancel() // the stage sees a cancelled context first thing
			below := stored(&log, 0, 10, 10)
			above := stored(&log, 20, 10)
			level.Advance(20)
			in <- below
			in <- above
			close(in)
			if err := <-runAcks(t, ctx, &Acks{In: in, Level: level}); err != nil {
				t.Fatal(err)
			}
			if got := log.ends(); !slices.Equal(got, []int64{20, 30}) {
				t.Fatalf("round %d: answered %v", round, got)
			}
			for i, r := range below.Records {
				if r.Err != nil {
					t.Fatalf("round %d: durable record %d failed: %v", round, i, r.Err)
				}
			}
			if err := above.Records[0].Err; !errors.Is(err, context.Canceled) {
				t.Fatalf("round %d: record above the level: %v, want context.Canceled", round, err)
			}
		}
	})
}
