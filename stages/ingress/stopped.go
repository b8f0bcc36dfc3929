package ingress

import (
	"fmt"

	"github.com/rocketstore/engine/internal/wire"
	"github.com/rocketstore/engine/stages"
	"github.com/rocketstore/engine/stages/ingress/batched"
)

// errHeldAtAbort is the error of a record a worker held when the abort came: ErrStopped, counted
// in Stats.Aborted rather than in Failed (the store never saw it).
var errHeldAtAbort = fmt.Errorf("%w", ErrStopped)

// abandon counts the messages of j, which ingress holds and will not store because it is
// aborting (the pipeline failed, or an Abort), and has its source answer them.
func (in *Ingress) abandon(j *job) {
	in.settleJob(j, false)
	in.counters.aborted.Add(int64(j.messages()))
	in.src.abandon(j)
}

// abandon answers the messages of j (see Ingress.abandon): a plain message gets a 503 reply; a message
// of a batched-ack stream, or a run of pack entries, is refused to its stream by the tracker,
// with the same 503 in the stream's next ack, so that the publisher learns it now and retries
// (a plain reply on the ack subject would mean the engine refused the protocol itself). A pack
// run's entries are then done with (packDone).
func (c *coreSource) abandon(j *job) {
	in, n := c.in, j.messages()
	switch {
	case j.pack != nil:
		in.refuseStopped(j.pack.SeqHeader, j.seq, n, j.msg.Reply)
		if j.count > 0 {
			in.packDone(j.pack, n)
		}
	case batched.Header(j.msg) != nil:
		if sh, err := parseSeqHeader(batched.Header(j.msg)); err == nil && in.tracker != nil {
			in.refuseStopped(sh, sh.Seq, 1, j.msg.Reply)
		}
	default:
		in.replyError(j.msg.Reply, wire.CodeUnavailable, ErrStopped.Error())
	}
}

// refuseStopped has the tracker refuse n sequences of sh's stream from seq on with ErrStopped,
// as records refused by the store are: in the stream's next ack, their claims released. A
// message without an ack subject gets nothing.
func (in *Ingress) refuseStopped(sh wire.SeqHeader, seq uint64, n int, ackTo string) {
	if in.tracker == nil || ackTo == "" {
		return
	}
	recs := make([]stages.Record, n)
	metas := make([]batched.Meta, n)
	for i := range recs {
		metas[i] = batched.Meta{SeqHeader: sh, AckTo: ackTo}
		metas[i].Seq = seq + uint64(i)
		recs[i] = stages.Record{Err: ErrStopped, Ctx: &metas[i]}
	}
	in.tracker.Offer(&stages.Batch{Records: recs})
}
