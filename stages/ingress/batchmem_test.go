package ingress

import (
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/rocketstore/engine/internal/wire"
	"github.com/rocketstore/engine/stages"
	"github.com/rocketstore/engine/stages/ingress/batched"
)

// TestBatchMemReuse: a batch's memory comes back cleared (it keeps nothing of the batch alive) and
// is reused for the next batch; a batch no worker built is left alone; the free list is bounded.
func TestBatchMemReuse(t *testing.T) {
	in := &Ingress{freeBatches: make(chan *batchMem, 2)}
	m := in.batchMem(4)
	if cap(m.recs) < 5 || cap(m.metas) < 4 {
		t.Fatalf("capacities %d, %d for 4 records", cap(m.recs), cap(m.metas))
	}
	m.recs = append(m.recs, stages.Record{Topic: "t", Ctx: &batched.Meta{}})
	m.metas = append(m.metas, batched.Meta{AckTo: "inbox"})
	m.arenas = append(m.arenas, &stages.Arena{})
	m.batch = stages.Batch{Records: m.recs, Owner: m}
	in.recycle(&m.batch)
	if again := in.batchMem(2); again != m {
		t.Fatal("the recycled memory was not reused")
	}
	if len(m.recs) != 0 || m.recs[:1][0].Topic != "" || m.recs[:1][0].Ctx != nil ||
		m.metas[:1][0].AckTo != "" || m.arenas[:1][0] != nil || m.batch.Records != nil {
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

// TestPackEntriesReuse: a pack's entries are reused once every run of it is done with, cleared;
// not before; and slices too large to keep are left to the collector.
func TestPackEntriesReuse(t *testing.T) {
	in := &Ingress{freeEntries: make(chan []nats.Msg, 2)}
	entries, err := wire.SplitPack(in.packEntries(), appendPack(nil, packEntry{data: "a"},
		packEntry{hdr: "NATS/1.0\r\nK: v\r\n\r\n", data: "b"}, packEntry{data: "c"}), 3, "s", "r")
	if err != nil {
		t.Fatal(err)
	}
	pk := batched.NewPack(wire.SeqHeader{}, nil, entries)
	in.packDone(pk, 2) // one run of two entries
	if len(in.freeEntries) != 0 || pk.Entries == nil {
		t.Fatal("the entries were released while a run of the pack was still out")
	}
	in.packDone(pk, 1)
	if len(in.freeEntries) != 1 || pk.Entries != nil {
		t.Fatal("the entries were not released when the last run was done")
	}
	again := in.packEntries()
	if cap(again) < 3 || len(again) != 0 {
		t.Fatalf("reused entries: len %d cap %d", len(again), cap(again))
	}
	if e := again[:3]; e[1].Header != nil || e[0].Subject != "" || e[2].Data != nil {
		t.Fatalf("reused entries still hold messages: %+v", e)
	}
	// Reused memory splits like new memory: the entry without headers has none.
	reused, err := wire.SplitPack(again, appendPack(nil, packEntry{data: "x"}, packEntry{data: "y"}), 2, "s", "r")
	if err != nil || reused[1].Header != nil || string(reused[1].Data) != "y" {
		t.Fatalf("split into reused memory: %+v, %v", reused, err)
	}
	in.recycleEntries(make([]nats.Msg, 0, maxRecycledEntries+1))
	if len(in.freeEntries) != 0 {
		t.Fatal("an oversized entry slice was kept")
	}
}

// TestBatchMemBound: the memory of a batch larger than maxRecycledRecords is not kept.
func TestBatchMemBound(t *testing.T) {
	in := &Ingress{freeBatches: make(chan *batchMem, 2)}
	m := in.batchMem(maxRecycledRecords)
	in.recycle(&stages.Batch{Owner: m})
	if len(in.freeBatches) != 0 {
		t.Fatalf("a batch of %d records' memory was kept", cap(m.recs))
	}
	m = in.batchMem(maxRecycledRecords - 1)
	in.recycle(&stages.Batch{Owner: m})
	if len(in.freeBatches) != 1 {
		t.Fatalf("a batch of %d records' memory was not kept", cap(m.recs))
	}
}
