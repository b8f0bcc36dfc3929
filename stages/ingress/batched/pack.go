package batched

import (
	"sync/atomic"

	"github.com/rocketstore/engine/internal/wire"

	"github.com/nats-io/nats.go"
)

// Pack is what the entries of one pack (wire.SplitPack) share on their way from the callback to
// the workers: the stream, the floor and the resend flag (its Seq is the first entry's), the
// stream's claims, and the entries themselves.
type Pack struct {
	wire.SeqHeader
	// Claims is the stream's received set, looked up once for the whole pack rather than once
	// per entry (received.go).
	Claims *Claims
	// Entries are the pack's messages; entry i has sequence Seq+i. Runs of them go to the
	// workers (Runs).
	Entries []nats.Msg
	// pending counts the entries no worker is done with yet (Done).
	pending atomic.Int64
}

// NewPack makes the pack of entries, with header sh, of the stream whose claims are claims.
func NewPack(sh wire.SeqHeader, claims *Claims, entries []nats.Msg) *Pack {
	pk := &Pack{SeqHeader: sh, Claims: claims, Entries: entries}
	pk.pending.Store(int64(len(entries)))
	return pk
}

// EntrySeq is the seq header of the entry with sequence seq.
func (p *Pack) EntrySeq(seq uint64) wire.SeqHeader {
	sh := p.SeqHeader
	sh.Seq = seq
	return sh
}

// Run is the n entries from the one with sequence seq on.
func (p *Pack) Run(seq uint64, n int) []nats.Msg { return p.Entries[seq-p.Seq:][:n] }

// Done says that n more entries are done with (encoded, or never to be); it reports whether
// none is left, when the entries' memory may be reused.
func (p *Pack) Done(n int) bool { return p.pending.Add(-int64(n)) == 0 }

// Runs cuts entries into the runs the workers take: consecutive entries of one queue (queueOf,
// asked once per entry, in order), at most max of them (a batch's worth, which bounds what one
// worker's inbox slot holds). It calls yield with each run's first entry, length and queue, in
// order, until yield returns false, and reports whether every run was yielded.
func Runs(entries []nats.Msg, max int, queueOf func(*nats.Msg) int32, yield func(first, n int, queue int32) bool) bool {
	q := queueOf(&entries[0])
	for i := 0; i < len(entries); {
		end, next := i+1, int32(0)
		for end < len(entries) {
			next = queueOf(&entries[end])
			if next != q || end-i == max {
				break
			}
			end++
		}
		if !yield(i, end-i, q) {
			return false
		}
		i, q = end, next
	}
	return true
}
