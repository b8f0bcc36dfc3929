package flushers

import (
	"context"

	"github.com/rs/zerolog"

	"github.com/rocketstore/engine/stages"
)

// CacheLog is what CacheDropper needs of the CommitLog (commitlog.Log implements it).
type CacheLog interface {
	// DropCache takes [from, to), durable already, out of the page cache.
	DropCache(from, to int64) error
}

// CacheDropper keeps the CommitLog's page cache to a window behind the log's head: the bytes
// more than Window below both Durable and Dispatched leave the cache as the head moves on. The
// kernel would keep every page the log wrote until memory runs out, and writing into a page
// cache that only grows costs it far more CPU per page than reusing pages just dropped
// (benchmarks/RESULTS.md §9): a log written for minutes then spends more CPU in pwrite than in
// everything else it does. What is dropped stays in the files, and a reader of older data reads
// it back from the disk; readers of the tail, dispatch and the flusher only touch the window.
type CacheDropper struct {
	Log                 CacheLog
	Durable, Dispatched *stages.Watermark
	// Window is how many bytes below the head stay cached; Step how far the head moves between
	// two drops (DefaultCacheStep when under 2 MiB).
	Window, Step int64
	// From is where the drops start: the head when the engine starts (what the previous run
	// left cached is the kernel's to manage).
	From   int64
	Logger zerolog.Logger
}

// DefaultCacheStep is CacheDropper.Step's default: a few drops a second at hundreds of MB/s.
const DefaultCacheStep = 16 << 20

// cacheAlign aligns the ranges dropped: the page cache holds a file in folios of up to 2 MiB,
// naturally aligned, and keeps one that reaches outside a range dropped, so that unaligned
// steps would leave one behind at every boundary.
const cacheAlign = 2 << 20

// DefaultCacheWindow is the window the engine keeps by default: seconds of the log at full
// speed, minutes at a moderate rate.
const DefaultCacheWindow = 1 << 30

// Run drops the cache behind the window until Durable or Dispatched is closed (or fails: its
// owner reports that). A failed drop is logged once and Run goes on: it is only a hint.
func (d *CacheDropper) Run(ctx context.Context) error {
	step := d.Step
	if step < cacheAlign {
		step = DefaultCacheStep
	}
	dropped := d.From &^ (cacheAlign - 1)
	logged := false
	for {
		next := dropped + d.Window + step
		if d.Durable.Wait(ctx, next) != nil || d.Dispatched.Wait(ctx, next) != nil {
			return ctx.Err() // or a watermark closed: its owner reports how it ended
		}
		// At least dropped + step, aligned down: past dropped, as step is at least cacheAlign.
		upTo := (min(d.Durable.Load(), d.Dispatched.Load()) - d.Window) &^ (cacheAlign - 1)
		if err := d.Log.DropCache(dropped, upTo); err != nil && !logged {
			logged = true
			d.Logger.Warn().Err(err).Int64("window", d.Window).
				Msg("the CommitLog's page cache could not be dropped behind the window (logged once): the kernel keeps it, at more CPU per write")
		}
		d.Logger.Debug().Int64("from", dropped).Int64("up_to", upTo).Msg("commitlog cache dropped")
		dropped = upTo
	}
}
