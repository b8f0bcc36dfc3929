package indexfile

import (
	"bytes"
	"errors"
	"testing"

	"github.com/rocketstore/engine/internal/golden"
)

func TestHeaderCodecGolden(t *testing.T) {
	v := golden.Load()
	raw := golden.Hex(v.INDEX.HeaderHex)
	h, err := DecodeHeader(raw)
	if err != nil {
		t.Fatal(err)
	}
	want := Header(v.INDEX.HeaderFields)
	if h != want {
		t.Fatalf("DecodeHeader = %+v, want %+v", h, want)
	}
	var b [HeaderSize]byte
	h.Put(b[:])
	if !bytes.Equal(b[:], raw) {
		t.Fatalf("Put = %x, want %x", b, raw)
	}
	if _, err := DecodeHeader(raw[:HeaderSize-1]); !errors.Is(err, ErrShort) {
		t.Fatalf("short header: err = %v", err)
	}
}

func TestEntryCodecGolden(t *testing.T) {
	v := golden.Load()
	all := append(append([]golden.IndexEntry(nil), v.INDEX.Entries...), v.INDEX_ROLLED_FIRST_ENTRY.Entry)
	for _, ge := range all {
		raw := ge.Entry()
		e, err := DecodeEntry(raw)
		if err != nil {
			t.Fatal(err)
		}
		if e.KeyHash != ge.KeyHash || e.TimeDiff != ge.TimeDiffSeconds || e.PrevIndex != ge.PrevIndex {
			t.Errorf("%s: DecodeEntry = %+v, want hash %d timeDiff %d prev %d", ge.Key, e, ge.KeyHash, ge.TimeDiffSeconds, ge.PrevIndex)
		}
		var b [EntrySize]byte
		e.Put(b[:])
		if !bytes.Equal(b[:], raw) {
			t.Errorf("%s: Put = %x, want %x", ge.Key, b, raw)
		}
	}
	if _, err := DecodeEntry(make([]byte, EntrySize-1)); !errors.Is(err, ErrShort) {
		t.Fatalf("short entry: err = %v", err)
	}
}

func TestGeometry(t *testing.T) {
	g := DefaultGeometry
	if got := g.FileSize(); got != 420_000_040 || got != golden.Load().INDEX.FileSize {
		t.Fatalf("FileSize = %d", got)
	}
	for _, ge := range golden.Load().INDEX.Entries {
		if got := g.SlotOffset(int32(ge.Slot)); got != ge.SlotFileOffset {
			t.Errorf("SlotOffset(%d) = %d, want %d", ge.Slot, got, ge.SlotFileOffset)
		}
		if got := int64(ge.KeyHash % g.Slots); got != ge.Slot {
			t.Errorf("%s: slot %d, want %d", ge.Key, got, ge.Slot)
		}
	}
	if got := g.EntryOffset(1); got != 20_000_060 {
		t.Fatalf("EntryOffset(1) = %d", got)
	}
	for _, bad := range []Geometry{{0, 10}, {10, 1}, {-1, 5}, {5_000_000, 200_000_000}} {
		if bad.Validate() == nil {
			t.Errorf("Validate(%+v) = nil", bad)
		}
	}
	if err := (Geometry{1, 2}).Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestTimeMatched(t *testing.T) {
	h := Header{BeginTimestamp: 100, EndTimestamp: 200}
	cases := []struct {
		begin, end int64
		want       bool
	}{
		{0, 50, false},
		{0, 100, true},   // touches the begin
		{200, 300, true}, // touches the end
		{201, 300, false},
		{120, 150, true}, // inside
		{50, 250, true},  // covers
		{150, 120, true}, // begin inside, even with end < begin: Java's comparisons
		{300, 250, false},
	}
	for _, c := range cases {
		if got := h.TimeMatched(c.begin, c.end); got != c.want {
			t.Errorf("TimeMatched(%d, %d) = %v, want %v", c.begin, c.end, got, c.want)
		}
	}
}
