// Package flushers makes written data durable: the CommitLog flusher (group commit in sync
// mode, RocketMQ's periodic flush in async mode) owns the Durable watermark; the checkpointer
// flushes the ConsumeQueues and IndexFiles and writes the checkpoint; the cache dropper then
// takes what is durable, far enough behind the head, out of the page cache.
//
// A failed sync is sticky: it is never retried (after a failed fsync the kernel may have dropped
// the dirty pages, so a retry could "succeed" over lost data). The flusher fails Durable with the
// error, every waiter gets it, and the engine stops; recovery decides on restart what survived.
package flushers

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketstore/engine/stages"
)

// Syncer is what the CommitLog flusher needs of the log (commitlog.Log implements it).
type Syncer interface {
	// Flush makes every byte below target durable.
	Flush(target int64) error
}

// Mode is the CommitLog flush mode.
type Mode int

const (
	// Sync is group commit: Durable follows Written as fast as syncs complete, and one sync
	// releases every waiter at or below it.
	Sync Mode = iota
	// Async is RocketMQ's FlushRealTimeService: a flush every Interval when at least LeastPages
	// pages are dirty, and a thorough one every ThoroughInterval.
	Async
)

// CommitLog is the CommitLog flusher. It owns Durable.
type CommitLog struct {
	Log     Syncer
	Mode    Mode
	Written *stages.Watermark
	Durable *stages.Watermark

	// Async settings (RocketMQ defaults: 500 ms, 4 pages, 10 s).
	Interval         time.Duration
	LeastPages       int
	ThoroughInterval time.Duration

	// SlowSync is the sync duration above which a warning is logged (etcd warns at 1 s).
	SlowSync time.Duration
	Logger   zerolog.Logger
	// OnSync, when set, is told the duration and byte count of every sync (metrics).
	OnSync func(d time.Duration, bytes int64)
	// Urgent, in async mode, asks for a sync of everything written at once (capacity 1: a send
	// that finds it full is covered by the one pending). Engine.Sync uses it.
	Urgent chan struct{}

	syncs atomic.Int64
}

// Syncs is how many syncs the flusher has done.
func (f *CommitLog) Syncs() int64 { return f.syncs.Load() }

// Run flushes until Written is closed (then it syncs everything and returns nil) or a sync fails.
func (f *CommitLog) Run(ctx context.Context) (err error) {
	defer func() { f.Durable.Fail(cmp.Or(err, stages.ErrClosed)) }()
	if f.Mode == Async {
		return f.runAsync(ctx)
	}
	for {
		err := f.Written.Wait(ctx, f.Durable.Load()+1)
		if errors.Is(err, stages.ErrClosed) {
			return f.syncTo(f.Written.Load())
		}
		if err != nil {
			return err
		}
		if err := f.syncTo(f.Written.Load()); err != nil {
			return err
		}
	}
}

func (f *CommitLog) runAsync(ctx context.Context) error {
	interval := cmp.Or(f.Interval, 500*time.Millisecond)
	thorough := cmp.Or(f.ThoroughInterval, 10*time.Second)
	leastPages := cmp.Or(f.LeastPages, 4) // < 0: flush whatever is dirty every Interval
	tick := time.NewTicker(interval)
	defer tick.Stop()
	// The writer's end: WaitChan of an offset never reached closes only when Written is failed.
	writerDone := f.Written.WaitChan(math.MaxInt64)
	lastThorough := time.Now()
	for {
		urgent := false
		select {
		case <-tick.C:
		case <-f.Urgent: // nil when unset: never ready
			urgent = true
		case <-writerDone:
			if err := f.Written.Err(); !errors.Is(err, stages.ErrClosed) {
				return err
			}
			return f.syncTo(f.Written.Load())
		case <-ctx.Done():
			return ctx.Err()
		}
		target := f.Written.Load()
		least := leastPages
		if now := time.Now(); urgent || now.Sub(lastThorough) >= thorough {
			least, lastThorough = 0, now
		}
		if least > 0 && target/pageSize-f.Durable.Load()/pageSize < int64(least) {
			continue
		}
		if err := f.syncTo(target); err != nil {
			return err
		}
	}
}

const pageSize = 4096

func (f *CommitLog) syncTo(target int64) error {
	from := f.Durable.Load()
	if target <= from {
		return nil
	}
	start := time.Now()
	if err := f.Log.Flush(target); err != nil {
		f.Logger.Error().Err(err).Int64("from", from).Int64("to", target).Msg("commitlog sync failed; writes stop")
		return fmt.Errorf("commitlog: sync to %d: %w", target, err)
	}
	d := time.Since(start)
	f.syncs.Add(1)
	if f.OnSync != nil {
		f.OnSync(d, target-from)
	}
	if f.SlowSync > 0 && d > f.SlowSync {
		f.Logger.Warn().Dur("took", d).Int64("bytes", target-from).Msg("slow commitlog sync")
	}
	f.Durable.Advance(target)
	return nil
}
