package commitlog

import (
	"testing"
)

// TestCheckCRC: a reader's check finds a flipped bit anywhere in a record with the whole-record
// CRC (body, properties, the stamped fields, the entry itself), in the body of one without it, and
// a missing entry where one is required; an intact record passes.
func TestCheckCRC(t *testing.T) {
	record := func(propCRC bool) []byte {
		m := baseMessage()
		m.Properties = AppendProperty(nil, PropKeys, "k1 k2")
		rec, err := AppendRecord(nil, &m, EncodeOptions{PropCRC: propCRC})
		if err != nil {
			t.Fatal(err)
		}
		Stamp(rec, 7, 4096, 1_700_000_000_000, propCRC)
		return rec
	}
	view := func(b []byte) View {
		v, err := Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	withEntry, without := record(true), record(false)
	if err := view(withEntry).CheckCRC(true); err != nil {
		t.Fatalf("intact record with the entry: %v", err)
	}
	if err := view(without).CheckCRC(false); err != nil {
		t.Fatalf("intact record without the entry: %v", err)
	}
	if err := view(without).CheckCRC(true); reasonOf(err) != ReasonPropCRCMissing {
		t.Fatalf("entry required and absent: %v", err)
	}

	v := view(withEntry)
	bodyAt := len(withEntry) - len(v.Properties()) - 2 - len(v.Topic()) - 1 - len(v.Body())
	for _, c := range []struct {
		name string
		rec  []byte
		at   int
		want Reason
	}{
		{"body, with the entry", withEntry, bodyAt, ReasonPropCRC},
		{"queue offset, with the entry", withEntry, PosQueueOffset + 7, ReasonPropCRC},
		{"a property, with the entry", withEntry, len(withEntry) - PropCRCLen - 3, ReasonPropCRC},
		{"the entry's digits", withEntry, len(withEntry) - 5, ReasonPropCRC},
		{"body, without the entry", without, bodyAt, ReasonBodyCRC},
	} {
		b := append([]byte(nil), c.rec...)
		b[c.at] ^= 0x10
		v, err := Parse(b)
		if err != nil {
			t.Fatalf("%s: the flip broke the structure: %v", c.name, err)
		}
		if err := v.CheckCRC(false); reasonOf(err) != c.want {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	// The entry's own name damaged: the record no longer has one, which only the requirement
	// catches (its body CRC still holds).
	b := append([]byte(nil), withEntry...)
	b[len(b)-PropCRCLen+2] ^= 0x01
	if err := view(b).CheckCRC(false); err != nil {
		t.Fatalf("entry name damaged, not required: %v", err)
	}
	if err := view(b).CheckCRC(true); reasonOf(err) != ReasonPropCRCMissing {
		t.Fatalf("entry name damaged, required: %v", err)
	}
}
