package ingress

import (
	"github.com/rocketstore/engine/stages"
	"github.com/rocketstore/engine/stages/ingress/batched"
)

// A new topic of the rule takes its slot of the topic limit when a message of it is stored
// (route.Router.Admit, Settle): its messages on their way hold a reservation, and every one of
// them is settled once, where it ends: in its batch's Done (stored, or refused by the store:
// settleBatch), or where ingress answers or drops it without a batch (settleJob: refused by the
// worker, dropped from a full inbox, answered from the store, abandoned at an abort).

// settleJob settles the messages of j, which ends here: stored says a copy of it is in the store.
func (in *Ingress) settleJob(j *job, stored bool) {
	if j.route != nil {
		in.router.Settle(j.route.Topic, j.messages(), stored)
	}
}

// batchDone is every batch's Done: the records' topics are settled, then the source answers them.
func (in *Ingress) batchDone(b *stages.Batch) {
	if in.router.Reserving() {
		for i := range b.Records {
			r := &b.Records[i]
			if r.Topic != "" {
				in.router.Settle(r.Topic, 1, r.Err == nil || batched.IsStoredBefore(r.Err))
			}
		}
	}
	in.src.done(b)
}
