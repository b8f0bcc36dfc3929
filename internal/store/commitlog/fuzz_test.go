package commitlog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"maps"
	"strings"
	"testing"

	"github.com/rocketstore/engine/internal/golden"
	"github.com/rocketstore/engine/internal/vfs"
)

// checkOf maps a fuzzer byte to a Check: bit 0 NoBodyCRC, bit 1 NoPropCRC, bit 2 RequirePropCRC.
func checkOf(flags uint8) Check {
	return Check{NoBodyCRC: flags&1 != 0, NoPropCRC: flags&2 != 0, RequirePropCRC: flags&4 != 0}
}

// reencode rebuilds an accepted record from its decoded fields and checks that the bytes come out
// the same: the decoder loses nothing. Two fields cannot round-trip through a Message and are
// copied: BODYCRC when the check did not verify it, and a stored port outside 0..65535 (RocketMQ
// does not check ports either).
func reencode(t *testing.T, v View, chk Check) {
	t.Helper()
	d := v.Decode()
	m := d.Message
	n := RecordLen(d.Version, d.SysFlag, len(m.Body), len(m.Topic), len(m.Properties))
	if n != v.TotalSize() {
		t.Fatalf("RecordLen = %d, TOTALSIZE %d", n, v.TotalSize())
	}
	out := appendFields(nil, n, d.Version, d.SysFlag, &m, len(m.Properties), propsPlan{})
	Stamp(out, d.QueueOffset, d.PhysicalOffset, d.StoreTimestamp, false)
	orig := v.Bytes()
	if chk.NoBodyCRC {
		copy(out[PosBodyCRC:PosBodyCRC+4], orig[PosBodyCRC:])
	}
	bornPort := PosBornHost + len(v.BornHostBytes()) - 4
	storePort := storeHostPos(d.SysFlag) + len(v.StoreHostBytes()) - 4
	for _, p := range []int{bornPort, storePort} {
		if binary.BigEndian.Uint32(orig[p:]) > 0xFFFF {
			copy(out[p:p+4], orig[p:p+4])
		}
	}
	if !bytes.Equal(out, orig) {
		t.Fatalf("re-encoded record differs\n got %x\nwant %x", out, orig)
	}
}

// checkScan runs Scan over seg from from and checks its invariants; it returns the end.
func checkScan(t *testing.T, seg []byte, from int, chk Check) int {
	t.Helper()
	next := from
	end, tail, err := Scan(seg, from, chk, func(off int, v View) error {
		if off != next {
			t.Fatalf("record at %d, expected the next one at %d", off, next)
		}
		size, kind, err := CheckRecord(seg[off:], chk)
		if kind != KindRecord || size != v.TotalSize() || err != nil {
			t.Fatalf("accepted record at %d does not re-validate: %d, %v, %v", off, size, kind, err)
		}
		if !bytes.Equal(v.Bytes(), seg[off:off+size]) {
			t.Fatalf("view at %d is not the record's bytes", off)
		}
		reencode(t, v, chk)
		next = off + size
		return nil
	})
	if end != next || end < from || end > len(seg) {
		t.Fatalf("Scan end %d, records end at %d, len %d", end, next, len(seg))
	}
	rest := seg[end:]
	switch tail {
	case TailClean:
		if err != nil || (len(rest) >= 4 && firstNonZero(rest) >= 0) {
			t.Fatalf("clean tail at %d with %v, non-zero bytes after it", end, err)
		}
	case TailBlank:
		if err != nil || len(rest) < BlankSize || binary.BigEndian.Uint32(rest[PosMagic:]) != MagicBlank ||
			int(binary.BigEndian.Uint32(rest)) != len(rest) {
			t.Fatalf("blank tail at %d is not a blank filler (%v)", end, err)
		}
	case TailCorrupt:
		var ce *CorruptError
		if !errors.As(err, &ce) || ce.Off != end || !errors.Is(err, ErrCorrupt) {
			t.Fatalf("corrupt tail without a CorruptError at %d: %v", end, err)
		}
		if _, kind, _ := CheckRecord(rest, chk); kind != KindCorrupt {
			t.Fatalf("CheckRecord disagrees with Scan at %d: %v", end, kind)
		}
	default:
		t.Fatalf("tail %v", tail)
	}
	return end
}

func FuzzScan(f *testing.F) {
	for _, seed := range scanSeeds(f) {
		f.Add(seed, uint8(0))
	}
	f.Fuzz(func(t *testing.T, seg []byte, flags uint8) {
		chk := checkOf(flags)
		end := checkScan(t, seg, 0, chk)
		// Weaker checks accept at least as much.
		if weak := checkScan(t, seg, 0, Check{NoBodyCRC: true, NoPropCRC: true}); weak < end {
			t.Fatalf("weaker check ends at %d, before %d", weak, end)
		}
		// Starting in the middle is allowed anywhere and never panics.
		if len(seg) > 0 {
			checkScan(t, seg, int(flags)%(len(seg)+1), chk)
		}
		// Reading past the last record only where the data is changes nothing.
		for _, data := range []func(int64) []vfs.Extent{honestExtents(seg), func(from int64) []vfs.Extent {
			return []vfs.Extent{{Off: from, End: int64(len(seg))}}
		}} {
			se, st, serr := ScanSparse(seg, 0, chk, data, nil)
			we, wt, werr := Scan(seg, 0, chk, nil)
			if se != we || st != wt || (serr == nil) != (werr == nil) || (serr != nil && serr.Error() != werr.Error()) {
				t.Fatalf("ScanSparse %d %v %v, Scan %d %v %v", se, st, serr, we, wt, werr)
			}
		}
	})
}

func FuzzCheckRecord(f *testing.F) {
	for _, seed := range checkRecordSeeds() {
		f.Add(seed, uint8(0))
	}
	f.Fuzz(func(t *testing.T, b []byte, flags uint8) {
		chk := checkOf(flags)
		size, kind, err := CheckRecord(b, chk)
		switch kind {
		case KindEnd:
			if err != nil || size != 0 || (len(b) >= 4 && firstNonZero(b) >= 0) {
				t.Fatalf("end: %d, %v with data", size, err)
			}
		case KindBlank:
			if err != nil || size != len(b) || size < BlankSize {
				t.Fatalf("blank: %d, %v", size, err)
			}
		case KindRecord:
			if err != nil || size < MinRecordLen || size > len(b) {
				t.Fatalf("record: %d, %v", size, err)
			}
			v, perr := Parse(b)
			if perr != nil || v.TotalSize() != size {
				t.Fatalf("Parse disagrees: %v", perr)
			}
			if _, derr := Decode(b, chk); derr != nil {
				t.Fatalf("Decode disagrees: %v", derr)
			}
			reencode(t, v, chk)
			_ = v.Properties().DispatchProps()
			_, _ = v.UniqKey()
			it := v.Keys()
			for _, ok := it.Next(); ok; _, ok = it.Next() {
			}
			if id := v.AppendOffsetMsgID(nil); len(id) != OffsetMsgIDLenV4 && len(id) != OffsetMsgIDLenV6 {
				t.Fatalf("msg id %s", id)
			}
		case KindCorrupt:
			if !errors.Is(err, ErrCorrupt) || size != 0 || err.Error() == "" {
				t.Fatalf("corrupt: %d, %v", size, err)
			}
		default:
			t.Fatalf("kind %v", kind)
		}
		if _, perr := Parse(b); perr == nil && kind == KindCorrupt && reasonOf(err) < ReasonBodyCRC {
			t.Fatalf("Parse accepts what CheckRecord calls structurally corrupt: %v", err)
		}
		checkReadCRC(t, b)
	})
}

// checkReadCRC: a reader's CheckCRC agrees with CheckRecord on whatever Parse accepts. It checks
// the one CRC the record has (the __CRC32# entry where there is one, else BODYCRC), so it
// passes every record both CRCs pass, and fails exactly where that one CRC fails.
func checkReadCRC(t *testing.T, b []byte) {
	v, err := Parse(b)
	if err != nil {
		return
	}
	got := v.CheckCRC(false)
	if got != nil && !errors.Is(got, ErrCorrupt) {
		t.Fatalf("CheckCRC: %v does not wrap ErrCorrupt", got)
	}
	if _, _, full := CheckRecord(b, Check{}); full == nil && got != nil {
		t.Fatalf("CheckCRC refuses a record CheckRecord accepts: %v", got)
	}
	one := Check{NoPropCRC: true}
	if v.HasPropCRC() {
		one = Check{NoBodyCRC: true}
	}
	if _, _, want := CheckRecord(b, one); (want == nil) != (got == nil) {
		t.Fatalf("CheckCRC %v, CheckRecord with %+v %v", got, one, want)
	}
	if req := v.CheckCRC(true); v.HasPropCRC() && (req == nil) != (got == nil) || !v.HasPropCRC() && reasonOf(req) != ReasonPropCRCMissing {
		t.Fatalf("CheckCRC(require) %v, CheckCRC %v, entry %v", req, got, v.HasPropCRC())
	}
}

func FuzzProperties(f *testing.F) {
	for _, seed := range propertiesSeeds() {
		f.Add(seed, "KEYS", "a b")
	}
	f.Add([]byte("a\x01b"), "", "v")
	f.Add([]byte("__CRC32#\x011\x02"), PropCRC32, "9")
	f.Fuzz(func(t *testing.T, b []byte, name, value string) {
		p := Properties(b)
		m := p.Map()
		var entries []Property
		for n, v := range p.All() {
			if len(n) == 0 || len(v) == 0 || bytes.IndexByte(n, NameValueSeparator) >= 0 ||
				bytes.IndexByte(n, PropertySeparator) >= 0 || bytes.IndexByte(v, PropertySeparator) >= 0 {
				t.Fatalf("malformed entry %q=%q", n, v)
			}
			entries = append(entries, Property{string(n), string(v)})
		}
		for k, want := range m {
			if got, ok := p.Get(k); !ok || string(got) != want {
				t.Fatalf("Get(%q) = %q, %v; Map has %q", k, got, ok, want)
			}
		}
		// Re-serialising the entries in Java order parses back to the same map.
		if again := Properties(AppendProperties(nil, JavaHashMapOrder(entries))).Map(); !maps.Equal(again, m) {
			t.Fatalf("re-serialised map %v, want %v", again, m)
		}
		// Well formed: the entries, written again in order, are the bytes themselves; the
		// longest well-formed prefix is well formed and is all of them only when they are.
		if wf := p.wellFormedPrefix(); wf < 0 || wf > len(b) || !Properties(b[:wf]).WellFormed() || (wf == len(b)) != p.WellFormed() {
			t.Fatalf("well-formed prefix %d of %q", wf, b)
		}
		if p.WellFormed() {
			var again []byte
			for n, v := range p.All() {
				again = AppendProperty(again, string(n), string(v))
			}
			if !bytes.Equal(again, b) {
				t.Fatalf("well-formed %q written again as %q", b, again)
			}
			if CheckProperty(name, value) == nil && !Properties(AppendProperty(bytes.Clone(b), name, value)).WellFormed() {
				t.Fatalf("%q with the valid pair %q=%q appended is not well formed", b, name, value)
			}
		}
		stripped := appendWithoutPropCRC(nil, b)
		if n, _ := lenWithoutPropCRC(b); n != len(stripped) {
			t.Fatalf("lenWithoutPropCRC %d, stripped %d", n, len(stripped))
		}
		if _, ok := Properties(stripped).Get(PropCRC32); ok {
			t.Fatalf("stripped properties still have %s: %q", PropCRC32, stripped)
		}
		if CheckProperty(name, value) == nil {
			one := AppendProperty(nil, name, value)
			if got := Properties(one).Map(); len(got) != 1 || got[name] != value {
				t.Fatalf("valid pair %q=%q parsed as %v", name, value, got)
			}
			if len(b) == 0 || b[len(b)-1] == PropertySeparator {
				if got, ok := Properties(AppendProperty(bytes.Clone(b), name, value)).Get(name); !ok || string(got) != value {
					t.Fatalf("appended pair %q=%q read back as %q", name, value, got)
				}
			}
		}
		// Any properties encode into a record that scans back with the same properties.
		msg := baseMessage()
		msg.Properties = b
		for _, propCRC := range []bool{false, true} {
			rec, err := AppendRecord(nil, &msg, EncodeOptions{PropCRC: propCRC})
			if err != nil {
				if !errors.Is(err, ErrPropertiesTooLarge) {
					t.Fatal(err)
				}
				continue
			}
			Stamp(rec, 1, 2, 3, propCRC)
			d, err := Decode(rec, Check{RequirePropCRC: propCRC})
			if err != nil {
				t.Fatalf("encoded record rejected: %v", err)
			}
			if !sameMessage(d.Message, Message{
				Topic: msg.Topic, BornHost: msg.BornHost, StoreHost: msg.StoreHost, Body: msg.Body, Properties: b,
			}, propCRC) {
				t.Fatalf("properties %q stored as %q", b, d.Properties)
			}
		}
	})
}

func FuzzParseOffsetMsgID(f *testing.F) {
	for _, seed := range msgIDSeeds() {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, id string) {
		host, off, err := ParseOffsetMsgID(id)
		if err != nil {
			if !errors.Is(err, ErrInvalidMsgID) {
				t.Fatalf("error %v does not wrap ErrInvalidMsgID", err)
			}
			return
		}
		got := OffsetMsgID(host, off)
		want := strings.ToUpper(id)
		if len(id) == OffsetMsgIDLenV6 && !IsHostV6(host.Addr()) {
			// An IPv4-mapped IPv6 id comes back in its IPv4 form.
			want = want[24:32] + want[32:]
		}
		if got != want {
			t.Fatalf("ParseOffsetMsgID(%q) = %v, %d; re-encoded %q", id, host, off, got)
		}
	})
}

// Seed inputs, shared by f.Add and the checked-in corpora under testdata/fuzz.

func goldenRecords() [][]byte {
	v := golden.Load()
	var out [][]byte
	for _, name := range goldenNames() {
		out = append(out, v.Records()[name].Bytes())
	}
	return out
}

func scanSeeds(tb testing.TB) [][]byte {
	recs := goldenRecords()
	var seeds [][]byte
	for _, r := range recs {
		seeds = append(seeds, append(bytes.Clone(r), make([]byte, 16)...))
	}
	var seg []byte
	for _, r := range recs {
		seg = append(seg, r...)
	}
	withBlank := append(bytes.Clone(seg), make([]byte, 40)...)
	Blank(withBlank[len(seg):], 40)
	torn := append(append(bytes.Clone(recs[0]), recs[1][:60]...), make([]byte, 30)...)
	flipped := bytes.Clone(recs[3])
	flipped[30] ^= 0x10
	random, _, _ := fillSegment(tb, newRand(9), 2048, 1<<30, 64, true)
	return append(seeds, withBlank, torn, flipped, recs[0][:len(recs[0])/2], make([]byte, 64), random)
}

func checkRecordSeeds() [][]byte {
	recs := goldenRecords()
	blank := make([]byte, 24)
	Blank(blank, 24)
	trunc := recs[1][:len(recs[1])-3]
	bad := bytes.Clone(recs[4])
	bad[90] ^= 0xFF
	return append(recs, blank, trunc, bad, make([]byte, 12), []byte{0, 0, 0})
}

func propertiesSeeds() [][]byte {
	var seeds [][]byte
	for _, r := range goldenRecords() {
		v, _ := Parse(r)
		seeds = append(seeds, bytes.Clone(v.Properties()))
	}
	return append(seeds, []byte("\x01\x02\x01a\x01\x02b\x01c\x01d"), []byte("x\x02__CRC32#\x011234567890"),
		// Torn by a power cut: a record's first page on disk, its second not (zeros), the cut in
		// a name, after a 0x01, inside a value.
		[]byte("UNIQ_KEY\x01K1\x02NATS_SUBJ\x00\x00\x00\x00"), []byte("UNIQ_KEY\x01K1\x02NATS_SUBJ\x01\x00\x00"),
		[]byte("NATS_SUBJ\x01orders.e\x00\x00\x00"))
}

func msgIDSeeds() []string {
	var seeds []string
	for _, name := range goldenNames() {
		seeds = append(seeds, golden.Load().Records()[name].OffsetMsgID)
	}
	return append(seeds, "c0a8001400002a9f0000000000000000",
		"00000000000000000000FFFF0A00000100002A9F0000000000000001", "C0A80014FFFFFFFF0000000000000000", "xyz")
}
