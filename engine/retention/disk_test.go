package retention

import (
	"errors"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rocketstore/engine/internal/vfs"
)

// diskStage is a Stage over a disk whose use the test sets (percent); no stores: Admit,
// NoSpace and CheckDisk touch none.
func diskStage(t *testing.T, pct *atomic.Int64, now func() time.Time) *Stage {
	t.Helper()
	r, err := New(Config{
		Dirs: []string{"/store/commitlog"}, Now: now,
		Usage: func(string) (vfs.Usage, error) {
			free := uint64(100-pct.Load()) << 20
			return vfs.Usage{Total: 100 << 20, Free: free, Avail: free}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestAdmitRefusals: the appender's Gate refuses while dispatch waits for space (ENOSPC, the
// cause kept), and while the disk is above DiskWarningRatio (a *DiskFullError); the dispatch
// refusal is the one given while both hold; each refusal that starts asks for a pass at once,
// and the end of the dispatch stall measures the disk again.
func TestAdmitRefusals(t *testing.T) {
	var pct atomic.Int64
	pct.Store(50)
	clock := time.Unix(1_700_000_000, 0)
	r := diskStage(t, &pct, func() time.Time { return clock })
	if err := r.Admit(); err != nil || r.Stats().RefusingWrites {
		t.Fatalf("at 50%%: %v", err)
	}

	cause := errors.New("consumequeue: grow: no space left on device")
	r.NoSpace(cause)
	err := r.Admit()
	if !errors.Is(err, cause) || !r.Stats().RefusingWrites {
		t.Fatalf("while dispatch waits for space: %v", err)
	}
	select {
	case <-r.urgent:
	default:
		t.Fatal("the stall asked for no pass")
	}

	pct.Store(95)
	if got := r.CheckDisk(clock); got != 95 {
		t.Fatalf("measured %d%%", got)
	}
	<-r.urgent // the disk refusal starting asks for one too
	if err := r.Admit(); !errors.Is(err, cause) {
		t.Fatalf("both refusing: %v, want the dispatch stall's", err)
	}

	pct.Store(40)
	clock = clock.Add(time.Millisecond) // no recheck by Admit: the stall's end measures
	r.NoSpace(nil)
	if err := r.Admit(); err != nil || r.Stats().RefusingWrites || r.Stats().DiskUsedRatio != 0.4 {
		t.Fatalf("after the stall, at 40%%: %v, %+v", err, r.Stats())
	}

	pct.Store(91)
	r.CheckDisk(clock)
	var full *DiskFullError
	if err := r.Admit(); !errors.As(err, &full) || !errors.Is(err, syscall.ENOSPC) || full.UsedPercent != 91 || full.LimitPercent != 90 {
		t.Fatalf("at 91%%: %v", err)
	}
}
