package engine

import (
	"fmt"
	"sync/atomic"

	"github.com/rs/zerolog"
)

// noSpace is the refusal of writes while dispatch cannot build for want of disk space: the
// CommitLog had room for a record, but its ConsumeQueue or the IndexFile cannot grow. New
// messages then get ENOSPC (reply code 507) at once, rather than piling up behind a stalled
// dispatch until back-pressure blocks every publisher; dispatch retries (dispatch.Dispatcher's
// NoSpace) and writes resume when it goes on.
type noSpace struct {
	err atomic.Pointer[error]
	log zerolog.Logger
	// changed is told when the refusal starts (full) and ends: retention then runs a pass to
	// make room at once, and measures the disk again once dispatch has found room.
	changed func(full bool)
}

// set is the dispatcher's NoSpace hook: err while stalled, nil once it goes on.
func (n *noSpace) set(err error) {
	if err == nil {
		if n.err.Swap(nil) != nil {
			n.log.Info().Msg("disk space is back: dispatch goes on and writes resume")
			if n.changed != nil {
				n.changed(false)
			}
		}
		return
	}
	refusal := fmt.Errorf("engine: no disk space to grow the ConsumeQueue or the index (%w); writes resume once space is freed", err)
	if n.err.Swap(&refusal) == nil {
		n.log.Error().Err(err).Msg("no disk space for dispatch: refusing writes, retrying until space is freed")
		if n.changed != nil {
			n.changed(true)
		}
	}
}

// refusal is the error new writes get while dispatch is stalled, else nil.
func (n *noSpace) refusal() error {
	if p := n.err.Load(); p != nil {
		return *p
	}
	return nil
}

// engineGate is the appender's Gate (Engine.gate).
type engineGate struct{ e *Engine }

func (g engineGate) Admit() error { return g.e.gate() }

// gate is the appender's Gate: writes are refused while dispatch waits for space, or while
// retention sees the disk above its limit.
func (e *Engine) gate() error {
	if err := e.noSpace.refusal(); err != nil {
		return err
	}
	return e.retention.gate()
}
