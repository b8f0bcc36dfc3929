package ingress

import (
	"github.com/nats-io/nats.go"

	"github.com/rocketstore/engine/stages"
	"github.com/rocketstore/engine/stages/ingress/batched"
)

// batchMem is the memory a worker builds a batch in: the Batch, its records, the metas of its
// batched records and its arena list. It is reused once the batch is done with (by the tracker,
// or by the source's done for a batch the tracker does not take): a batch of 256 records is about 70 KiB,
// and allocated afresh per batch, with the collections it caused, it cost a tenth of the engine
// at a million messages a second.
type batchMem struct {
	batch  stages.Batch
	recs   []stages.Record
	metas  []batched.Meta
	arenas []*stages.Arena
}

// maxFreeBatches bounds the batches kept for reuse (those in flight between the workers and the
// tracker come back; more would only hold memory), and maxRecycledRecords the size of one kept:
// with the default MaxBatch the free list holds at most about 17 MiB (records and metas), and
// about 70 MiB with a MaxBatch raised to 1024 or more.
const (
	maxFreeBatches     = 256
	maxRecycledRecords = 1024 + 1
)

// The bounds of the free list of pack entries: a publisher's packs hold up to 256 messages by
// default (publisher.DefaultMaxPack).
const (
	maxFreeEntries     = 64
	maxRecycledEntries = 1024
)

// batchMem returns a batchMem for n records: a free one, or a new one.
func (in *Ingress) batchMem(n int) *batchMem {
	var m *batchMem
	select {
	case m = <-in.freeBatches:
	default:
		m = new(batchMem)
	}
	if cap(m.recs) < n+1 { // +1: a marker
		m.recs = make([]stages.Record, 0, n+1)
	}
	if cap(m.metas) < n {
		m.metas = make([]batched.Meta, 0, n)
	}
	return m
}

// recycle gives the memory of b back for reuse, if a worker built b in a batchMem; nothing may
// use b afterwards. Its records and metas are cleared so that they keep nothing alive.
func (in *Ingress) recycle(b *stages.Batch) {
	if m, ok := b.Owner.(*batchMem); ok {
		in.recycleMem(m)
	}
}

// recycleMem gives m back for reuse, cleared, unless it grew past maxRecycledRecords.
func (in *Ingress) recycleMem(m *batchMem) {
	if cap(m.recs) > maxRecycledRecords {
		return
	}
	clear(m.recs[:cap(m.recs)])
	clear(m.metas[:cap(m.metas)])
	clear(m.arenas[:cap(m.arenas)])
	m.recs, m.metas, m.arenas = m.recs[:0], m.metas[:0], m.arenas[:0]
	m.batch = stages.Batch{}
	select {
	case in.freeBatches <- m:
	default:
	}
}

// packEntries returns a free slice for a pack's entries (length 0; splitPack sizes it), or
// nil.
func (in *Ingress) packEntries() []nats.Msg {
	select {
	case e := <-in.freeEntries:
		return e
	default:
		return nil
	}
}

// packDone says that n more entries of pk are done with (encoded, or never to be): when none is
// left, the entries' memory is reused for another pack. A pack's entries were 110 bytes of
// garbage per message.
func (in *Ingress) packDone(pk *batched.Pack, n int) {
	if pk.Done(n) {
		in.recycleEntries(pk.Entries)
		pk.Entries = nil
	}
}

// recycleEntries gives a pack's entry slice back for reuse, cleared so that it keeps no message
// alive. Slices of more than maxRecycledEntries are left to the collector: the free list then
// holds at most maxFreeEntries × maxRecycledEntries entries (about 7 MiB).
func (in *Ingress) recycleEntries(e []nats.Msg) {
	if cap(e) == 0 || cap(e) > maxRecycledEntries {
		return
	}
	e = e[:cap(e)]
	clear(e)
	select {
	case in.freeEntries <- e[:0]:
	default:
	}
}
