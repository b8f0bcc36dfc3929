package commitlog

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/rocketstore/engine/internal/golden"
)

func reasonOf(err error) Reason {
	var ce *CorruptError
	if errors.As(err, &ce) {
		return ce.Reason
	}
	return ReasonNone
}

func TestCheckRecordKinds(t *testing.T) {
	tv1 := golden.Load().TV1.Bytes()
	withTail := func(b []byte, n int) []byte { return append(append([]byte(nil), b...), make([]byte, n)...) }
	mut := func(b []byte, f func([]byte)) []byte { c := append([]byte(nil), b...); f(c); return c }
	put32 := func(p int, v uint32) func([]byte) { return func(b []byte) { binary.BigEndian.PutUint32(b[p:], v) } }

	cases := []struct {
		name   string
		b      []byte
		kind   Kind
		size   int
		reason Reason
	}{
		{"empty", nil, KindEnd, 0, ReasonNone},
		{"3 bytes", []byte{1, 2, 3}, KindEnd, 0, ReasonNone},
		{"zeros", make([]byte, 4096), KindEnd, 0, ReasonNone},
		{"zero size then junk", mut(make([]byte, 4096), func(b []byte) { b[4095] = 1 }), KindCorrupt, 0, ReasonTornZero},
		{"record", tv1, KindRecord, len(tv1), ReasonNone},
		{"record then zeros", withTail(tv1, 100), KindRecord, len(tv1), ReasonNone},
		{"size only", []byte{0, 0, 0, 9, 0}, KindCorrupt, 0, ReasonSizeRange},
		{"bad magic", mut(tv1, put32(PosMagic, 0xDEADBEEF)), KindCorrupt, 0, ReasonBadMagic},
		{"blank", mut(make([]byte, 64), func(b []byte) { Blank(b, 64) }), KindBlank, 64, ReasonNone},
		{"blank of 8", mut(make([]byte, 8), func(b []byte) { Blank(b, 8) }), KindBlank, 8, ReasonNone},
		{"blank too short", mut(make([]byte, 64), func(b []byte) { Blank(b, 63) }), KindCorrupt, 0, ReasonBadBlank},
		{"blank too long", mut(make([]byte, 64), func(b []byte) { Blank(b, 65) }), KindCorrupt, 0, ReasonBadBlank},
		{"truncated", tv1[:len(tv1)-1], KindCorrupt, 0, ReasonSizeRange},
		{"size too small", mut(tv1, put32(0, 90)), KindCorrupt, 0, ReasonSizeRange},
		{"negative size", mut(tv1, put32(0, 0xFFFFFFF0)), KindCorrupt, 0, ReasonSizeRange},
		{"size too large", mut(withTail(tv1, 10), put32(0, uint32(len(tv1)+1))), KindCorrupt, 0, ReasonSizeMismatch},
		{"negative body length", mut(tv1, put32(84, 0xFFFFFFFF)), KindCorrupt, 0, ReasonBadLength},
		{"body past the end", mut(tv1, put32(84, 1000)), KindCorrupt, 0, ReasonBadLength},
		{"topic past the end", mut(tv1, func(b []byte) { b[102] = 127 }), KindCorrupt, 0, ReasonBadLength},
		{"signed V1 topic length", mut(tv1, func(b []byte) { b[102] = 0x80 }), KindCorrupt, 0, ReasonBadLength},
		{"props length off", mut(tv1, func(b []byte) { b[113]-- }), KindCorrupt, 0, ReasonSizeMismatch},
		{"body crc", mut(tv1, func(b []byte) { b[88] ^= 1 }), KindCorrupt, 0, ReasonBodyCRC},
		{"ipv6 flag on ipv4 record", mut(tv1, put32(PosSysFlag, uint32(FlagBornHostV6))), KindCorrupt, 0, ReasonBadLength},
	}
	for _, c := range cases {
		size, kind, err := CheckRecord(c.b, Check{})
		if kind != c.kind || size != c.size || reasonOf(err) != c.reason {
			t.Errorf("%s: CheckRecord = %d, %v, %v; want %d, %v, %v", c.name, size, kind, err, c.size, c.kind, c.reason)
		}
		if (err != nil) != (c.kind == KindCorrupt) || (err != nil && !errors.Is(err, ErrCorrupt)) {
			t.Errorf("%s: err = %v", c.name, err)
		}
	}
}

func TestPropCRCChecks(t *testing.T) {
	tv1, tv4 := golden.Load().TV1.Bytes(), golden.Load().TV4.Bytes()
	if _, kind, err := CheckRecord(tv1, Check{RequirePropCRC: true}); kind != KindCorrupt || reasonOf(err) != ReasonPropCRCMissing {
		t.Errorf("TV1 with RequirePropCRC: %v, %v", kind, err)
	}
	bad := append([]byte(nil), tv4...)
	bad[len(bad)-2] = 'x' // a digit that is not one
	if _, kind, err := CheckRecord(bad, Check{}); kind != KindCorrupt || reasonOf(err) != ReasonPropCRC {
		t.Errorf("TV4 with a bad digit: %v, %v", kind, err)
	}
	if _, kind, err := CheckRecord(bad, Check{NoPropCRC: true}); kind != KindRecord {
		t.Errorf("TV4 with a bad digit, NoPropCRC: %v, %v", kind, err)
	}
	if _, kind, err := CheckRecord(bad, Check{NoPropCRC: true, RequirePropCRC: true}); kind != KindCorrupt {
		t.Errorf("RequirePropCRC overrides NoPropCRC: %v, %v", kind, err)
	}
	bad = append([]byte(nil), tv4...)
	binary.BigEndian.PutUint64(bad[PosQueueOffset:], 1) // a stamped field
	if _, kind, err := CheckRecord(bad, Check{}); kind != KindCorrupt || reasonOf(err) != ReasonPropCRC {
		t.Errorf("TV4 with another queue offset: %v, %v", kind, err)
	}
}

func TestScanTails(t *testing.T) {
	tv1 := golden.Load().TV1.Bytes()
	seg := make([]byte, 3*len(tv1)+50)
	copy(seg, tv1)
	copy(seg[len(tv1):], tv1)
	n := 2 * len(tv1)

	if end, tail, err := Scan(seg, 0, Check{}, nil); end != n || tail != TailClean || err != nil {
		t.Fatalf("clean: %d, %v, %v", end, tail, err)
	}
	// Fewer than 4 bytes left after the last record is a clean end.
	if end, tail, err := Scan(seg[:n+3], 0, Check{}, nil); end != n || tail != TailClean || err != nil {
		t.Fatalf("short tail: %d, %v, %v", end, tail, err)
	}
	// A torn record: its first bytes written, the rest still zero.
	copy(seg[n:], tv1[:40])
	end, tail, err := Scan(seg, 0, Check{}, nil)
	var ce *CorruptError
	if end != n || tail != TailCorrupt || !errors.As(err, &ce) || ce.Off != n {
		t.Fatalf("torn: %d, %v, %v", end, tail, err)
	}
	// A stray byte after a zero size is torn, not clean.
	clear(seg[n:])
	seg[len(seg)-1] = 7
	if end, tail, err := Scan(seg, 0, Check{}, nil); end != n || tail != TailCorrupt || reasonOf(err) != ReasonTornZero {
		t.Fatalf("stray byte: %d, %v, %v", end, tail, err)
	}
	// The callback's error stops the scan at that record.
	stop := errors.New("stop")
	calls := 0
	end, tail, err = Scan(seg, 0, Check{}, func(off int, v View) error {
		calls++
		if off > 0 {
			return stop
		}
		return nil
	})
	if end != len(tv1) || tail != TailStopped || err != stop || calls != 2 {
		t.Fatalf("stopped: %d, %v, %v, %d calls", end, tail, err, calls)
	}
	// from out of range.
	for _, from := range []int{-1, len(seg) + 1} {
		if _, _, err := Scan(seg, from, Check{}, nil); !errors.Is(err, ErrOutOfRange) {
			t.Fatalf("from %d: %v", from, err)
		}
	}
	if end, tail, err := Scan(seg, len(seg), Check{}, nil); end != len(seg) || tail != TailClean || err != nil {
		t.Fatalf("from the end: %d, %v, %v", end, tail, err)
	}
}

func TestFirstNonZero(t *testing.T) {
	b := make([]byte, 300)
	if firstNonZero(b) != -1 {
		t.Fatal("zeros")
	}
	for i := range b {
		b[i] = 0x80
		for _, start := range []int{0, 1, 7} {
			if start <= i {
				if got := firstNonZero(b[start:]); got != i-start {
					t.Fatalf("firstNonZero(b[%d:]) with byte %d set = %d", start, i, got)
				}
			}
		}
		b[i] = 0
	}
}

func TestErrorText(t *testing.T) {
	for r := ReasonNone; r <= ReasonPropCRCMissing+1; r++ {
		if (&CorruptError{Reason: r}).Error() == "" || r.String() == "" {
			t.Fatal("empty error text")
		}
	}
	for k := KindEnd; k <= KindCorrupt+1; k++ {
		_ = k.String()
	}
	for tl := TailClean; tl <= TailStopped+1; tl++ {
		_ = tl.String()
	}
}
