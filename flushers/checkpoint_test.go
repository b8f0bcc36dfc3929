package flushers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketstore/engine/internal/store/checkpoint"
	"github.com/rocketstore/engine/stages"
)

// ckpFakes are in-memory ConsumeQueues, Index, DispatchInfo and Save that log every call in order.
type ckpFakes struct {
	mu     sync.Mutex
	events []string
	saved  []checkpoint.Checkpoint

	cqErr, indexErr, saveErr error
	// duringFlush runs inside FlushAll(0), for work that goes on while the flush runs.
	duringFlush func()

	ts, filled atomic.Int64
}

func (f *ckpFakes) log(ev string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, ev)
}

func (f *ckpFakes) FlushAll(least int) error {
	f.log(fmt.Sprintf("cq(%d)", least))
	if least == 0 && f.duringFlush != nil {
		f.duringFlush()
	}
	return f.cqErr
}

func (f *ckpFakes) Flush() error { f.log("index"); return f.indexErr }

func (f *ckpFakes) LastStoreTimestamp() int64 { return f.ts.Load() }
func (f *ckpFakes) IndexFilled() int64        { return f.filled.Load() }

func (f *ckpFakes) save(cp checkpoint.Checkpoint) error {
	f.log("save")
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.saveErr != nil {
		return f.saveErr
	}
	f.saved = append(f.saved, cp)
	return nil
}

func (f *ckpFakes) setSaveErr(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.saveErr = err
}

func (f *ckpFakes) snapshot() ([]string, []checkpoint.Checkpoint) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.events), slices.Clone(f.saved)
}

// count is how many times ev occurs in events.
func count(events []string, ev string) int {
	n := 0
	for _, e := range events {
		if e == ev {
			n++
		}
	}
	return n
}

func newCheckpointer(f *ckpFakes, durable, dispatched *stages.Watermark) *Checkpointer {
	return &Checkpointer{
		ConsumeQueues: f, Index: f, Info: f, Durable: durable, Dispatched: dispatched, Save: f.save,
	}
}

func runCheckpointer(ctx context.Context, c *Checkpointer) <-chan error {
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	return done
}

func TestCheckpointerSchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &ckpFakes{}
		c := newCheckpointer(f, stages.NewWatermark(0), stages.NewWatermark(0))
		c.Interval, c.LeastPages, c.ThoroughInterval = time.Second, 3, 60*time.Second
		start := time.Now()
		done := runCheckpointer(t.Context(), c)
		at := func(d time.Duration) []string {
			time.Sleep(start.Add(d).Sub(time.Now()))
			synctest.Wait()
			ev, _ := f.snapshot()
			return ev
		}
		if ev := at(time.Second - time.Nanosecond); len(ev) != 0 {
			t.Fatalf("before the first interval: %v", ev)
		}
		if ev := at(time.Second); !slices.Equal(ev, []string{"cq(3)"}) {
			t.Fatalf("at 1 s: %v", ev)
		}
		ev := at(60*time.Second - time.Nanosecond)
		if count(ev, "cq(3)") != 59 || len(ev) != 59 {
			t.Fatalf("before the thorough interval: %d events, %d light flushes", len(ev), count(ev, "cq(3)"))
		}
		ev = at(60 * time.Second)
		if got := ev[59:]; !slices.Equal(got, []string{"cq(0)", "index", "save"}) {
			t.Fatalf("at 60 s: %v, want a thorough flush then the checkpoint (and no light flush)", got)
		}
		ev = at(61 * time.Second)
		if got := ev[62:]; !slices.Equal(got, []string{"cq(3)"}) {
			t.Fatalf("at 61 s: %v", got)
		}
		ev = at(120 * time.Second)
		if count(ev, "save") != 2 || !slices.Equal(ev[len(ev)-3:], []string{"cq(0)", "index", "save"}) {
			t.Fatalf("at 120 s: %d saves, last events %v", count(ev, "save"), ev[len(ev)-3:])
		}
		if count(ev, "cq(3)") != 118 {
			t.Fatalf("%d light flushes in 120 s, want 118", count(ev, "cq(3)"))
		}
		c.Durable.Fail(nil)
		c.Dispatched.Fail(nil)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}

func TestCheckpointerDefaults(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &ckpFakes{}
		durable, dispatched := stages.NewWatermark(0), stages.NewWatermark(0)
		done := runCheckpointer(t.Context(), newCheckpointer(f, durable, dispatched))
		time.Sleep(time.Second)
		synctest.Wait()
		if ev, _ := f.snapshot(); !slices.Equal(ev, []string{"cq(2)"}) {
			t.Fatalf("at 1 s: %v, want RocketMQ's 2 pages every second", ev)
		}
		time.Sleep(59 * time.Second)
		synctest.Wait()
		if ev, _ := f.snapshot(); count(ev, "save") != 1 || count(ev, "cq(2)") != 59 {
			t.Fatalf("at 60 s: %d saves, %d light flushes", count(ev, "save"), count(ev, "cq(2)"))
		}
		durable.Fail(nil)
		dispatched.Fail(nil)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}

// TestCheckpointerMarksReadBeforeFlush: the checkpoint holds the offsets and timestamps read
// before the flush, which covers at least them; what moves during the flush is not yet covered.
func TestCheckpointerMarksReadBeforeFlush(t *testing.T) {
	for _, withIndex := range []bool{true, false} {
		t.Run(fmt.Sprintf("index=%v", withIndex), func(t *testing.T) {
			durable, dispatched := stages.NewWatermark(7000), stages.NewWatermark(5000)
			f := &ckpFakes{}
			f.ts.Store(1111)
			f.filled.Store(1000)
			f.duringFlush = func() {
				durable.Advance(9500)
				dispatched.Advance(9000)
				f.ts.Store(2222)
				f.filled.Store(2000)
			}
			c := newCheckpointer(f, durable, dispatched)
			if !withIndex {
				c.Index = nil
			}
			var told []checkpoint.Checkpoint
			c.Saved = func(cp checkpoint.Checkpoint) { told = append(told, cp) }
			if err := c.Thorough(); err != nil {
				t.Fatal(err)
			}
			ev, saved := f.snapshot()
			want := []string{"cq(0)", "index", "save"}
			indexTS := int64(1111) // with an index, at least the last record's timestamp
			if !withIndex {
				want = []string{"cq(0)", "save"}
				indexTS = 1000
			}
			if !slices.Equal(ev, want) {
				t.Fatalf("events %v, want %v", ev, want)
			}
			cp := checkpoint.Checkpoint{
				PhysicMsgTimestamp: 1111, LogicsMsgTimestamp: 1111, IndexMsgTimestamp: indexTS,
				Ext: checkpoint.Ext{Valid: true, DurableOffset: 7000, DispatchedOffset: 5000},
			}
			if len(saved) != 1 || saved[0] != cp {
				t.Fatalf("saved %+v, want %+v", saved, cp)
			}
			if len(told) != 1 || told[0] != cp {
				t.Fatalf("Saved told %+v", told)
			}
		})
	}
}

func TestCheckpointerCleanEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &ckpFakes{}
		durable, dispatched := stages.NewWatermark(0), stages.NewWatermark(0)
		c := newCheckpointer(f, durable, dispatched)
		c.Interval, c.ThoroughInterval = time.Second, time.Hour
		done := runCheckpointer(t.Context(), c)
		time.Sleep(5 * time.Second)
		durable.Advance(3000)
		dispatched.Advance(4000)
		f.ts.Store(77)
		stop := time.Now()
		dispatched.Fail(stages.ErrClosed) // dispatch ends first, as in async mode ...
		synctest.Wait()
		if ev, _ := f.snapshot(); count(ev, "save") != 0 {
			t.Fatal("the last checkpoint was written before the flusher's last sync")
		}
		durable.Advance(4000) // ... then the flusher's last sync
		durable.Fail(stages.ErrClosed)
		if err := <-done; err != nil {
			t.Fatalf("Run = %v", err)
		}
		if time.Since(stop) != 0 {
			t.Fatalf("the last checkpoint waited %v for a tick", time.Since(stop))
		}
		ev, saved := f.snapshot()
		if !slices.Equal(ev[len(ev)-3:], []string{"cq(0)", "index", "save"}) || count(ev, "save") != 1 {
			t.Fatalf("events %v", ev)
		}
		if cp := saved[0]; cp.Ext.DispatchedOffset != 4000 || cp.Ext.DurableOffset != 4000 || cp.PhysicMsgTimestamp != 77 {
			t.Fatalf("last checkpoint %+v", cp)
		}
	})
}

func TestCheckpointerNoSaveWhenDispatchFailed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &ckpFakes{}
		dispatched := stages.NewWatermark(0)
		c := newCheckpointer(f, stages.NewWatermark(100), dispatched)
		done := runCheckpointer(t.Context(), c)
		time.Sleep(1500 * time.Millisecond)
		dispatched.Advance(100)
		boom := errors.New("consumequeue gap")
		dispatched.Fail(boom)
		if err := <-done; !errors.Is(err, boom) {
			t.Fatalf("Run = %v, want %v", err, boom)
		}
		ev, _ := f.snapshot()
		if !slices.Equal(ev, []string{"cq(2)"}) {
			t.Fatalf("events %v: dispatch failed, the last good checkpoint must stay", ev)
		}
	})
}

func TestCheckpointerErrorsStop(t *testing.T) {
	boom := errors.New("EIO")
	for _, c := range []struct {
		name  string
		fakes *ckpFakes
		want  []string
	}{
		{"light flush", &ckpFakes{cqErr: boom}, []string{"cq(2)"}},
		{"index flush", &ckpFakes{indexErr: boom}, []string{"cq(0)", "index"}},
		{"save", &ckpFakes{saveErr: boom}, []string{"cq(0)", "index", "save"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := c.fakes
				ckp := newCheckpointer(f, stages.NewWatermark(0), stages.NewWatermark(0))
				ckp.Interval, ckp.ThoroughInterval = time.Second, time.Second
				if c.name == "light flush" {
					ckp.ThoroughInterval = time.Hour
				}
				start := time.Now()
				err := <-runCheckpointer(t.Context(), ckp)
				if !errors.Is(err, boom) {
					t.Fatalf("Run = %v", err)
				}
				if d := time.Since(start); d != time.Second {
					t.Fatalf("stopped after %v", d)
				}
				if ev, saved := f.snapshot(); !slices.Equal(ev, c.want) || len(saved) != 0 {
					t.Fatalf("events %v (want %v), saved %v", ev, c.want, saved)
				}
			})
		})
	}
}

func TestCheckpointerCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &ckpFakes{}
		ctx, cancel := context.WithCancel(context.Background())
		done := runCheckpointer(ctx, newCheckpointer(f, stages.NewWatermark(0), stages.NewWatermark(0)))
		synctest.Wait()
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("Run = %v", err)
		}
		if ev, _ := f.snapshot(); len(ev) != 0 {
			t.Fatalf("an abort flushed or saved: %v", ev)
		}
	})
}

// TestCheckpointerSealsDurable: once a checkpoint was written, every Interval in which the
// durable offset moved writes it again with the new durable offset (what recovery refuses to
// cut), and nothing else changed: not the dispatched offset, not RocketMQ's timestamps. An
// Interval in which it did not move writes nothing.
func TestCheckpointerSealsDurable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &ckpFakes{}
		durable, dispatched := stages.NewWatermark(0), stages.NewWatermark(0)
		c := newCheckpointer(f, durable, dispatched)
		c.Interval, c.ThoroughInterval = time.Second, time.Hour
		f.ts.Store(1000)
		dispatched.Advance(100)
		durable.Advance(100)
		if err := c.Thorough(); err != nil { // as Open does before Run
			t.Fatal(err)
		}
		done := runCheckpointer(t.Context(), c)
		durable.Advance(250)
		f.ts.Store(2000)
		time.Sleep(time.Second)
		synctest.Wait()
		_, saved := f.snapshot()
		if len(saved) != 2 {
			t.Fatalf("%d checkpoints, want the thorough one and one with the durable offset moved", len(saved))
		}
		if e := saved[1].Ext; e.DurableOffset != 250 || e.DispatchedOffset != 100 || saved[1].PhysicMsgTimestamp != 1000 {
			t.Fatalf("second checkpoint %+v", saved[1])
		}
		time.Sleep(time.Second) // nothing moved
		synctest.Wait()
		if _, saved := f.snapshot(); len(saved) != 2 {
			t.Fatalf("%d checkpoints after an interval in which nothing moved", len(saved))
		}
		durable.Fail(nil)
		dispatched.Fail(nil)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}

// TestCheckpointerNoSpaceGoesOn: a save refused for want of disk space (ENOSPC) does not stop
// the checkpointer, and so the engine: it logs once, tries a thorough flush and save at each
// tick while the disk stays full, and once space is back the checkpoint is written (and Saved
// told) with the marks of then; a last save refused at the stop ends Run cleanly. Each error
// other than a full disk still stops it (TestCheckpointerErrorsStop).
func TestCheckpointerNoSpaceGoesOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &ckpFakes{saveErr: fmt.Errorf("checkpoint: save: %w", syscall.ENOSPC)}
		durable, dispatched := stages.NewWatermark(100), stages.NewWatermark(100)
		c := newCheckpointer(f, durable, dispatched)
		c.Interval, c.ThoroughInterval = time.Second, time.Hour
		var logs bytes.Buffer
		c.Logger = zerolog.New(&logs)
		var told []checkpoint.Checkpoint
		c.Saved = func(cp checkpoint.Checkpoint) { told = append(told, cp) }
		if err := c.Thorough(); err != nil || !c.Behind() {
			t.Fatalf("Thorough on a full disk: %v, behind %v", err, c.Behind())
		}
		done := runCheckpointer(t.Context(), c)
		time.Sleep(3 * time.Second)
		synctest.Wait()
		ev, saved := f.snapshot()
		if count(ev, "save") != 4 || count(ev, "cq(0)") != 4 || len(saved) != 0 || len(told) != 0 {
			t.Fatalf("3 s on a full disk: events %v, saved %v", ev, saved)
		}
		if n := strings.Count(logs.String(), "no disk space to write the checkpoint"); n != 1 {
			t.Fatalf("logged %d times:\n%s", n, logs.String())
		}
		durable.Advance(200)
		dispatched.Advance(200)
		f.setSaveErr(nil)
		time.Sleep(time.Second)
		synctest.Wait()
		ev, saved = f.snapshot()
		if len(saved) != 1 || saved[0].Ext.DurableOffset != 200 || saved[0].Ext.DispatchedOffset != 200 || len(told) != 1 || c.Behind() {
			t.Fatalf("space back: saved %+v, told %d", saved, len(told))
		}
		if !strings.Contains(logs.String(), "checkpoint written again") {
			t.Fatalf("no line when space came back:\n%s", logs.String())
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if ev2, _ := f.snapshot(); !slices.Equal(ev2[len(ev):], []string{"cq(2)"}) {
			t.Fatalf("after the checkpoint was written again: %v, want light flushes only", ev2[len(ev):])
		}

		f.setSaveErr(syscall.ENOSPC)
		durable.Fail(nil)
		dispatched.Fail(nil)
		if err := <-done; err != nil {
			t.Fatalf("the last save refused for want of space: Run = %v, want nil", err)
		}
	})
}
