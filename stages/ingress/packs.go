package ingress

import (
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/rocketstore/engine/internal/wire"
	"github.com/rocketstore/engine/stages/ingress/batched"
)

// onPack splits a pack (docs/BATCHED-ACKS.md, "Packs"; wire.SplitPack) into its entries and
// hands them to the workers in runs, each entry a message of its own from there on. A pack that
// cannot be split is refused whole, as a message with a malformed header is: nothing of it is
// stored.
func (in *Ingress) onPack(m *nats.Msg, countVals []string) {
	sh, err := parseSeqHeader(m.Header[wire.HeaderSeq])
	if err == nil && in.tracker == nil {
		err = ErrBatchedOff
	}
	var entries []nats.Msg
	if err == nil {
		entries, err = decodePack(in.packEntries(), m, countVals, sh)
	}
	if err != nil {
		in.recycleEntries(entries)
		in.reject(m, err)
		return
	}
	in.counters.received.Add(int64(len(entries) - 1))
	in.tracker.CountPack()
	rt := in.router.Route(m.Subject)
	if rt.Partition >= 0 && !in.cfg.Partitions.Owns(int(rt.Partition)) {
		in.recycleEntries(entries)
		in.reject(m, in.notOwned(int(rt.Partition), rt.Stored))
		return
	}
	rt = in.router.Admit(rt, len(entries))
	pk := batched.NewPack(sh, in.tracker.Claims(sh.Stream), entries)
	// The entries without a queue key all go to one queue, the topic's next (as Kafka's sticky
	// partitioner sends a whole batch to one partition): a pack is then a run for one worker,
	// one channel operation instead of one per entry. Runs are cut at MaxBatch entries, a
	// batch's worth, which bounds what one inbox slot holds.
	sticky := int32(-1)
	queueOf := func(e *nats.Msg) int32 {
		if q, ok := in.router.KeyedQueue(e, rt); ok {
			return q
		}
		if sticky < 0 {
			sticky = in.router.NextQueue(rt)
		}
		return sticky
	}
	batched.Runs(entries, in.cfg.MaxBatch, queueOf, func(i, n int, q int32) bool {
		w := in.workers[rt.Worker(q, len(in.workers))]
		if in.send(w, job{msg: &entries[i], route: rt, queue: q, pack: pk, seq: sh.Seq + uint64(i), count: int32(n)}) {
			return true
		}
		// This run and every one after it are refused to the stream, in its acks.
		rest := job{msg: &entries[i], route: rt, queue: q, pack: pk, seq: sh.Seq + uint64(i), count: int32(len(entries) - i)}
		in.abandon(&rest)
		return false
	})
}

// decodePack checks a pack's headers and splits its body into messages, one per entry, with the
// pack's subject and reply subject, into dst's memory (see wire.SplitPack). sh is the pack's
// parsed Rs-Seq: entry i has sequence sh.Seq+i. The error wraps ErrInvalidHeader.
func decodePack(dst []nats.Msg, m *nats.Msg, countVals []string, sh wire.SeqHeader) ([]nats.Msg, error) {
	count, err := wire.ParsePackCount(countVals, sh.Seq)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidHeader, err)
	}
	msgs, err := wire.SplitPack(dst, m.Data, count, m.Subject, m.Reply)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidHeader, err)
	}
	return msgs, nil
}
