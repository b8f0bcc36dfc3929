package ingress

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"sync/atomic"

	"github.com/nats-io/nats.go"
)

// Packs (docs/BATCHED-ACKS.md, "Packs"). A publisher of a batched-ack stream may carry several
// consecutive messages of one subject in one NATS message, as a Kafka producer's record batch or a
// RocketMQ batch message does: the message has the stream's Rs-Seq header (its sequence is the
// first entry's) and
//
//	Rs-Pack: <count>
//
// and its body is count entries, each
//
//	uvarint(len(header block)) header block uvarint(len(data)) data
//
// Entry i has sequence seq+i (consecutive: the stream still reaches the engine in sequence order,
// which is how the tracker tells a lost message from a late one), and its header block is its
// own NATS header block ("NATS/1.0\r\n...\r\n\r\n"),
// empty for none. An entry is a message of the pack's subject (one subject: NATS checked the
// publisher's permission for it), with the pack's reply subject (the ack subject): from there on
// it is an ordinary batched message (its queue, worker, id, dedupe and ack are its own). NATS
// then carries one message per pack instead of one per message, and that per-message cost (the
// publisher's, the server's and the engine's client's) is most of what a small message costs on
// its way in.

// HeaderPack marks a pack (see above).
const HeaderPack = "Rs-Pack"

// MaxPackEntries bounds a pack's count.
const MaxPackEntries = 1 << 16

// packInfo is what the entries of one pack share, from the callback to the workers: the
// stream, the floor and the resend flag (its seq is the first entry's).
type packInfo struct {
	seqHeader
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
func (p *packInfo) entrySeq(seq uint64) seqHeader {
	sh := p.seqHeader
	sh.seq = seq
	return sh
}

// decodePack checks a pack's headers and splits its body into messages, one per entry, with the
// pack's subject and reply subject, into dst's memory (see splitPack). sh is the pack's parsed
// Rs-Seq: entry i has sequence sh.seq+i.
func decodePack(dst []nats.Msg, m *nats.Msg, countVals []string, sh seqHeader) ([]nats.Msg, error) {
	if len(countVals) != 1 {
		return nil, fmt.Errorf("%w: %s has %d values; a pack has one", ErrInvalidHeader, HeaderPack, len(countVals))
	}
	count, err := strconv.ParseUint(countVals[0], 10, 32)
	if err != nil || count == 0 || count > MaxPackEntries || countVals[0][0] == '+' {
		return nil, fmt.Errorf("%w: %s %.40q: want a count from 1 to %d", ErrInvalidHeader, HeaderPack,
			countVals[0], MaxPackEntries)
	}
	if sh.seq > maxSeq-(count-1) {
		return nil, fmt.Errorf("%w: %s: %d entries from sequence %d run past 2^63-1", ErrInvalidHeader,
			HeaderPack, count, sh.seq)
	}
	return splitPack(dst, m.Data, int(count), m.Subject, m.Reply)
}

// maxSeq is the largest sequence number.
const maxSeq = 1<<63 - 1

// splitPack decodes count entries from body: exactly count, with nothing after them. It decodes
// into dst's memory when that has room for count entries (dst's entries must be zero: a reused
// slice, see Ingress.packEntries), else into new memory.
func splitPack(dst []nats.Msg, body []byte, count int, subject, reply string) ([]nats.Msg, error) {
	// Every entry takes at least 2 bytes: a count the body cannot hold is refused before the
	// allocations it would size.
	if count > len(body)/2 {
		return nil, fmt.Errorf("%w: %s: %d entries cannot fit in %d bytes", ErrInvalidHeader, HeaderPack, count, len(body))
	}
	msgs := dst[:0]
	if cap(msgs) < count {
		msgs = make([]nats.Msg, count)
	}
	msgs = msgs[:count]
	rest := body
	for i := range msgs {
		hdr, r, err := packField(rest)
		if err != nil {
			return nil, packError(i, "header block", err)
		}
		data, r, err := packField(r)
		if err != nil {
			return nil, packError(i, "data", err)
		}
		rest = r
		e := &msgs[i]
		e.Subject, e.Reply = subject, reply
		if len(data) > 0 {
			e.Data = data[:len(data):len(data)]
		}
		if len(hdr) == 0 {
			continue
		}
		h, err := nats.DecodeHeadersMsg(hdr)
		if err != nil {
			return nil, packError(i, "header block", err)
		}
		if h[HeaderSeq] != nil || h[HeaderPack] != nil {
			return nil, packError(i, "header block", fmt.Errorf("an entry must not carry %s or %s", HeaderSeq, HeaderPack))
		}
		e.Header = h
	}
	if len(rest) != 0 {
		return nil, fmt.Errorf("%w: %s: %d bytes after the last of %d entries", ErrInvalidHeader, HeaderPack, len(rest), count)
	}
	return msgs, nil
}

// packField reads one uvarint-length-prefixed field.
func packField(b []byte) (field, rest []byte, err error) {
	n, k := binary.Uvarint(b)
	switch {
	case k == 0:
		return nil, nil, fmt.Errorf("the body ends inside a length")
	case k < 0:
		return nil, nil, fmt.Errorf("a length overflows 64 bits")
	case n > uint64(len(b)-k):
		return nil, nil, fmt.Errorf("a length of %d runs past the body's end (%d bytes left)", n, len(b)-k)
	}
	return b[k : k+int(n)], b[k+int(n):], nil
}

func packError(i int, what string, err error) error {
	return fmt.Errorf("%w: %s: entry %d: %s: %w", ErrInvalidHeader, HeaderPack, i, what, err)
}
