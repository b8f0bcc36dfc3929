package flushers

import (
	"errors"
	"testing"

	"github.com/rocketstore/engine/internal/store/checkpoint"
	"github.com/rocketstore/engine/stages"
)

// TestCheckpointNeverAheadOfTheLog: recovery scans the log from the checkpoint's dispatched
// offset, so a checkpoint must never record it past the durable offset (in async mode dispatch
// follows the written offset, and a power cut loses what was not synced).
//
//   - async, the flusher running: the thorough flush asks it for a sync (Urgent) and waits, so
//     the checkpoint records what was dispatched, with its timestamps, and the log is durable
//     under every unit the flush made durable;
//   - the flusher gone (Durable failed), or no Urgent: the dispatched offset is cut to the
//     durable one, and the timestamps, which describe records that may be lost, are the last
//     checkpoint's.
func TestCheckpointNeverAheadOfTheLog(t *testing.T) {
	newCase := func() (*ckpFakes, *Checkpointer) {
		f := &ckpFakes{}
		c := newCheckpointer(f, stages.NewWatermark(0), stages.NewWatermark(0))
		f.ts.Store(1111)
		c.Dispatched.Advance(3000)
		c.Durable.Advance(3000)
		if err := c.Thorough(); err != nil { // a checkpoint of what is durable and dispatched
			t.Fatal(err)
		}
		c.Dispatched.Advance(9000) // dispatch runs ahead of the log
		c.Durable.Advance(7000)
		f.ts.Store(2222)
		return f, c
	}
	last := func(t *testing.T, f *ckpFakes) checkpoint.Checkpoint {
		t.Helper()
		_, saved := f.snapshot()
		if len(saved) != 2 {
			t.Fatalf("%d checkpoints saved", len(saved))
		}
		return saved[1]
	}

	t.Run("async", func(t *testing.T) {
		f, c := newCase()
		urgent := make(chan struct{}, 1)
		c.Urgent = urgent
		go func() { // the flusher: an urgent request syncs everything written
			<-urgent
			c.Durable.Advance(9500)
		}()
		if err := c.Thorough(); err != nil {
			t.Fatal(err)
		}
		cp := last(t, f)
		if cp.Ext.DispatchedOffset != 9000 || cp.Ext.DurableOffset != 9500 || cp.PhysicMsgTimestamp != 2222 {
			t.Fatalf("checkpoint %+v, want dispatched 9000 under durable 9500, timestamps 2222", cp)
		}
	})
	for _, c := range []struct {
		name  string
		setup func(*Checkpointer)
	}{
		{"no urgent", func(*Checkpointer) {}},
		{"flusher gone", func(c *Checkpointer) {
			c.Urgent = make(chan struct{}, 1)
			c.Durable.Fail(errors.New("sync failed"))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, ckp := newCase()
			c.setup(ckp)
			if err := ckp.Thorough(); err != nil {
				t.Fatal(err)
			}
			cp := last(t, f)
			if cp.Ext.DispatchedOffset != 7000 || cp.Ext.DurableOffset != 7000 || cp.PhysicMsgTimestamp != 1111 || cp.LogicsMsgTimestamp != 1111 {
				t.Fatalf("checkpoint %+v, want dispatched cut to durable 7000 and the last checkpoint's timestamps 1111", cp)
			}
		})
	}
}
