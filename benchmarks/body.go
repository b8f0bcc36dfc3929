package benchmarks

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"strconv"
	"sync/atomic"
)

// Message format. Every body starts with its sequence number (8 bytes, big-endian): the
// publisher's index in the top 16 bits and its own count in the low 48, so that every message
// of a run is distinct. The rest is filler that depends on the publisher only. Bodies are at
// least MinBodySize bytes.
const (
	// MinBodySize is the smallest body a load may ask for: the sequence number and some filler.
	MinBodySize = 16
	seqBits     = 48
	// preloadPub is the publisher index of the messages a target stores itself before the
	// measurement (TargetOptions.Cold); genPub that of what a self-loaded target generates.
	// Publishers are numbered from 0 up to at most 1<<15.
	preloadPub = 0xFFFF
	genPub     = 0xFFFE
)

// SubjectPrefix is the first token of every subject a publisher uses; targets subscribe to
// SubjectPrefix + ".>" by default.
const SubjectPrefix = "bench"

// castagnoli is CRC-32C, computed in hardware on amd64 and arm64: the ceiling subscriber
// checksums every body inline, so the checksum must cost little next to NATS itself.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// seqOf makes the sequence number of a publisher's n-th message (n from 0).
func seqOf(pub int, n int64) uint64 { return uint64(pub)<<seqBits | uint64(n) }

// subjects returns the topics' subjects: bench.t0 ... bench.t<topics-1>.
func subjects(topics int) []string {
	s := make([]string, topics)
	for i := range s {
		s[i] = SubjectPrefix + ".t" + strconv.Itoa(i)
	}
	return s
}

// newBody returns a body of size bytes for publisher pub, with its filler in place.
func newBody(size, pub int) []byte {
	b := make([]byte, size)
	x := uint64(pub)*0x9E3779B97F4A7C15 + 1
	for i := 8; i < size; i++ {
		x = x*6364136223846793005 + 1442695040888963407
		b[i] = byte(x >> 56)
	}
	return b
}

// setSeq writes the sequence number into a body.
func setSeq(b []byte, seq uint64) { binary.BigEndian.PutUint64(b, seq) }

// bodyHash is the order-independent fingerprint of one body: its CRC-32C and its sequence
// number, mixed (splitmix64's finalizer) so that a sum over many bodies changes with any lost,
// duplicated or altered one.
func bodyHash(b []byte) uint64 {
	var seq uint64
	if len(b) >= 8 {
		seq = binary.BigEndian.Uint64(b)
	}
	x := seq ^ uint64(crc32.Checksum(b, castagnoli))<<32 ^ uint64(len(b))<<16
	x ^= x >> 30
	x *= 0xBF58476D1CE4E5B9
	x ^= x >> 27
	x *= 0x94D049BB133111EB
	x ^= x >> 31
	return x
}

// Tally is a count of messages, their body bytes and the sum of their body hashes: what the
// publisher sent, or what a target received or a store holds. Two tallies are equal only if the
// same bodies were counted, whatever the order (a loss and a duplicate do not cancel out, except
// by a 64-bit hash collision).
type Tally struct {
	Count int64  `json:"count"`
	Bytes int64  `json:"bytes"`
	Sum   uint64 `json:"sum"`
}

// Add counts one body.
func (t *Tally) Add(b []byte) {
	t.Count++
	t.Bytes += int64(len(b))
	t.Sum += bodyHash(b)
}

// Merge adds u to t.
func (t *Tally) Merge(u Tally) {
	t.Count += u.Count
	t.Bytes += u.Bytes
	t.Sum += u.Sum
}

// Diff says how got differs from t (the reference), or "" when they are equal.
func (t Tally) Diff(got Tally) string {
	switch {
	case got == t:
		return ""
	case got.Count < t.Count:
		return fmt.Sprintf("%d of %d messages missing", t.Count-got.Count, t.Count)
	case got.Count > t.Count:
		return fmt.Sprintf("%d messages more than the %d sent (duplicates)", got.Count-t.Count, t.Count)
	default:
		return fmt.Sprintf("all %d messages counted but the body checksum differs (%016x, want %016x; %d bytes, want %d)",
			t.Count, got.Sum, t.Sum, got.Bytes, t.Bytes)
	}
}

// atomicTally is a Tally that one goroutine adds to while others read it.
type atomicTally struct {
	count, bytes atomic.Int64
	sum          atomic.Uint64
}

// add counts one body and returns the new count.
func (t *atomicTally) add(b []byte) int64 {
	t.bytes.Add(int64(len(b)))
	t.sum.Add(bodyHash(b))
	return t.count.Add(1)
}

// load returns the tally so far.
func (t *atomicTally) load() Tally {
	return Tally{Count: t.count.Load(), Bytes: t.bytes.Load(), Sum: t.sum.Load()}
}

// routeCheck checks that a stored body is under the topic its publisher sent it to: message i
// of publisher p goes to topic (i·P + p) mod T (see Publish).
type routeCheck struct {
	publishers, topics int64
	subs               []string
}

func newRouteCheck(l Load) routeCheck {
	return routeCheck{publishers: int64(l.Publishers), topics: int64(l.Topics), subs: subjects(l.Topics)}
}

// want is the subject of the body's topic, "" when the body is not a publisher's.
func (r routeCheck) want(body []byte) string {
	if len(body) < 8 {
		return ""
	}
	seq := binary.BigEndian.Uint64(body)
	pub, i := int64(seq>>seqBits), int64(seq&(1<<seqBits-1))
	if pub >= r.publishers || r.topics == 0 {
		return ""
	}
	return r.subs[(i*r.publishers+pub)%r.topics]
}

// check returns a problem when body is under subject but was sent to another one.
func (r routeCheck) check(subject string, body []byte) string {
	if w := r.want(body); w != "" && w != subject {
		return fmt.Sprintf("message %x stored under %s, sent to %s", body[:8], subject, w)
	}
	return ""
}
