// Package dispatch is RocketMQ's "reput": the dispatcher follows the CommitLog up to a limit
// (Durable in sync mode, Written in async mode), builds what each record derives (its
// ConsumeQueue unit and IndexFile entries, through derive.Builder) and advances the Dispatched
// watermark. Recovery re-dispatches through the same Builder, so live traffic and recovery share
// one code path.
package dispatch

import (
	"cmp"
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/internal/store/derive"
	"github.com/rocketstore/engine/internal/vfs"
	"github.com/rocketstore/engine/stages"
)

// Reader is what the dispatcher needs of the CommitLog (commitlog.Log implements it).
type Reader interface {
	// Each calls fn for every record in [from, limit) and returns the offset after the last.
	Each(from, limit int64, chk commitlog.Check, fn func(phys int64, v commitlog.View) error) (int64, error)
}

var errStep = errors.New("dispatch: step done")

// Dispatcher follows the CommitLog and owns the Dispatched watermark.
type Dispatcher struct {
	Log     Reader
	Builder *derive.Builder
	// Limit is the watermark dispatch follows: Durable in sync mode, so that consumers never see
	// a record a crash could take back; Written in async mode, for the lowest latency.
	Limit      *stages.Watermark
	Dispatched *stages.Watermark
	// MaxStep bounds the bytes dispatched before Dispatched advances, so that waiters (the
	// appender's back-pressure, long polls) are released steadily under a large backlog;
	// MaxStepTime (DefaultMaxStepTime when 0) bounds the time, for records that are slow to
	// build (each of a new topic, whose files are made on the way).
	MaxStep     int64
	MaxStepTime time.Duration
	// NoSpace, when set, makes a full disk a pause rather than the end: when building fails with
	// ENOSPC (a ConsumeQueue or IndexFile cannot grow), NoSpace is told the error, the record is
	// tried again every RetryNoSpace (DefaultRetryNoSpace when 0) until it goes in or ctx ends,
	// and NoSpace(nil) is called once it went in. The record is safe in the CommitLog meanwhile,
	// and space can come back (retention, an operator); re-applying a record is harmless, as the
	// Builder skips what is built already. Without NoSpace, ENOSPC ends Run like any error.
	NoSpace      func(err error)
	RetryNoSpace time.Duration
	// Feed, when set, holds records the appender handed over (stages.DispatchFeed): those are
	// built without reading the log; everything else is read from it.
	Feed *stages.DispatchFeed

	round []stages.Dispatched // the feed's round being used, from next on
	next  int

	// early is set by StopEarly: once Limit is closed, Run returns at the next record.
	early atomic.Bool

	lastStoreTS atomic.Int64
	indexFilled atomic.Int64
}

// StopEarly makes a shutdown bounded: once Limit is closed, Run returns at the next record
// instead of dispatching everything below Limit, and Dispatched stays where it got to. The
// checkpoint then says so, and the next start dispatches the rest from there (recovery redoes
// [dispatched, end) through the same Builder). Before Limit is closed it changes nothing. Safe
// to call from any goroutine.
func (d *Dispatcher) StopEarly() { d.early.Store(true) }

// cutShort says whether Run is to stop before Limit (StopEarly during a shutdown).
func (d *Dispatcher) cutShort() bool { return d.early.Load() && d.Limit.Err() != nil }

// LastStoreTimestamp is the store timestamp of the last record dispatched (for the checkpoint).
func (d *Dispatcher) LastStoreTimestamp() int64 { return d.lastStoreTS.Load() }

// IndexFilled is the end timestamp of the last IndexFile that filled up.
func (d *Dispatcher) IndexFilled() int64 { return d.indexFilled.Load() }

// Run dispatches until Limit is closed and caught up with (a clean stop: it returns nil), or
// closed with StopEarly called (a bounded stop: it returns nil short of Limit), or an error.
// Records are read without CRC checks, as RocketMQ's reput does: they were written by this
// process, and recovery checked what was there before.
func (d *Dispatcher) Run(ctx context.Context) (err error) {
	defer func() { d.Dispatched.Fail(cmp.Or(err, stages.ErrClosed)) }()
	step := cmp.Or(d.MaxStep, 4<<20)
	chk := commitlog.Check{NoBodyCRC: true, NoPropCRC: true}
	stalled := false
	for {
		if d.cutShort() {
			return nil // stopped short of Limit: the next start dispatches the rest
		}
		from := d.Dispatched.Load()
		werr := d.Limit.Wait(ctx, from+1)
		if werr != nil && !errors.Is(werr, stages.ErrClosed) {
			return werr
		}
		limit := d.Limit.Load()
		if limit <= from {
			return nil // the limit is closed and everything below it is dispatched
		}
		end, err := d.dispatch(from, limit, from+step, chk)
		// A full disk with room in the CommitLog is a pause (see NoSpace); stopping (Limit
		// closed) is not the time to wait for space: Run stops short, as after StopEarly, and
		// the next start dispatches the rest.
		noSpace := err != nil && err != errStep && d.NoSpace != nil && vfs.IsNoSpace(err)
		stopping := noSpace && d.Limit.Err() != nil
		retry := noSpace && !stopping
		if err != nil && err != errStep && !noSpace {
			return err // nothing of a failed round counts
		}
		if end > from {
			if stalled { // before Advance, so that a waiter it wakes finds writes taken again
				stalled = false
				d.NoSpace(nil)
			}
			d.lastStoreTS.Store(d.Builder.LastStoreTimestamp)
			d.indexFilled.Store(d.Builder.IndexFilled)
			d.Dispatched.Advance(end)
		}
		if stopping {
			return nil
		}
		if retry {
			stalled = true
			d.NoSpace(err)
			if err := pause(ctx, cmp.Or(d.RetryNoSpace, DefaultRetryNoSpace)); err != nil {
				return err
			}
		}
	}
}

// dispatch builds the records in [from, limit) up to the first at or past stop, and returns
// where it got to. A record the feed holds at the position reached is built from the feed;
// otherwise the log is read from there up to the next record the feed holds.
func (d *Dispatcher) dispatch(from, limit, stop int64, chk commitlog.Check) (int64, error) {
	started, n := time.Now(), 0
	maxTime := cmp.Or(d.MaxStepTime, DefaultMaxStepTime)
	// over says the step is done: its bytes, its time (read every 64 records), or a stop.
	over := func(phys int64) bool {
		n++
		return phys >= stop || (n%64 == 0 && time.Since(started) >= maxTime) || d.cutShort()
	}
	fromLog := func(phys int64, v commitlog.View) error {
		if over(phys) {
			return errStep // Each returns phys: the record is left for the next round
		}
		return d.Builder.Apply(phys, v)
	}
	pos := from
	for pos < limit {
		if over(pos) {
			return pos, errStep
		}
		e := d.feedAt(pos)
		if e != nil && e.Phys == pos {
			if e.End() > limit {
				return pos, nil // limits fall between records; this one is not below it yet
			}
			f := derive.Fed{Phys: e.Phys, Size: e.Size, QueueID: e.QueueID, QueueOffset: e.QueueOffset,
				StoreTimestamp: e.StoreTimestamp, Topic: e.Topic, Index: derive.Index(e.Index)}
			if err := d.Builder.ApplyFed(&f); err != nil {
				return pos, err
			}
			d.next++
			pos = e.End()
			continue
		}
		upTo := limit
		if e != nil && e.Phys > pos {
			upTo = min(limit, e.Phys)
		}
		end, err := d.Log.Each(pos, upTo, chk, fromLog)
		if err != nil || end <= pos {
			return end, err
		}
		pos = end
	}
	return pos, nil
}

// feedAt returns the first record the feed holds at or past pos (dropping those below it, which
// the log path built already), or nil when it holds none.
func (d *Dispatcher) feedAt(pos int64) *stages.Dispatched {
	if d.Feed == nil {
		return nil
	}
	for {
		for d.next < len(d.round) {
			if e := &d.round[d.next]; e.Phys >= pos {
				return e
			}
			d.next++
		}
		if d.round != nil {
			d.Feed.Recycle(d.round)
			d.round, d.next = nil, 0
		}
		r, ok := d.Feed.Poll()
		if !ok {
			return nil
		}
		d.round, d.next = r, 0
	}
}

// DefaultMaxStepTime is Dispatcher.MaxStepTime's default.
const DefaultMaxStepTime = 50 * time.Millisecond

// DefaultRetryNoSpace is how often dispatch tries again a record it could not build for want
// of disk space.
const DefaultRetryNoSpace = 200 * time.Millisecond

// pause waits d or until ctx ends.
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
