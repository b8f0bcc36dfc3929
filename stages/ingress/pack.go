package ingress

import (
	"fmt"
	"sync/atomic"

	"github.com/nats-io/nats.go"

	"github.com/rocketstore/engine/internal/wire"
)

// Packs (docs/BATCHED-ACKS.md, "Packs", and internal/wire for the framing): several consecutive
// messages of a batched-ack stream in one NATS message. The callback splits a pack into its
// entries (onPack), each a batched message of its own from there on.

// packInfo is what the entries of one pack share, from the callback to the workers: the
// stream, the floor and the resend flag (its seq is the first entry's).
type packInfo struct {
	wire.SeqHeader
	// recv is the stream's received set, looked up once for the whole pack rather than once
	// per entry (received.go).
	recv *recvSet
	// entries are the pack's messages; entry i has sequence seq+i. Runs of them go to the
	// workers (job.count).
	entries []nats.Msg
	// pending counts the entries no worker is done with yet; at 0 the entries' memory is
	// reused (Ingress.packDone).
	pending atomic.Int64
}

// entrySeq is the seq header of the entry with sequence seq.
func (p *packInfo) entrySeq(seq uint64) wire.SeqHeader {
	sh := p.SeqHeader
	sh.Seq = seq
	return sh
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
