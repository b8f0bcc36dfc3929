// Package engine is the composition root: it opens a store (lock, recovery), wires the stages
// with channels and watermarks, runs them in one group, and shuts them down in order; Serve
// does the same for an engine fed from NATS. It is the only package that knows every stage and
// every part of the engine; the parts never import it, each declares what it needs and this
// package wires them:
//
//	engine/recovery    Open's recovery and the queues' next offsets
//	engine/retention   the retention stage and the disk guard (the appender's Gate)
//	engine/natsserver  the embedded nats-server, the engine's connection, partition ownership
//	engine/readapi     the read API service
//	engine/replay      replays of a topic onto a subject
//	engine/lookup      what ingress asks of the store (resends, restart dedupe, replicated mode)
//	engine/monitor     the HTTP monitor (metrics, health, status, pprof)
//
// Data moves forward on channels (ingress -> appender -> acks); only offsets move backward, as
// watermarks with one owner each: Written (appender), Durable (CommitLog flusher), Dispatched
// (dispatcher). Back-pressure holds on every edge: the appender waits while dispatch lags by more
// than MaxDispatchLag, a full appender inbox blocks producers, a full ack queue blocks the
// appender.
package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	appender "github.com/rocketstore/engine/append"
	"github.com/rocketstore/engine/dispatch"
	"github.com/rocketstore/engine/engine/lookup"
	"github.com/rocketstore/engine/engine/monitor"
	"github.com/rocketstore/engine/engine/recovery"
	"github.com/rocketstore/engine/engine/retention"
	"github.com/rocketstore/engine/flushers"
	"github.com/rocketstore/engine/internal/reader"
	"github.com/rocketstore/engine/internal/store/checkpoint"
	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/internal/store/consumequeue"
	"github.com/rocketstore/engine/internal/store/derive"
	"github.com/rocketstore/engine/internal/store/indexfile"
	"github.com/rocketstore/engine/internal/store/meta"
	"github.com/rocketstore/engine/internal/store/offsets"
	"github.com/rocketstore/engine/internal/store/subjecttags"
	"github.com/rocketstore/engine/internal/vfs"
	"github.com/rocketstore/engine/stages"
)

// ErrClosed is returned for work offered to an engine that is closing or closed.
var ErrClosed = errors.New("engine: closed")

// Engine is an open store with its pipeline running.
type Engine struct {
	opts Options
	lock io.Closer

	log     *commitlog.Log
	cq      *consumequeue.Store
	starts  *recovery.QueueStarts // queues continuing another engine's offsets
	index   *indexfile.Service
	builder *derive.Builder

	recovery                  Recovery
	dispatchedTS, indexFilled int64 // after recovery, for the first checkpoint

	written, durable, dispatched *stages.Watermark

	in         chan *stages.Batch
	acks       chan *stages.Batch
	group      *stages.Group
	appender   *appender.Appender
	flusher    *flushers.CommitLog
	dispatcher *dispatch.Dispatcher

	reader  *reader.Reader
	offsets *offsets.Table // consumer groups' committed offsets

	// retention deletes old files and refuses writes on a full disk, or while dispatch waits
	// for disk space (engine/retention; the appender's Gate).
	retention *retention.Stage

	syncMetrics *monitor.SyncMetrics // sync latency and size histograms, fed by the flusher

	// producers guards sends on in: Submit holds it shared, Close takes it exclusively to close
	// in once no send is under way.
	producers sync.RWMutex
	closed    bool
	// stages that send on in by themselves (ingress), run in the group (producer.go).
	prodMu        sync.Mutex
	prods         []*producer
	prodsStopping bool
	// appended is closed when the writer has returned, drained once both the ack stage and the
	// reaper have: no batch's Done is called after it (Drained).
	appended, drained chan struct{}
	// sealed is the durable offset of the last checkpoint written (Stats.Sealed).
	sealed atomic.Int64
	// unsavedTags is the subject-tag set adopted at serve while the disk had no space to save
	// it (newIngress); saveTagsLater saves it once there is.
	unsavedTags atomic.Pointer[subjecttags.Set]
	// reads guards the stores against unmapping under a read: reads hold it shared.
	reads        sync.RWMutex
	storesClosed bool
	closeOnce    sync.Once
	closeErr     error
	aborted      atomic.Bool
}

// Open opens the store in opts.Dir (creating it if needed), recovers it and starts the pipeline.
func Open(opts Options) (_ *Engine, err error) {
	if opts.Dir == "" {
		return nil, errors.New("engine: no store directory")
	}
	opts = opts.withDefaults()
	if err := opts.check(); err != nil {
		return nil, err
	}
	if err := opts.Retention().Validate(); err != nil {
		return nil, err
	}
	e := &Engine{opts: opts}
	fsys := opts.FS
	if err := fsys.MkdirAll(opts.Dir); err != nil {
		return nil, err
	}
	if e.lock, err = meta.LockStore(fsys, opts.Dir); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			e.closeStores(true)
		}
	}()
	clean := true
	if _, aerr := fsys.Stat(filepath.Join(opts.Dir, meta.AbortFileName)); aerr == nil {
		clean = false
	}
	cp := recovery.LoadCheckpoint(fsys, filepath.Join(opts.Dir, checkpoint.FileName), opts.Logger)

	if e.log, err = commitlog.OpenLog(commitlog.LogOptions{
		FS: fsys, Dir: filepath.Join(opts.Dir, "commitlog"), FileSize: opts.CommitLogFileSize, Prefault: !opts.NoPrefault,
		Pwrite: !opts.MmapWrites,
	}); err != nil {
		return nil, err
	}
	if e.cq, err = consumequeue.Open(consumequeue.Options{FS: fsys, Root: opts.Dir, UnitsPerFile: opts.ConsumeQueueUnits}); err != nil {
		return nil, err
	}
	if skipped, err := e.cq.Load(); err != nil {
		return nil, err
	} else if len(skipped) > 0 {
		opts.Logger.Warn().Strs("entries", skipped).Msg("ignored entries in the consumequeue directory")
	}
	if n, bound := e.cq.Len(), e.cq.MaxMapped(); bound >= 0 && n > bound {
		opts.Logger.Warn().Int("queues", n).Int("max_mapped", bound).Int("vm_max_map_count", vfs.MaxMapCount()).
			Msg("more ConsumeQueues than can stay mapped: a load that uses them all maps and unmaps them as it goes, " +
				"which is slow; raise vm.max_map_count (sysctl) above the number of queues + 16384")
	}
	if !opts.NoIndex {
		if e.index, err = indexfile.Open(indexfile.Options{
			FS: fsys, Dir: filepath.Join(opts.Dir, "index"),
			Geometry: indexfile.Geometry{Slots: int32(opts.IndexSlots), Entries: int32(opts.IndexEntries)},
		}); err != nil {
			return nil, err
		}
	}
	e.builder = derive.NewBuilder(e.cq, e.index, nil)
	if e.offsets, err = offsets.Open(fsys, opts.Dir, offsets.Options{Sync: opts.FlushMode == FlushSync,
		MaxGroups: opts.MaxGroups, Now: opts.Now, Logger: opts.Logger}); err != nil {
		return nil, err
	}

	rep, next, err := recovery.Run(recovery.Stores{Log: e.log, ConsumeQueues: e.cq, Index: e.index, Builder: e.builder,
		Logger: opts.Logger}, cp, clean)
	if err != nil {
		return nil, err
	}
	e.recovery = rep
	e.dispatchedTS, e.indexFilled = e.builder.LastStoreTimestamp, e.builder.IndexFilled
	if e.dispatchedTS == 0 { // nothing was re-dispatched
		e.dispatchedTS = recovery.RecoveredTimestamp(cp, opts.Now().UnixMilli())
	}
	if e.starts, err = recovery.LoadQueueStarts(fsys, opts.Dir); err != nil {
		return nil, err
	}
	e.starts.Apply(next)
	r := e.recovery
	opts.Logger.Info().Bool("clean_exit", r.CleanExit).Bool("from_checkpoint", r.FromCheckpoint).
		Int64("start", r.Start).Int64("end", r.End).Int64("records", r.Records).Str("tail", r.Tail).
		Str("corrupt", r.Corrupt).Int64("cut_bytes", r.Cut).Strs("index_dropped", r.IndexDropped).
		Dur("took", r.Took).Msg("store recovered")
	if r.NoSpace != "" {
		opts.Logger.Error().Str("error", r.NoSpace).Int64("dispatched", r.Dispatched).Int64("end", r.End).
			Msg("no disk space to rebuild the ConsumeQueues and the index: the engine starts, refuses writes, " +
				"and dispatches the rest once space is freed (retention runs now)")
	}

	// A full disk does not stop a start: the writer's first record then tries again.
	if err := e.log.Start(); err != nil && !vfs.IsNoSpace(err) {
		return nil, err
	}
	end := e.log.MaxOffset()
	e.written, e.durable = stages.NewWatermark(end), stages.NewWatermark(end)
	e.dispatched = stages.NewWatermark(min(end, r.Dispatched))
	e.reader = reader.New(e.log, e.cq, e.index, e.dispatched, opts.StoreHost)
	// A read sees every message acked before it: it waits for dispatch to reach what acks wait
	// for (the level of start) when it finds nothing where such a message may be.
	if opts.FlushMode == FlushAsync {
		e.reader.SetAckLevel(e.written, 0)
	} else {
		e.reader.SetAckLevel(e.durable, 0)
	}
	if err := e.reader.LoadSubjectTags(fsys, opts.Dir); err != nil {
		return nil, err
	}
	if err := e.newRetention(); err != nil { // retention.go
		return nil, err
	}
	ckp := e.checkpointer()
	// From here on every record carries the whole-record CRC, unless turned off; a store that
	// already had it from an earlier offset keeps that one.
	ckp.PropCRCFrom = -1
	if !opts.NoPropCRC {
		ckp.PropCRCFrom = end
		if from := recovery.PropCRCFrom(cp); from >= 0 && from <= end {
			ckp.PropCRCFrom = max(from, e.recovery.NoPropCRCEnd)
		}
	}
	e.reader.SetPropCRCRule(reader.PropCRCRuleFrom(ckp.PropCRCFrom))
	if err := ckp.Thorough(); err != nil {
		return nil, fmt.Errorf("checkpoint after recovery: %w", err)
	}
	if ckp.Behind() && cp.Ext.Valid && !cp.Ext.Rewritten {
		// No disk space to write it (Checkpointer.save): the checkpoint on disk stands, and
		// recovery after a crash starts from its dispatched offset, below which retention may
		// delete, so that it can make room from the start.
		e.retention.Checkpointed(cp)
	}
	if err := meta.CreateAbort(fsys, opts.Dir, os.Getpid()); err != nil {
		return nil, err
	}
	if pid, err := meta.ReadAbortPID(fsys, opts.Dir); err != nil || pid != os.Getpid() {
		opts.Logger.Warn().Err(err).Int("pid", pid).
			Msg("no disk space to write this process's pid into the abort marker: the marker is there (a crash is taken for one), without the pid")
	}
	e.start(next, ckp)
	return e, nil
}

// start wires the stages and runs them: downstream first, so that nothing sends into a stage
// that is not running.
func (e *Engine) start(next map[appender.QueueKey]int64, ckp *flushers.Checkpointer) {
	o := e.opts
	e.in = make(chan *stages.Batch, o.AppendInbox)
	acks := make(chan *stages.Batch, o.AckQueue)
	e.acks = acks
	kick := make(chan struct{}, 1)
	e.group, _ = stages.NewGroup(context.Background())
	e.syncMetrics = monitor.NewSyncMetrics()

	e.flusher = &flushers.CommitLog{
		Log: e.log, Mode: flushers.Sync, Written: e.written, Durable: e.durable, Urgent: make(chan struct{}, 1),
		Interval: o.FlushInterval, LeastPages: o.FlushLeastPages, ThoroughInterval: o.FlushThoroughInterval,
		SlowSync: o.SlowSync, Logger: o.Logger.With().Str("stage", "flush").Logger(),
		OnSync: e.syncMetrics.Observe, // one histogram Observe per sync
	}
	limit, level := e.durable, e.durable
	if o.FlushMode == FlushAsync {
		e.flusher.Mode = flushers.Async
		limit, level = e.written, e.written
		ckp.Urgent = e.flusher.Urgent // a checkpoint never records a dispatched offset past the durable one
	}
	// The appender hands each round's records to dispatch, which then need not read them back.
	// 256 Ki records (about 16 MiB) are far more than dispatch lags by in steady state; a full
	// feed only drops rounds, which dispatch reads from the log.
	feed := stages.NewDispatchFeed(256 << 10)
	e.dispatcher = &dispatch.Dispatcher{Log: e.log, Builder: e.builder, Limit: limit, Dispatched: e.dispatched,
		NoSpace: e.retention.NoSpace, Feed: feed}
	dedupeMax := o.DedupeMax
	if dedupeMax < 0 {
		dedupeMax = 0
	}
	acfg := appender.Config{
		Log: e.log, In: e.in, Out: acks, Written: e.written, Dispatched: e.dispatched,
		MaxLag: o.MaxDispatchLag, MaxBatch: o.MaxAppendBatch, NextOffsets: next, StartOffset: e.starts.Start,
		DedupeWindow: o.DedupeWindow, DedupeMax: dedupeMax, Kick: kick, Now: o.Now,
		Gate: e.retention, Feed: feed, MaxQueueOffset: e.cq.MaxQueueOffset(),
	}
	if e.index != nil && !o.forgetPastDedupeMax {
		// Ids past the window's memory bound are found in the IndexFile for the rest of their
		// window (append/dedupe.go); ingress looks most of them up (engine/ingress.go).
		acfg.Lookup = lookup.Finder{Store: e, Indexed: true, Logger: o.Logger}.AppenderLookup
	}
	e.appender = appender.New(acfg)
	e.retention.CheckDisk(o.Now()) // before the first batch: a full disk refuses from the start
	alloc := &appender.Allocator{Prepare: e.log.PrepareNext, Kick: kick, Log: o.Logger.With().Str("stage", "allocate").Logger()}
	if o.MmapWrites && !o.NoPrefault {
		alloc.Warm = e.log.WarmActive
	}
	ack := &stages.Acks{In: acks, Level: level, Durable: e.durable}

	e.appended, e.drained = make(chan struct{}), make(chan struct{})
	acksDone, reaped := make(chan struct{}), make(chan struct{})
	go func() {
		<-acksDone
		<-reaped
		close(e.drained)
	}()
	e.group.Go("reap", func(ctx context.Context) error {
		defer close(reaped)
		return e.reap(ctx)
	})
	e.group.Go("checkpoint", ckp.Run)
	e.group.Go("dispatch", e.dispatcher.Run)
	e.group.Go("flush", e.flusher.Run)
	e.group.Go("allocate", alloc.Run)
	e.group.Go("acks", func(ctx context.Context) error {
		defer close(acksDone)
		return ack.Run(ctx)
	})
	e.group.Go("append", func(ctx context.Context) error {
		defer close(e.appended)
		return e.appender.Run(ctx)
	})
	if o.FlushMode != FlushSync {
		e.group.Go("offsets", func(ctx context.Context) error { return e.syncOffsets(ctx, o.OffsetPersistInterval) })
	}
	e.group.Go("retention", e.retention.Run)
	if o.CommitLogCache > 0 {
		e.group.Go("cache", (&flushers.CacheDropper{Log: e.log, Durable: e.durable, Dispatched: e.dispatched,
			Window: o.CommitLogCache, From: e.dispatched.Load(), Logger: o.Logger.With().Str("stage", "cache").Logger()}).Run)
	}
}

func (e *Engine) checkpointer() *flushers.Checkpointer {
	o := e.opts
	c := &flushers.Checkpointer{
		ConsumeQueues: e.cq, Info: e, Durable: e.durable, Dispatched: e.dispatched,
		Save: func(cp checkpoint.Checkpoint) error {
			return checkpoint.Save(o.FS, filepath.Join(o.Dir, checkpoint.FileName), cp)
		},
		Interval: o.CQFlushInterval, LeastPages: o.CQFlushLeastPages, ThoroughInterval: o.CQFlushThoroughInterval,
		Logger: o.Logger.With().Str("stage", "checkpoint").Logger(),
		Saved: func(cp checkpoint.Checkpoint) {
			e.sealed.Store(cp.Ext.DurableOffset)
			e.retention.Checkpointed(cp) // retention deletes only below the last checkpoint
		},
	}
	if e.index != nil {
		c.Index = e.index
	}
	return c
}

// LastStoreTimestamp is the store timestamp of the last record dispatched.
func (e *Engine) LastStoreTimestamp() int64 {
	if e.dispatcher != nil {
		if ts := e.dispatcher.LastStoreTimestamp(); ts > 0 {
			return ts
		}
	}
	return e.dispatchedTS
}

// IndexFilled is the end timestamp of the last IndexFile that filled up.
func (e *Engine) IndexFilled() int64 {
	if e.dispatcher != nil {
		if ts := e.dispatcher.IndexFilled(); ts > 0 {
			return ts
		}
	}
	return e.indexFilled
}

// Recovery reports what Open found and did before taking traffic (engine/recovery).
type Recovery = recovery.Report

// Recovery is what Open found and did.
func (e *Engine) Recovery() Recovery { return e.recovery }

// Submit hands a batch of encoded records to the writer. It blocks while the writer's inbox is
// full (back-pressure) and fails with ErrClosed once the engine is closing. b.Done is called
// exactly once, by the ack stage, unless Submit returns an error.
func (e *Engine) Submit(ctx context.Context, b *stages.Batch) error {
	e.producers.RLock()
	defer e.producers.RUnlock()
	if e.closed {
		return ErrClosed
	}
	select {
	case <-e.group.Done():
		return fmt.Errorf("%w: %w", ErrClosed, e.group.Err())
	default:
	}
	select {
	case e.in <- b:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-e.group.Done():
		return fmt.Errorf("%w: %w", ErrClosed, e.group.Err())
	}
}

// reap is the stage that answers what is left in the writer's inbox once the writer has
// stopped, so that no producer waits for ever on a batch nobody will take: after a fatal error
// the writer is gone while producers may have put batches in. It waits for the writer (a clean
// stop, or the first error), marks the engine closed for later sends (under the producers' lock,
// so no Submit is sending while it does), waits for every producer stage to return, and then
// drains the inbox, which nothing sends on any more.
func (e *Engine) reap(ctx context.Context) error {
	select {
	case <-e.appended:
	case <-ctx.Done():
	}
	e.producers.Lock()
	e.closed = true
	e.producers.Unlock()
	e.prodMu.Lock()
	prods := e.prods
	e.prodMu.Unlock()
	for _, p := range prods {
		<-p.done
	}
	<-e.appended // it returns on the error too; from here on nobody reads the inbox
	err := e.group.Err()
	if err == nil {
		err = ErrClosed
	}
	for range cap(e.in) + 1 { // bounded: nothing sends any more
		select {
		case b, ok := <-e.in:
			if !ok {
				return nil
			}
			for i := range b.Records {
				if b.Records[i].Err == nil {
					b.Records[i].Err = fmt.Errorf("%w: %w", ErrClosed, err)
				}
			}
			b.Done(b)
		default:
			return nil
		}
	}
	return nil
}

// Drained is closed once no batch's Done is called any more: the ack stage has answered every
// batch the writer took and the reaper every batch it did not. A stage fed by Done (the
// batched-ack tracker) runs until then (RunStage), whatever ended the pipeline.
func (e *Engine) Drained() <-chan struct{} { return e.drained }

// Done is closed when the pipeline has stopped (after Close, or on a fatal error).
func (e *Engine) Done() <-chan struct{} { return e.group.Done() }

// Err is the error that stopped the pipeline, if any.
func (e *Engine) Err() error { return e.group.Err() }

// Failure is the error that stopped the pipeline when it failed: nil while it runs, after a
// clean stop and after Abort (a deliberate stop).
func (e *Engine) Failure() error {
	if err := e.group.Err(); err != nil && !errors.Is(err, errAborted) {
		return err
	}
	return nil
}

// Close stops the engine cleanly: no new batches are taken, every stage drains in order (the
// writer, the final sync, dispatch, the last checkpoint), the abort file is removed, and the
// store is unlocked. Producer stages (RunProducer) are stopped first, and waited for; other
// callers of Submit must have stopped. If a stage failed, the abort file stays, so that the
// next Open recovers.
func (e *Engine) Close() error {
	e.closeOnce.Do(func() {
		e.stopProducers()
		e.producers.Lock()
		e.closed = true
		close(e.in) // only Close closes it (the reaper only drains it)
		e.producers.Unlock()
		if t := e.opts.DispatchStopTimeout; t > 0 && e.dispatcher != nil {
			cut := time.AfterFunc(t, e.dispatcher.StopEarly)
			defer cut.Stop()
		}
		began := time.Now()
		stopped := make(chan struct{})
		go e.reportStop(stopped)
		err := e.group.Wait()
		close(stopped)
		drained := time.Since(began)
		if left := e.written.Load() - e.dispatched.Load(); err == nil && left > 0 {
			e.opts.Logger.Warn().Int64("not_dispatched_bytes", left).Dur("dispatch_stop_timeout", e.opts.DispatchStopTimeout).
				Msg("stopped before dispatch caught up: the next start dispatches the rest from the checkpoint")
		}
		switch {
		case err == nil:
			err = meta.RemoveAbort(e.opts.FS, e.opts.Dir)
		case errors.Is(err, errAborted):
			err = nil
		default:
			e.opts.Logger.Error().Err(err).Msg("pipeline stopped with an error; the next start will recover")
		}
		e.closeErr = errors.Join(err, e.closeStores(e.aborted.Load()))
		e.opts.Logger.Info().Dur("took", time.Since(began)).Dur("pipeline", drained).Int("consumequeues", e.cq.Len()).
			Msg("store closed")
	})
	return e.closeErr
}

var errAborted = errors.New("engine: aborted")

// Abort stops every stage at once without draining (as a crash would, short of losing the page
// cache): nothing more is written or synced, and the abort file stays, so the next Open
// recovers. Pending publishers get an error reply.
func (e *Engine) Abort() error {
	e.aborted.Store(true)
	e.group.Cancel(errAborted)
	return e.Close()
}

// closeStores unmaps everything; after an abort it flushes nothing more, as a crash would.
func (e *Engine) closeStores(abort bool) error {
	e.reads.Lock()
	e.storesClosed = true
	e.reads.Unlock()
	var errs []error
	if e.offsets != nil {
		if abort {
			e.offsets.Abandon() // as a crash: the journal holds what was answered
		} else {
			// RocketMQ's consumerOffset.json gets every group's progress. On a full disk it
			// cannot: the journal, which holds every commit answered, stays for the next start.
			if err := e.offsets.Close(); vfs.IsNoSpace(err) {
				e.opts.Logger.Error().Err(err).Msg("no disk space to fold the consumer offsets journal into consumerOffset.json at the stop: " +
					"the journal keeps every commit, and the next start folds it")
			} else {
				errs = append(errs, err)
			}
		}
	}
	if e.index != nil {
		if abort {
			errs = append(errs, e.index.Abandon())
		} else {
			errs = append(errs, e.index.Close())
		}
	}
	if e.cq != nil {
		errs = append(errs, e.cq.Close())
	}
	if e.log != nil {
		errs = append(errs, e.log.Close())
	}
	if e.lock != nil {
		errs = append(errs, e.lock.Close())
	}
	return errors.Join(errs...)
}

// WaitDispatched returns once every record below off is in its ConsumeQueue and the IndexFile
// (readers see a record from then on), or with the reason it never will be.
func (e *Engine) WaitDispatched(ctx context.Context, off int64) error {
	return e.dispatched.Wait(ctx, off)
}

// WaitDurable waits until the CommitLog is durable (synced) up to off. In async mode that is the
// next flush.
func (e *Engine) WaitDurable(ctx context.Context, off int64) error {
	return e.durable.Wait(ctx, off)
}

// Sync makes everything written so far durable now, in either flush mode, and returns once it is
// (an async engine otherwise waits for its next flush: up to FlushThoroughInterval with few dirty
// pages).
func (e *Engine) Sync(ctx context.Context) error {
	end := e.written.Load()
	select {
	case e.flusher.Urgent <- struct{}{}:
	default: // one pending already covers this
	}
	return e.durable.Wait(ctx, end)
}

// Offsets are the pipeline's watermarks.
type Offsets struct {
	Written, Durable, Dispatched int64
}

// Offsets returns the current watermarks.
func (e *Engine) Offsets() Offsets {
	return Offsets{Written: e.written.Load(), Durable: e.durable.Load(), Dispatched: e.dispatched.Load()}
}
