package commitlog

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"
)

// Random inputs for the property tests, from a seeded generator so that every run is the same.

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x5eed)) }

const topicAlphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789%|_-"

func randTopic(r *rand.Rand) string {
	var prefix string
	limit := MaxTopicLen
	if r.IntN(3) == 0 {
		prefix = []string{RetryTopicPrefix, DLQTopicPrefix}[r.IntN(2)]
		limit = MaxSysTopicLen
	}
	n := len(prefix) + r.IntN(limit-len(prefix)+1)
	switch r.IntN(6) { // favour the edges
	case 0:
		n = max(len(prefix), 1)
	case 1:
		n = limit
	case 2:
		n = min(limit, 127+r.IntN(2)) // around the V1/V2 boundary
	}
	n = max(n, 1)
	var sb strings.Builder
	sb.WriteString(prefix)
	for sb.Len() < n {
		sb.WriteByte(topicAlphabet[r.IntN(len(topicAlphabet))])
	}
	return sb.String()
}

func randInt32(r *rand.Rand) int32 {
	switch r.IntN(6) {
	case 0:
		return math.MinInt32
	case 1:
		return math.MaxInt32
	case 2:
		return int32(r.IntN(3)) - 1
	}
	return int32(r.Uint32())
}

func randInt64(r *rand.Rand) int64 {
	switch r.IntN(6) {
	case 0:
		return math.MinInt64
	case 1:
		return math.MaxInt64
	case 2:
		return int64(r.IntN(3)) - 1
	}
	return int64(r.Uint64())
}

func randHost(r *rand.Rand) netip.AddrPort {
	port := uint16(r.Uint32())
	var a netip.Addr
	switch r.IntN(4) {
	case 0:
		var b [16]byte
		binary.BigEndian.PutUint64(b[:], r.Uint64())
		binary.BigEndian.PutUint64(b[8:], r.Uint64())
		b[0] = 0x20 // stay clear of the IPv4-mapped prefix
		a = netip.AddrFrom16(b)
	case 1:
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], r.Uint32())
		a = netip.AddrFrom16(netip.AddrFrom4(b).As16()) // IPv4-mapped: stored as IPv4
	default:
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], r.Uint32())
		a = netip.AddrFrom4(b)
	}
	return netip.AddrPortFrom(a, port)
}

// randPropText returns a non-empty string without the separators, sometimes multi-byte UTF-8.
func randPropText(r *rand.Rand, maxLen int) string {
	n := 1 + r.IntN(maxLen)
	var sb strings.Builder
	for sb.Len() < n {
		switch r.IntN(10) {
		case 0:
			sb.WriteRune(rune(0x80 + r.IntN(0x700)))
		case 1:
			sb.WriteRune('😀')
		case 2:
			sb.WriteByte(' ')
		default:
			sb.WriteByte(byte('A' + r.IntN(58)))
		}
	}
	return sb.String()
}

func randProps(r *rand.Rand) []byte {
	var p []byte
	for range r.IntN(8) {
		p = AppendProperty(p, randPropText(r, 12), randPropText(r, 40))
	}
	switch r.IntN(8) {
	case 0: // an incoming __CRC32# entry, which PropCRC must replace
		p = AppendProperty(p, PropCRC32, "1234567890")
	case 1: // no trailing separator: PropCRC must add one
		if len(p) > 0 {
			p = p[:len(p)-1]
		}
	case 2:
		p = AppendProperty(p, PropTags, randPropText(r, 10))
	}
	return p
}

func randBody(r *rand.Rand, maxLen int) []byte {
	if r.IntN(5) == 0 {
		return nil
	}
	b := make([]byte, r.IntN(maxLen+1))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func randMessage(r *rand.Rand, maxBody int) Message {
	return Message{
		Topic:                     randTopic(r),
		QueueID:                   randInt32(r),
		Flag:                      randInt32(r),
		SysFlag:                   randInt32(r),
		BornTimestamp:             randInt64(r),
		BornHost:                  randHost(r),
		StoreHost:                 randHost(r),
		ReconsumeTimes:            randInt32(r),
		PreparedTransactionOffset: randInt64(r),
		Body:                      randBody(r, maxBody),
		Properties:                randProps(r),
	}
}

// stamped is what the writer stamped into a record, kept to compare with what a scan finds.
type stamped struct {
	off                     int
	msg                     Message
	propCRC                 bool
	queueOffset, phys, stTS int64
}

// fillSegment appends random records into a zeroed segment of size bytes, as the writer would,
// until one does not fit; then it writes the blank filler if blank is set. It returns the records
// and the end of the data.
func fillSegment(t testing.TB, r *rand.Rand, size int, base int64, maxBody int, blank bool) ([]byte, []stamped, int) {
	t.Helper()
	seg := make([]byte, size)
	var recs []stamped
	var buf []byte
	pos := 0
	for {
		m := randMessage(r, maxBody)
		propCRC := r.IntN(2) == 0
		var err error
		buf, err = AppendRecord(buf[:0], &m, EncodeOptions{PropCRC: propCRC})
		if err != nil {
			t.Fatalf("AppendRecord: %v", err)
		}
		if !Fits(len(buf), size-pos) {
			if blank {
				Blank(seg[pos:], size-pos)
			}
			return seg, recs, pos
		}
		s := stamped{off: pos, msg: m, propCRC: propCRC, queueOffset: randInt64(r), phys: base + int64(pos), stTS: randInt64(r)}
		copy(seg[pos:], buf)
		Stamp(seg[pos:], s.queueOffset, s.phys, s.stTS, propCRC)
		recs = append(recs, s)
		pos += len(buf)
	}
}
