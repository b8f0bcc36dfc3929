package wire

import (
	"fmt"
	"strconv"
	"strings"
)

// Batched acks (docs/BATCHED-ACKS.md). A publisher opts in per message with one header,
//
//	Rs-Seq: <stream> <seq> <acked>[ r]
//
// and makes the message's reply subject its stream's ack subject. Such a message gets no reply of
// its own: the engine sends each stream cumulative acks (BatchAck).
//
//   - stream: the publisher's stream id, 1 to 64 bytes of [A-Za-z0-9_-].
//   - seq: the message's sequence number in its stream, 1 to 2^63-1; the publisher numbers its
//     messages 1, 2, 3... in publish order, over one connection.
//   - acked: the publisher's floor: every sequence up to it has been answered to the publisher
//     (stored or refused), 0 <= acked < seq. The engine needs no memory of a stream below it, which
//     is what lets it rebuild a stream's state after a restart or an eviction from the messages
//     alone.
//   - r: the message is a resend. The engine looks a resend up in the store before it appends
//     it, so that a resend of a message stored before a restart, or longer ago than the dedupe
//     window, is not stored again.
//
// The message's id (UNIQ_KEY, and the dedupe key) is its Nats-Msg-Id when it has one, else
// "<stream>:<seq>" (DerivedMsgID). The header itself is not stored.

// HeaderSeq is the batched-ack header (see above).
const HeaderSeq = "Rs-Seq"

// MaxStreamID bounds a stream id's length.
const MaxStreamID = 64

// MaxSeq is the last sequence of a stream: sequences run from 1 to 2^63-1.
const MaxSeq = 1<<63 - 1

// SeqHeader is a parsed Rs-Seq header.
type SeqHeader struct {
	Stream string
	Seq    uint64
	Acked  uint64
	Resend bool
}

// ParseSeqHeader parses the values of an Rs-Seq header (see the top of this file). The error is
// a *ProtocolError.
func ParseSeqHeader(vals []string) (SeqHeader, error) {
	var h SeqHeader
	if len(vals) != 1 {
		return h, protocolErrorf("%s has %d values; a message has one", HeaderSeq, len(vals))
	}
	v := vals[0]
	bad := func(why string) (SeqHeader, error) {
		if len(v) > 100 {
			v = v[:100] + "..."
		}
		return SeqHeader{}, protocolErrorf("%s %q: %s (want \"<stream> <seq> <acked>[ r]\")", HeaderSeq, v, why)
	}
	var f [4]string // no strings.Split: this runs once per message
	n, rest := 0, v
	for ; n < len(f) && rest != ""; n++ {
		f[n], rest, _ = strings.Cut(rest, " ")
	}
	if rest != "" || n < 3 || (n == 4 && f[3] == "") {
		return bad("not 3 or 4 space-separated fields")
	}
	if !ValidStreamID(f[0]) {
		return bad(fmt.Sprintf("the stream id must be 1 to %d bytes of [A-Za-z0-9_-]", MaxStreamID))
	}
	seq, err := parseSeqNum(f[1])
	if err != nil || seq == 0 {
		return bad("the sequence must be a decimal number from 1 to 2^63-1")
	}
	acked, err := parseSeqNum(f[2])
	if err != nil || acked >= seq {
		return bad("the acked floor must be a decimal number below the sequence")
	}
	if n == 4 && f[3] != "r" {
		return bad(`the fourth field, when present, must be "r"`)
	}
	return SeqHeader{Stream: f[0], Seq: seq, Acked: acked, Resend: n == 4}, nil
}

// parseSeqNum parses a sequence number: decimal digits only (no sign), at most 2^63-1.
func parseSeqNum(s string) (uint64, error) {
	if s == "" || s[0] < '0' || s[0] > '9' {
		return 0, strconv.ErrSyntax
	}
	n, err := strconv.ParseUint(s, 10, 63)
	return n, err
}

// ValidStreamID says whether s may be a stream id: 1 to MaxStreamID bytes of [A-Za-z0-9_-].
func ValidStreamID(s string) bool {
	if len(s) == 0 || len(s) > MaxStreamID {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// AppendSeqHeader appends the value of an Rs-Seq header.
func AppendSeqHeader(dst []byte, stream string, seq, acked uint64, resend bool) []byte {
	dst = append(dst, stream...)
	dst = append(dst, ' ')
	dst = strconv.AppendUint(dst, seq, 10)
	dst = append(dst, ' ')
	dst = strconv.AppendUint(dst, acked, 10)
	if resend {
		dst = append(dst, " r"...)
	}
	return dst
}

// DerivedMsgID is the id of a message of a stream that carries no Nats-Msg-Id:
// "<stream>:<seq>".
func DerivedMsgID(stream string, seq uint64) string {
	return string(AppendDerivedMsgID(make([]byte, 0, len(stream)+21), stream, seq))
}

// AppendDerivedMsgID appends DerivedMsgID(stream, seq) to dst.
func AppendDerivedMsgID(dst []byte, stream string, seq uint64) []byte {
	dst = append(dst, stream...)
	dst = append(dst, ':')
	return strconv.AppendUint(dst, seq, 10)
}
