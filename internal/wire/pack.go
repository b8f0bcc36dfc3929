package wire

import (
	"encoding/binary"
	"strconv"
	"strings"

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
// which is how the engine tells a lost message from a late one), and its header block is its own
// NATS header block ("NATS/1.0\r\n...\r\n\r\n"), empty for none. An entry is a message of the
// pack's subject (one subject: NATS checked the publisher's permission for it), with the pack's
// reply subject (the ack subject): from there on it is an ordinary batched message (its queue,
// id, dedupe and ack are its own). NATS then carries one message per pack instead of one per
// message, and that per-message cost (the publisher's, the server's and the engine's client's)
// is most of what a small message costs on its way in.

// HeaderPack marks a pack (see above).
const HeaderPack = "Rs-Pack"

// MaxPackEntries bounds a pack's count.
const MaxPackEntries = 1 << 16

// ParsePackCount parses the Rs-Pack values of a pack whose first entry has sequence first: one
// value, a count from 1 to MaxPackEntries whose entries' sequences stay within MaxSeq. The
// error is a *ProtocolError.
func ParsePackCount(vals []string, first uint64) (int, error) {
	if len(vals) != 1 {
		return 0, protocolErrorf("%s has %d values; a pack has one", HeaderPack, len(vals))
	}
	count, err := strconv.ParseUint(vals[0], 10, 32)
	if err != nil || count == 0 || count > MaxPackEntries || vals[0][0] == '+' {
		return 0, protocolErrorf("%s %.40q: want a count from 1 to %d", HeaderPack, vals[0], MaxPackEntries)
	}
	if first > MaxSeq-(count-1) {
		return 0, protocolErrorf("%s: %d entries from sequence %d run past 2^63-1", HeaderPack, count, first)
	}
	return int(count), nil
}

// SplitPack decodes count entries from body: exactly count, with nothing after them, each a
// message of subject with reply subject reply, its data a piece of body (capped, so that an
// append never runs into the next entry). It decodes into dst's memory when that has room for
// count entries (dst's entries must be zero: a reused slice), else into new memory. An entry
// must not carry Rs-Seq or Rs-Pack. The error is a *ProtocolError.
func SplitPack(dst []nats.Msg, body []byte, count int, subject, reply string) ([]nats.Msg, error) {
	// Every entry takes at least 2 bytes: a count the body cannot hold is refused before the
	// allocations it would size.
	if count > len(body)/2 {
		return nil, protocolErrorf("%s: %d entries cannot fit in %d bytes", HeaderPack, count, len(body))
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
			return nil, packError(i, "header block", protocolErrorf("an entry must not carry %s or %s", HeaderSeq, HeaderPack))
		}
		e.Header = h
	}
	if len(rest) != 0 {
		return nil, protocolErrorf("%s: %d bytes after the last of %d entries", HeaderPack, len(rest), count)
	}
	return msgs, nil
}

// packField reads one uvarint-length-prefixed field.
func packField(b []byte) (field, rest []byte, err error) {
	n, k := binary.Uvarint(b)
	switch {
	case k == 0:
		return nil, nil, protocolErrorf("the body ends inside a length")
	case k < 0:
		return nil, nil, protocolErrorf("a length overflows 64 bits")
	case n > uint64(len(b)-k):
		return nil, nil, protocolErrorf("a length of %d runs past the body's end (%d bytes left)", n, len(b)-k)
	}
	return b[k : k+int(n)], b[k+int(n):], nil
}

func packError(i int, what string, err error) error {
	return protocolErrorf("%s: entry %d: %s: %w", HeaderPack, i, what, err)
}

// PackEntryLen is how many bytes of a pack's body AppendPackEntry gives an entry with headers h
// and data.
func PackEntryLen(h nats.Header, data []byte) int {
	hdr := headerBlockLen(h)
	return uvarintLen(uint64(hdr)) + hdr + uvarintLen(uint64(len(data))) + len(data)
}

// AppendPackEntry appends one entry of a pack's body: its header block (CheckHeader must have
// passed h) and its data, each prefixed with its length.
func AppendPackEntry(dst []byte, h nats.Header, data []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(headerBlockLen(h)))
	dst = appendHeaderBlock(dst, h)
	dst = binary.AppendUvarint(dst, uint64(len(data)))
	return append(dst, data...)
}

func uvarintLen(n uint64) int {
	var b [binary.MaxVarintLen64]byte
	return binary.PutUvarint(b[:], n)
}

// headerBlockLen is the length appendHeaderBlock gives h.
func headerBlockLen(h nats.Header) int {
	if len(h) == 0 {
		return 0
	}
	n := len("NATS/1.0\r\n") + len("\r\n")
	for k, vs := range h {
		for _, v := range vs {
			n += len(k) + len(": ") + len(v) + len("\r\n")
		}
	}
	return n
}

// appendHeaderBlock appends h as a NATS header block ("NATS/1.0\r\n", a line per value, a blank
// line), nothing when h is empty.
func appendHeaderBlock(dst []byte, h nats.Header) []byte {
	if len(h) == 0 {
		return dst
	}
	dst = append(dst, "NATS/1.0\r\n"...)
	for k, vs := range h {
		for _, v := range vs {
			dst = append(dst, k...)
			dst = append(dst, ": "...)
			dst = append(dst, v...)
			dst = append(dst, "\r\n"...)
		}
	}
	return append(dst, "\r\n"...)
}

// CheckHeader refuses headers a publisher may not send as they are: ones a header block cannot
// carry (nats.go would rewrite them on the wire, a line break in a value becomes a space, and a
// pack would be malformed), and the protocol's own, which the publisher sets.
func CheckHeader(h nats.Header) error {
	for k, vs := range h {
		if k == "" || strings.ContainsAny(k, ":\r\n \t") {
			return protocolErrorf("header name %q: empty, or with ':', a space or a line break", k)
		}
		if k == HeaderSeq || k == HeaderPack {
			return protocolErrorf("header %s is the publisher's own", k)
		}
		for _, v := range vs {
			if strings.ContainsAny(v, "\r\n") {
				return protocolErrorf("header %s: a value with a line break", k)
			}
		}
	}
	return nil
}
