package engine

import (
	"fmt"
	"slices"
	"time"
)

// stopReportEvery is how often a stop that is still waiting says so.
const stopReportEvery = time.Second

// reportStop logs what Close waits on until stopped is closed: at once, then every
// stopReportEvery. A stop after 20,000 new topics used to take seconds without a line; now the
// log says which stages are still running and what the slow ones have left: dispatch, the bytes
// it has not built yet (cut after DispatchStopTimeout), and the last checkpoint, which flushes
// every ConsumeQueue (at once, with one sync of the file system, past a few dozen).
func (e *Engine) reportStop(stopped <-chan struct{}) {
	start := time.Now()
	say := func(msg string) {
		running := e.group.Running()
		o := e.Offsets()
		e.opts.Logger.Info().Str("waiting_on", e.stopWaitingOn(running, o)).Strs("stages", running).
			Int64("not_dispatched_bytes", o.Written-o.Dispatched).Int("consumequeues", e.cq.Len()).
			Dur("elapsed", time.Since(start)).Msg(msg)
	}
	say("stopping: waiting for the pipeline to drain")
	tick := time.NewTicker(stopReportEvery)
	defer tick.Stop()
	for {
		select {
		case <-stopped:
			return
		case <-tick.C:
			say("stopping: still waiting")
		}
	}
}

// stopWaitingOn says in words what a stop waits on, given the stages still running.
func (e *Engine) stopWaitingOn(running []string, o Offsets) string {
	switch {
	case slices.Contains(running, "append"):
		return "the writer: the messages it holds"
	case slices.Contains(running, "dispatch"):
		return fmt.Sprintf("dispatch: %d bytes not yet in the ConsumeQueues and the index (it stops after %v)",
			o.Written-o.Dispatched, e.opts.DispatchStopTimeout)
	case slices.Contains(running, "checkpoint"):
		return fmt.Sprintf("the last checkpoint: flushing %d ConsumeQueues and the index", e.cq.MappedQueues())
	case len(running) > 0:
		return running[0]
	}
	return "nothing"
}
