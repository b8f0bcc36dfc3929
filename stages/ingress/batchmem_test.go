package ingress

import (
	"testing"

	"github.com/rocketstore/engine/stages"
)

// TestBatchMemReuse: a batch's memory comes back cleared (it keeps nothing of the batch alive) and
// is reused for the next batch; a batch no worker built is left alone; the free list is bounded.
func TestBatchMemReuse(t *testing.T) {
	in := &Ingress{freeBatches: make(chan *batchMem, 2)}
	m := in.batchMem(4)
	if cap(m.recs) < 5 || cap(m.metas) < 4 {
		t.Fatalf("capacities %d, %d for 4 records", cap(m.recs), cap(m.metas))
	}
	m.recs = append(m.recs, stages.Record{Topic: "t", Ctx: &seqMeta{}})
	m.metas = append(m.metas, seqMeta{ackTo: "inbox"})
	m.arenas = append(m.arenas, &stages.Arena{})
	m.batch = stages.Batch{Records: m.recs, Owner: m}
	in.recycle(&m.batch)
	if again := in.batchMem(2); again != m {
		t.Fatal("the recycled memory was not reused")
	}
	if len(m.recs) != 0 || m.recs[:1][0].Topic != "" || m.recs[:1][0].Ctx != nil ||
		m.metas[:1][0].ackTo != "" || m.arenas[:1][0] != nil || m.batch.Records != nil {
		t.Fatalf("recycled memory still holds the batch: %+v %+v", m.recs[:1], m.metas[:1])
	}
	in.recycle(&stages.Batch{Records: []stages.Record{{Topic: "x"}}}) // not a worker's: ignored
	if len(in.freeBatches) != 0 {
		t.Fatal("a batch without a batchMem was taken")
	}
	mems := []*batchMem{in.batchMem(1), in.batchMem(1), in.batchMem(1)}
	for _, b := range mems {
		in.recycle(&stages.Batch{Owner: b})
	}
	if n := len(in.freeBatches); n != cap(in.freeBatches) {
		t.Fatalf("%d free batches kept, bound %d", n, cap(in.freeBatches))
	}
}
