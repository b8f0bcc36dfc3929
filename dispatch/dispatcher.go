package dispatch

import (
	"cmp"
	"context"
	"errors"
	"sync/atomic"

	"github.com/rocketstore/engine/internal/store/commitlog"
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
	Builder *Builder
	// Limit is the watermark dispatch follows: Durable in sync mode, so that consumers never see
	// a record a crash could take back; Written in async mode, for the lowest latency.
	Limit      *stages.Watermark
	Dispatched *stages.Watermark
	// MaxStep bounds the bytes dispatched before Dispatched advances, so that waiters (the
	// appender's back-pressure, long polls) are released steadily under a large backlog.
	MaxStep int64

	lastStoreTS atomic.Int64
	indexFilled atomic.Int64
}

// LastStoreTimestamp is the store timestamp of the last record dispatched (for the checkpoint).
func (d *Dispatcher) LastStoreTimestamp() int64 { return d.lastStoreTS.Load() }

// IndexFilled is the end timestamp of the last IndexFile that filled up.
func (d *Dispatcher) IndexFilled() int64 { return d.indexFilled.Load() }

// Run dispatches until Limit is closed and caught up with (a clean stop: it returns nil) or an
// error. Records are read without CRC checks, as RocketMQ's reput does: they were written by
// this process, and recovery checked what was there before.
func (d *Dispatcher) Run(ctx context.Context) (err error) {
	defer func() { d.Dispatched.Fail(cmp.Or(err, stages.ErrClosed)) }()
	step := cmp.Or(d.MaxStep, 4<<20)
	chk := commitlog.Check{NoBodyCRC: true, NoPropCRC: true}
	for {
		from := d.Dispatched.Load()
		werr := d.Limit.Wait(ctx, from+1)
		if werr != nil && !errors.Is(werr, stages.ErrClosed) {
			return werr
		}
		limit := d.Limit.Load()
		if limit <= from {
			return nil // the limit is closed and everything below it is dispatched
		}
		stop := from + step
		end, err := d.Log.Each(from, limit, chk, func(phys int64, v commitlog.View) error {
			if phys >= stop {
				return errStep // Each returns phys: the record is left for the next round
			}
			return d.Builder.Apply(phys, v)
		})
		if err != nil && err != errStep {
			return err
		}
		if end > from {
			d.lastStoreTS.Store(d.Builder.LastStoreTimestamp)
			d.indexFilled.Store(d.Builder.IndexFilled)
			d.Dispatched.Advance(end)
		}
	}
}
