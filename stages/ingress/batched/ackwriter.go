package batched

import (
	"fmt"

	"github.com/rocketstore/engine/internal/wire"
)

// ackWriter encodes a stream's news as one ack message (wire.BatchAck), or several when it is
// longer than MaxAckBytes. Owned by the tracker goroutine; its buffers are reused.
type ackWriter struct {
	t       *Tracker
	s       *stream
	w       wire.BatchAckWriter
	item    []byte
	missing [][2]uint64
}

// write publishes s's news.
func (w *ackWriter) write(s *stream) {
	w.s = s
	w.w.Begin(s.id)
	for i := range s.runs {
		w.item = wire.AppendStoredRun(w.item[:0], &s.runs[i])
		w.add(wire.SectionStored)
	}
	for i := range s.refusals {
		w.item = wire.AppendRefusedRun(w.item[:0], &s.refusals[i])
		w.add(wire.SectionRefused)
	}
	w.missing = s.missing(w.missing[:0], maxMissingRanges)
	for _, r := range w.missing {
		w.item = wire.AppendMissing(w.item[:0], r)
		w.add(wire.SectionMissing)
		w.t.counters.missing.Add(int64(r[1] - r[0] + 1))
	}
	w.finish(s.through)
}

// evicted tells s's publisher that its stream was dropped from the table.
func (w *ackWriter) evicted(s *stream) {
	w.s = s
	w.w.Begin(s.id)
	w.w.Error(wire.CodeUnavailable, fmt.Sprintf(
		"stream evicted: the engine tracks at most %d streams; nothing was lost: what is still unanswered is answered as it is stored, or resent on its timeout", w.t.cfg.MaxStreams))
	w.finish(s.sentThrough)
}

// add appends w.item to the list section, first sending the message so far if the item would
// take it past the limit.
func (w *ackWriter) add(section string) {
	if w.w.Items() > 0 && w.w.Len()+len(w.item)+64 > w.t.cfg.MaxAckBytes {
		w.finish(w.s.sentThrough) // the positions of this part do not reach the new through
		w.w.Begin(w.s.id)
	}
	w.w.Add(section, w.item)
}

// finish closes the message with through and publishes it.
func (w *ackWriter) finish(through uint64) {
	w.t.send(w.s.ackTo, w.w.Finish(through))
}
