package commitlog

import (
	"bytes"
	"encoding/hex"
	"net/netip"
	"testing"

	"github.com/rocketstore/engine/internal/golden"
)

// goldenMessage builds the message of a record vector the way a broker would: the client's
// properties put in order into a Java HashMap(128), then CLUSTER=DefaultCluster, serialized in the
// map's iteration order.
func goldenMessage(t testing.TB, r golden.Record) Message {
	t.Helper()
	var props []Property
	for _, kv := range r.ClientProps {
		props = append(props, Property{kv[0], kv[1]})
	}
	if len(props) > 0 {
		// TV3 is a store-level record written without the send processor, so no CLUSTER.
		props = append(props, Property{PropCluster, "DefaultCluster"})
	}
	return Message{
		Topic:                     r.Topic,
		QueueID:                   r.QueueID,
		Flag:                      r.Flag,
		SysFlag:                   r.SysFlag,
		BornTimestamp:             r.BornTS,
		BornHost:                  netip.MustParseAddrPort(r.BornHost),
		StoreHost:                 netip.MustParseAddrPort(r.StoreHost),
		ReconsumeTimes:            r.ReconsumeTimes,
		PreparedTransactionOffset: r.PreparedTxOffset,
		Body:                      r.Body(),
		Properties:                AppendProperties(nil, JavaHashMapOrder(props)),
	}
}

func goldenNames() []string { return []string{"TV1", "TV2", "TV3", "TV4", "TV5"} }

func TestGoldenRecords(t *testing.T) {
	vecs := golden.Load().Records()
	for _, name := range goldenNames() {
		r := vecs[name]
		t.Run(name, func(t *testing.T) {
			m := goldenMessage(t, r)
			if got, want := string(m.Properties), r.StoredProps(); got != want {
				t.Fatalf("stored properties:\n got %q\nwant %q", got, want)
			}
			rec, err := AppendRecord(nil, &m, EncodeOptions{PropCRC: r.PropCRC})
			if err != nil {
				t.Fatal(err)
			}
			Stamp(rec, r.QueueOffset, r.PhysOffset, r.StoreTS, r.PropCRC)
			if want := r.Bytes(); !bytes.Equal(rec, want) {
				t.Fatalf("record mismatch\n got %x\nwant %x", rec, want)
			}
			checkGoldenView(t, r, m, rec)
		})
	}
}

func checkGoldenView(t *testing.T, r golden.Record, m Message, rec []byte) {
	t.Helper()
	chk := Check{RequirePropCRC: r.PropCRC}
	size, kind, err := CheckRecord(rec, chk)
	if err != nil || kind != KindRecord || size != r.TotalSize {
		t.Fatalf("CheckRecord = %d, %v, %v; want %d, record", size, kind, err, r.TotalSize)
	}
	v, err := Parse(rec)
	if err != nil {
		t.Fatal(err)
	}
	wantVer := V1
	if len(r.Topic) > 127 {
		wantVer = V2
	}
	bornV6 := netip.MustParseAddrPort(r.BornHost)
	storeV6 := netip.MustParseAddrPort(r.StoreHost)
	eq := func(field string, got, want any) {
		t.Helper()
		if got != want {
			t.Errorf("%s = %v, want %v", field, got, want)
		}
	}
	eq("TotalSize", v.TotalSize(), r.TotalSize)
	eq("Magic", v.Magic(), wantVer.Magic())
	eq("Version", v.Version(), wantVer)
	eq("BodyCRC", v.BodyCRC(), r.BodyCRC)
	eq("BodyCRC(body)", BodyCRC(r.Body()), r.BodyCRC)
	eq("QueueID", v.QueueID(), r.QueueID)
	eq("Flag", v.Flag(), r.Flag)
	eq("QueueOffset", v.QueueOffset(), r.QueueOffset)
	eq("PhysicalOffset", v.PhysicalOffset(), r.PhysOffset)
	eq("SysFlag", v.SysFlag(), r.EffectiveSysFlag)
	eq("BornTimestamp", v.BornTimestamp(), r.BornTS)
	eq("BornHost", v.BornHost(), bornV6)
	eq("StoreTimestamp", v.StoreTimestamp(), r.StoreTS)
	eq("StoreHost", v.StoreHost(), storeV6)
	eq("ReconsumeTimes", v.ReconsumeTimes(), r.ReconsumeTimes)
	eq("PreparedTransactionOffset", v.PreparedTransactionOffset(), r.PreparedTxOffset)
	eq("Body", string(v.Body()), string(r.Body()))
	eq("Topic", string(v.Topic()), r.Topic)
	eq("TransactionType", v.TransactionType(), TxNotType)
	eq("HasPropCRC", v.HasPropCRC(), r.PropCRC)
	props := string(v.Properties())
	if r.PropCRC {
		eq("props prefix", props[:len(props)-PropCRCLen], r.StoredProps())
	} else {
		eq("Properties", props, r.StoredProps())
	}

	// Message ids: from the record, from the host, and parsed back.
	eq("offsetMsgId(view)", string(v.AppendOffsetMsgID(nil)), r.OffsetMsgID)
	eq("offsetMsgId", OffsetMsgID(v.StoreHost(), v.PhysicalOffset()), r.OffsetMsgID)
	host, off, err := ParseOffsetMsgID(r.OffsetMsgID)
	if err != nil {
		t.Fatal(err)
	}
	eq("ParseOffsetMsgID host", host, storeV6)
	eq("ParseOffsetMsgID offset", off, r.PhysOffset)

	// Owned decode round-trips to the message (with the effective SYSFLAG).
	d, err := Decode(rec, chk)
	if err != nil {
		t.Fatal(err)
	}
	want := m
	want.SysFlag = r.EffectiveSysFlag
	if !sameMessage(d.Message, want, r.PropCRC) {
		t.Errorf("Decode = %+v\nwant %+v", d.Message, want)
	}
	eq("Decode.StoreTimestamp", d.StoreTimestamp, r.StoreTS)
	eq("Decode.QueueOffset", d.QueueOffset, r.QueueOffset)
	eq("Decode.PhysicalOffset", d.PhysicalOffset, r.PhysOffset)
	eq("Decode.BodyCRC", d.BodyCRC, r.BodyCRC)
	eq("Decode.TotalSize", d.TotalSize, r.TotalSize)
	eq("Decode.Version", d.Version, wantVer)
}

// sameMessage compares a decoded message with the one that was encoded. The stored properties are
// the encoded ones without __CRC32# entries, and with PropCRC a 0x02 if needed and the CRC entry.
func sameMessage(got, want Message, propCRC bool) bool {
	wp := appendWithoutPropCRC(nil, want.Properties)
	gp := got.Properties
	if propCRC {
		if !hasPropCRC(gp) {
			return false
		}
		gp = gp[:len(gp)-PropCRCLen]
		if len(wp) > 0 && wp[len(wp)-1] != PropertySeparator {
			wp = append(wp, PropertySeparator)
		}
	}
	return got.Topic == want.Topic && got.QueueID == want.QueueID && got.Flag == want.Flag &&
		got.SysFlag == want.SysFlag && got.BornTimestamp == want.BornTimestamp &&
		got.BornHost == want.BornHost && got.StoreHost == want.StoreHost &&
		got.ReconsumeTimes == want.ReconsumeTimes &&
		got.PreparedTransactionOffset == want.PreparedTransactionOffset &&
		bytes.Equal(got.Body, want.Body) && bytes.Equal(gp, wp)
}

func TestGoldenPropCRCDigits(t *testing.T) {
	r := golden.Load().TV4
	rec := r.Bytes()
	if got, want := string(rec[len(rec)-PropCRCLen:]), "__CRC32#\x019184889440\x02"; got != want {
		t.Fatalf("TV4 tail = %q, want %q", got, want)
	}
	if got := maskedCRC(rec[:len(rec)-PropCRCLen]); got != 449884819 {
		t.Fatalf("TV4 whole-record CRC = %d, want 449884819", got)
	}
	var e [PropCRCLen]byte
	putPropCRC(e[:], 449884819)
	if got, ok := propCRCValue(e[:]); !ok || got != 449884819 {
		t.Fatalf("propCRCValue = %d, %v", got, ok)
	}
}

func TestGoldenBlank(t *testing.T) {
	b := golden.Load().BLANK
	seg := make([]byte, b.MaxBlank)
	Blank(seg, b.MaxBlank)
	if got := hex.EncodeToString(seg[:BlankSize]); got != b.RecordHex {
		t.Fatalf("Blank = %s, want %s", got, b.RecordHex)
	}
	if Fits(900, b.MaxBlank) {
		t.Fatal("a 900-byte record must not fit in 824 bytes")
	}
	if !Fits(b.MaxBlank-BlankSize, b.MaxBlank) || Fits(b.MaxBlank-BlankSize+1, b.MaxBlank) {
		t.Fatal("Fits boundary is L+8 <= remaining")
	}
	size, kind, err := CheckRecord(seg, Check{})
	if err != nil || kind != KindBlank || size != b.MaxBlank {
		t.Fatalf("CheckRecord(blank) = %d, %v, %v", size, kind, err)
	}
	// A blank whose size is not the bytes left is corrupt.
	if _, kind, err := CheckRecord(seg[:b.MaxBlank-1], Check{}); kind != KindCorrupt || err == nil {
		t.Fatalf("short blank: %v, %v", kind, err)
	}
}

// TestGoldenScan scans all record vectors laid out one after another, then a blank.
func TestGoldenScan(t *testing.T) {
	vecs := golden.Load().Records()
	var seg []byte
	var offs []int
	for _, name := range goldenNames() {
		offs = append(offs, len(seg))
		seg = append(seg, vecs[name].Bytes()...)
	}
	dataEnd := len(seg)
	seg = append(seg, make([]byte, 100)...)
	Blank(seg[dataEnd:], len(seg)-dataEnd)
	var got []int
	end, tail, err := Scan(seg, 0, Check{}, func(off int, v View) error {
		got = append(got, off)
		return nil
	})
	if err != nil || tail != TailBlank || end != dataEnd {
		t.Fatalf("Scan = %d, %v, %v; want %d, blank", end, tail, err, dataEnd)
	}
	if len(got) != len(offs) {
		t.Fatalf("Scan visited %v, want %v", got, offs)
	}
	for i := range got {
		if got[i] != offs[i] {
			t.Fatalf("Scan visited %v, want %v", got, offs)
		}
	}
}
