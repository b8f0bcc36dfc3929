package commitlog

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"testing"
)

// checkScanned scans seg and checks that it finds exactly recs, in order, ending at end with tail.
func checkScanned(t *testing.T, seg []byte, recs []stamped, end int, tail Tail, chk Check) {
	t.Helper()
	i := 0
	gotEnd, gotTail, err := Scan(seg, 0, chk, func(off int, v View) error {
		if i >= len(recs) {
			t.Fatalf("Scan found an extra record at %d", off)
		}
		s := recs[i]
		i++
		if off != s.off {
			t.Fatalf("record %d at %d, want %d", i-1, off, s.off)
		}
		d := v.Decode()
		want := s.msg
		want.SysFlag = s.msg.SysFlag&^(FlagBornHostV6|FlagStoreHostV6) | HostFlags(s.msg.BornHost.Addr(), s.msg.StoreHost.Addr())
		// Decoded hosts are in their stored form: IPv4-mapped addresses come back as IPv4.
		want.BornHost = storedForm(want.BornHost)
		want.StoreHost = storedForm(want.StoreHost)
		if !sameMessage(d.Message, want, s.propCRC) {
			t.Fatalf("record %d decoded as\n%s\nwant\n%s", i-1, brief(d.Message), brief(want))
		}
		if d.QueueOffset != s.queueOffset || d.PhysicalOffset != s.phys || d.StoreTimestamp != s.stTS {
			t.Fatalf("record %d stamps = %d/%d/%d, want %d/%d/%d", i-1,
				d.QueueOffset, d.PhysicalOffset, d.StoreTimestamp, s.queueOffset, s.phys, s.stTS)
		}
		if d.Version != VersionForTopic(s.msg.Topic) || d.BodyCRC != BodyCRC(s.msg.Body) {
			t.Fatalf("record %d version %d crc %d", i-1, d.Version, d.BodyCRC)
		}
		return nil
	})
	if err != nil || gotEnd != end || gotTail != tail || i != len(recs) {
		t.Fatalf("Scan = %d, %v, %v after %d records; want %d, %v after %d", gotEnd, gotTail, err, i, end, tail, len(recs))
	}
}

// storedForm is a host as a record gives it back: IPv4-mapped addresses in their 4-byte form, the
// zero Addr as 0.0.0.0.
func storedForm(h netip.AddrPort) netip.AddrPort {
	a := h.Addr()
	if IsHostV6(a) {
		return h
	}
	if !a.IsValid() {
		return netip.AddrPortFrom(netip.IPv4Unspecified(), h.Port())
	}
	return netip.AddrPortFrom(a.Unmap(), h.Port())
}

func TestRoundTripRandomSegments(t *testing.T) {
	r := newRand(1)
	for iter := range 300 {
		size := 512 + r.IntN(64<<10)
		base := int64(r.IntN(1<<20)) << 30
		blank := r.IntN(2) == 0
		seg, recs, end := fillSegment(t, r, size, base, 2048, blank)
		tail := TailClean
		if blank {
			tail = TailBlank
		}
		checkScanned(t, seg, recs, end, tail, Check{})
		if iter%3 == 0 {
			checkScanned(t, seg, recs, end, tail, Check{NoBodyCRC: true, NoPropCRC: true})
		}
		// Scanning from any record start finds the same end.
		if len(recs) > 0 {
			from := recs[r.IntN(len(recs))].off
			gotEnd, gotTail, err := Scan(seg, from, Check{}, nil)
			if err != nil || gotEnd != end || gotTail != tail {
				t.Fatalf("Scan from %d = %d, %v, %v", from, gotEnd, gotTail, err)
			}
		}
	}
}

// TestRoundTripLargeBodies covers the body limit itself: bodies of exactly DefaultMaxBodySize and
// empty ones, next to each other in one segment.
func TestRoundTripLargeBodies(t *testing.T) {
	r := newRand(2)
	size := 3*(DefaultMaxBodySize+RecordOverhead) + 1000
	seg := make([]byte, size)
	var recs []stamped
	pos := 0
	for i, bodyLen := range []int{DefaultMaxBodySize, 0, DefaultMaxBodySize} {
		m := randMessage(r, 16)
		m.Body = make([]byte, bodyLen)
		for j := range m.Body {
			m.Body[j] = byte(j * 7)
		}
		propCRC := i != 1
		rec, err := AppendRecord(nil, &m, EncodeOptions{PropCRC: propCRC})
		if err != nil {
			t.Fatal(err)
		}
		s := stamped{off: pos, msg: m, propCRC: propCRC, queueOffset: int64(i), phys: int64(pos), stTS: 1700000000000}
		copy(seg[pos:], rec)
		Stamp(seg[pos:], s.queueOffset, s.phys, s.stTS, propCRC)
		recs = append(recs, s)
		pos += len(rec)
	}
	checkScanned(t, seg, recs, pos, TailClean, Check{})
}

// TestMutationPropCRC flips every byte of a record written with PropCRC, to every other value, and
// expects Scan to reject it: the whole-record CRC protects every header field.
func TestMutationPropCRC(t *testing.T) {
	r := newRand(3)
	for iter := range 6 {
		m := randMessage(r, 64)
		if iter == 0 {
			m.Body = nil
			m.Properties = nil
		}
		rec, err := AppendRecord(nil, &m, EncodeOptions{PropCRC: true})
		if err != nil {
			t.Fatal(err)
		}
		Stamp(rec, randInt64(r), randInt64(r), randInt64(r), true)
		// The record, a second valid record, then zeros: a mutation must stop the scan at 0.
		seg := append(append(bytes.Clone(rec), rec...), make([]byte, 64)...)
		chk := Check{RequirePropCRC: true}
		if end, tail, err := Scan(seg, 0, chk, nil); err != nil || tail != TailClean || end != 2*len(rec) {
			t.Fatalf("unmutated: %d, %v, %v", end, tail, err)
		}
		for i := range rec {
			orig := seg[i]
			for x := 1; x < 256; x++ {
				seg[i] = orig ^ byte(x)
				end, tail, err := Scan(seg, 0, chk, nil)
				if end != 0 || tail != TailCorrupt || !errors.Is(err, ErrCorrupt) {
					t.Fatalf("flip of byte %d (^%#x) not detected: %d, %v, %v", i, x, end, tail, err)
				}
			}
			seg[i] = orig
		}
	}
}

// TestMutationBodyCRC flips body bytes of records without PropCRC: BODYCRC catches them.
func TestMutationBodyCRC(t *testing.T) {
	r := newRand(4)
	for range 6 {
		m := randMessage(r, 256)
		m.Body = append(m.Body, 'x')
		rec, err := AppendRecord(nil, &m, EncodeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		Stamp(rec, 1, 2, 3, false)
		v, err := Parse(rec)
		if err != nil {
			t.Fatal(err)
		}
		bodyAt := len(rec) - len(v.Properties()) - 2 - len(v.Topic()) - v.Version().TopicLenSize() - len(v.Body())
		for i := bodyAt; i < bodyAt+len(m.Body); i++ {
			orig := rec[i]
			for x := 1; x < 256; x++ {
				rec[i] = orig ^ byte(x)
				_, kind, err := CheckRecord(rec, Check{})
				var ce *CorruptError
				if kind != KindCorrupt || !errors.As(err, &ce) || ce.Reason != ReasonBodyCRC {
					t.Fatalf("body flip at %d (^%#x): %v, %v", i, x, kind, err)
				}
			}
			rec[i] = orig
		}
	}
}

// brief prints a message with its body and properties summarised.
func brief(m Message) string {
	return fmt.Sprintf("topic=%q qid=%d flag=%d sys=%#x born=%d/%v store=%v recons=%d prep=%d body=%d/%08x props=%q",
		m.Topic, m.QueueID, m.Flag, m.SysFlag, m.BornTimestamp, m.BornHost, m.StoreHost, m.ReconsumeTimes,
		m.PreparedTransactionOffset, len(m.Body), BodyCRC(m.Body), m.Properties)
}
