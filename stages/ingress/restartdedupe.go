package ingress

import (
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/rocketstore/engine/stages"
	"github.com/rocketstore/engine/stages/ingress/batched"
)

// RestartDedupe carries the dedupe window of publisher message ids (Nats-Msg-Id) across a
// restart. The appender's window lives in memory and starts empty; a publisher that retries
// while the engine restarts (docs/SCALE-OUT.md tells it to, with the same id) would get its
// message stored twice. So, for as long as a record stored before the start can still be within
// the window, a worker looks a message's id up in the store before encoding it; found, the
// message is answered as a duplicate with the first copy's position and not stored.
//
// Cost: one store lookup (the IndexFile) per message with a Nats-Msg-Id, on the workers, and
// only until Until: nothing after that, nothing at all when the store was empty or idle for
// longer than the window before the start. Messages of batched-ack streams are not concerned
// (their resends are looked up anyway, batched.Config.Lookup).
type RestartDedupe struct {
	// Until is when the window of the last record stored before the start ends (its store time
	// plus the window): from then on no record from before the start can be a first copy.
	Until time.Time
	// Lookup finds the first copy of a message stored in topic under msgID within the window
	// (ok false when there is none, or the lookup failed).
	Lookup func(topic, msgID string) (at batched.StoredAt, ok bool)
}

// restartLookups counts the lookups of RestartDedupe and the duplicates they found.
type restartLookups struct {
	lookups, found atomic.Int64
	// over is set once the clock passed Until: no clock read per message from then on.
	over atomic.Bool
}

// answeredFromStore answers j as a duplicate, and returns true, when its Nats-Msg-Id names a
// message stored before this start within the dedupe window (RestartDedupe).
func (w *worker) answeredFromStore(j *job) bool {
	in := w.in
	d := in.cfg.Restarted
	if d == nil || j.msg.Header == nil || j.route.Err != nil || in.restart.over.Load() {
		return false
	}
	ids := j.msg.Header[nats.MsgIdHdr]
	if len(ids) != 1 || ids[0] == "" {
		return false // no id, or several: refused later as invalid
	}
	if !in.cfg.Clock().Before(d.Until) {
		in.restart.over.Store(true)
		return false
	}
	in.restart.lookups.Add(1)
	at, ok := d.Lookup(j.route.Topic, ids[0])
	if !ok {
		return false
	}
	in.restart.found.Add(1)
	in.settleJob(j, true)
	if j.msg.Reply == "" || in.cfg.NoReply {
		return true
	}
	r := stages.Record{Topic: j.route.Topic, QueueID: at.QueueID, QueueOffset: at.QueueOffset,
		PhysOffset: at.PhysOffset, StoreTimestamp: at.StoreTimestamp, Duplicate: true}
	buf := appendRecordAck(nil, &r, in.cfg.StoreHost)
	in.publishReply(j.msg.Reply, buf, &in.counters.acks)
	return true
}
