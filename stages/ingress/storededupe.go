package ingress

import (
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/rocketstore/engine/stages"
	"github.com/rocketstore/engine/stages/ingress/batched"
)

// StoreDedupe carries the dedupe window of publisher message ids (Nats-Msg-Id) where the
// appender's memory of it does not reach. The appender's window lives in memory: it starts empty
// at a start, and it holds at most DedupeMax ids, which a high rate of new ids fills long before
// the window ends (256 k ids/s fill 500,000 in 2 s). A publisher that retries after that, or
// while the engine restarts (docs/SCALE-OUT.md tells it to, with the same id), would get its
// message stored twice. So, while a record stored before the start can still be within the
// window (RestartUntil), and while ids the appender dropped from memory can (Forgotten), a worker
// looks a message's id up in the store before encoding it; found, the message is answered as a
// duplicate with the first copy's position and not stored.
//
// Cost: one store lookup (the IndexFile) per message with a Nats-Msg-Id, on the workers, and only
// during those times: nothing when the store was empty or idle for longer than the window before
// the start and the window's memory holds every id of the window. Messages of batched-ack streams
// are not concerned (their resends are looked up anyway, batched.Config.Lookup; the appender looks
// the others up itself when it must).
type StoreDedupe struct {
	// RestartUntil is when the window of the last record stored before the start ends (its store
	// time plus the window): from then on no record from before the start can be a first copy.
	// Zero: none can.
	RestartUntil time.Time
	// Forgotten, when set, is the appender's (appender.Appender.Forgotten): the ids up to sequence
	// checked passed the bound of its memory, and until (Unix ns) some of them are within the
	// window. A record whose id was looked up after reading checked carries it
	// (stages.Record.DedupeChecked), so that the appender need not look it up again.
	Forgotten func() (checked, until int64)
	// Lookup finds the first copy of a message stored in topic under msgID within the window
	// (ok false when there is none, or the lookup failed).
	Lookup func(topic, msgID string) (at batched.StoredAt, ok bool)
}

// storeLookups counts the lookups of StoreDedupe and the duplicates they found.
type storeLookups struct {
	lookups, found atomic.Int64
	// restartOver is set once the clock passed RestartUntil, and passed is a Forgotten until the
	// clock passed: no clock read per message while the appender reports nothing newer.
	restartOver atomic.Bool
	passed      atomic.Int64
}

// answeredFromStore answers j as a duplicate, and returns true, when its Nats-Msg-Id names a
// message stored within the dedupe window that the appender's memory may not hold (StoreDedupe).
// Otherwise it returns the sequence of the appender's forgotten ids the message's id was checked
// against, for its record (stages.Record.DedupeChecked).
func (w *worker) answeredFromStore(j *job) (answered bool, checked int64) {
	in := w.in
	d := in.cfg.StoreDedupe
	if d == nil || j.msg.Header == nil || j.route.Err != nil {
		return false, 0
	}
	ids := j.msg.Header[nats.MsgIdHdr]
	if len(ids) != 1 || ids[0] == "" {
		return false, 0 // no id, or several: refused later as invalid
	}
	// The sequence before the window's end, as the appender publishes them (Forgotten).
	var until int64
	if d.Forgotten != nil {
		checked, until = d.Forgotten()
	}
	restart := !in.restart.restartOver.Load()
	forgotten := until > in.restart.passed.Load()
	if !restart && !forgotten {
		return false, checked
	}
	now := in.cfg.Clock()
	if restart && !now.Before(d.RestartUntil) {
		in.restart.restartOver.Store(true)
		restart = false
	}
	if forgotten && now.UnixNano() > until {
		in.restart.passed.Store(until)
		forgotten = false
	}
	if !restart && !forgotten {
		return false, checked
	}
	in.restart.lookups.Add(1)
	at, ok := d.Lookup(j.route.Topic, ids[0])
	if !ok {
		return false, checked
	}
	in.restart.found.Add(1)
	in.settleJob(j, true)
	if j.msg.Reply == "" || in.cfg.NoReply {
		return true, 0
	}
	r := stages.Record{Topic: j.route.Topic, QueueID: at.QueueID, QueueOffset: at.QueueOffset,
		PhysOffset: at.PhysOffset, StoreTimestamp: at.StoreTimestamp, Duplicate: true}
	buf := appendRecordAck(nil, &r, in.cfg.StoreHost)
	in.publishReply(j.msg.Reply, buf, &in.counters.acks)
	return true, 0
}
