package consumequeue

import (
	"bytes"
	"encoding/hex"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/rocketstore/engine/internal/golden"
	"github.com/rocketstore/engine/internal/store/javahash"
	"github.com/rocketstore/engine/internal/vfs"
)

func TestUnitCodec(t *testing.T) {
	for _, u := range []Unit{
		{},
		{Phys: 1, Size: 2, TagsCode: 3},
		{Phys: math.MaxInt64, Size: math.MaxInt32, TagsCode: math.MinInt64},
		{Phys: -1, Size: -1, TagsCode: -1},
		Blank,
	} {
		var b [UnitSize]byte
		u.Encode(b[:])
		if got := DecodeUnit(b[:]); got != u {
			t.Errorf("decode(encode(%+v)) = %+v", u, got)
		}
		if a := AppendUnit([]byte("x"), u); !bytes.Equal(a[1:], b[:]) || len(a) != 1+UnitSize {
			t.Errorf("AppendUnit(%+v) = %x, Encode = %x", u, a, b)
		}
	}
	if got := hex.EncodeToString(AppendUnit(nil, Blank)); got != "00000000000000007fffffff0000000000000000" {
		t.Errorf("blank = %s", got)
	}
	if b := AppendUnit(nil, Unit{Phys: 0x0102030405060708, Size: 0x0a0b0c0d, TagsCode: 0x1112131415161718}); hex.EncodeToString(b) != "01020304050607080a0b0c0d1112131415161718" {
		t.Errorf("not big-endian: %x", b)
	}
	for _, c := range []struct {
		u                   Unit
		valid, real, filler bool // filler whatever follows but a blank
	}{
		{Unit{}, false, false, false},
		{Unit{Phys: 0, Size: 1}, true, false, false}, // the CommitLog's first record
		{Unit{Phys: 1, Size: 1}, true, true, false},
		{Unit{Phys: -1, Size: 10}, false, false, false},
		{Unit{Phys: 5, Size: 0, TagsCode: 9}, false, false, false},
		{Unit{Phys: 5, Size: -3}, false, false, false},
		{Blank, true, false, true},
		{Unit{Phys: 0, Size: 0x7F000000}, true, false, true}, // torn blanks that keep the size's first byte
		{Unit{Phys: 0, Size: 0x7FFFFF00}, true, false, true},
		{Unit{Phys: 0, Size: 0x7F00FFFF}, true, false, true},
		{Unit{Phys: 0, Size: 0x00FFFFFF}, true, false, false}, // ... and that lose it: records may have these sizes
		{Unit{Phys: 0, Size: 0x0000FFFF}, true, false, false},
		{Unit{Phys: 0, Size: 0x7F123456}, true, false, false}, // no torn blank: a record of about 2 GiB
		{Unit{Phys: 0, Size: 20 << 20}, true, false, false},   // a record of 20 MiB (max_body above 16 MiB)
		{Unit{Phys: 0, Size: math.MaxInt32, TagsCode: 1}, true, false, false},
	} {
		if c.u.Valid() != c.valid || c.u.real() != c.real || c.u.IsBlank() != (c.u == Blank) {
			t.Errorf("%+v: valid %v real %v", c.u, c.u.Valid(), c.u.real())
		}
		// A unit at Phys 0 without tags followed by a blank, whole or torn with its size's first
		// byte, is a filler, whatever its offset; followed by anything else (a record's unit, or
		// one torn to Phys 0) it is what it is alone.
		phys0 := c.u.Valid() && c.u.Phys == 0 && c.u.TagsCode == 0
		for _, next := range []Unit{Blank, {Phys: 0, Size: 0x7FFF0000}} {
			if c.u.filler(next) != phys0 {
				t.Errorf("%+v before %+v: filler %v", c.u, next, c.u.filler(next))
			}
		}
		for _, next := range []Unit{{}, unitFor(1), {Phys: 0, Size: 0x0000FFFF}, {Phys: 0, Size: 300}, {Phys: 0, Size: 300, TagsCode: 7}} {
			if c.u.filler(next) != c.filler {
				t.Errorf("%+v before %+v: filler %v", c.u, next, c.u.filler(next))
			}
		}
	}
}

func TestScanValid(t *testing.T) {
	var b []byte
	b = AppendUnit(b, Blank)
	b = AppendUnit(b, unitFor(1))
	b = AppendUnit(b, Blank) // cannot happen after a real unit, but the scan only checks validity
	b = AppendUnit(b, unitFor(3))
	b = AppendUnit(b, Unit{})
	b = AppendUnit(b, unitFor(5))
	b = append(b, 1, 2, 3)
	if n, m := ScanValid(b); n != 4 || m != unitFor(3).End() {
		t.Fatalf("ScanValid = %d, %d", n, m)
	}
	if n, m := ScanValid(b[:3*UnitSize+7]); n != 3 || m != unitFor(1).End() {
		t.Fatalf("ScanValid(torn) = %d, %d", n, m)
	}
	if n, m := ScanValid(AppendUnit(nil, Blank)); n != 1 || m != -1 {
		t.Fatalf("ScanValid(blank) = %d, %d", n, m)
	}
}

// TestGolden writes every golden vector's unit through Put at the vector's queue offset and
// finds its bytes at the vector's file and position, with blank units before it.
func TestGolden(t *testing.T) {
	for name, r := range golden.Load().Records() {
		t.Run(name, func(t *testing.T) {
			want := r.CQUnit()
			u := DecodeUnit(want)
			if u != (Unit{Phys: r.PhysOffset, Size: int32(r.TotalSize), TagsCode: r.TagsCode}) {
				t.Fatalf("decoded %+v, vector phys %d size %d tags %d", u, r.PhysOffset, r.TotalSize, r.TagsCode)
			}
			var tags string
			for _, p := range r.ClientProps {
				if p[0] == "TAGS" {
					tags = p[1]
				}
			}
			if tags != "" && javahash.TagsCode(tags) != r.TagsCode {
				t.Fatalf("tagsCode of %q = %d, vector %d", tags, javahash.TagsCode(tags), r.TagsCode)
			}
			if r.CQFileAndPos.Pos != r.QueueOffset*UnitSize {
				t.Fatalf("vector pos %d for queue offset %d", r.CQFileAndPos.Pos, r.QueueOffset)
			}

			root := t.TempDir()
			s := openStore(t, vfs.Default, root, 0) // the default 6,000,000-byte files
			cq := queue(t, s, r.Topic, r.QueueID)
			noErr(t, cq.Put(r.QueueOffset, u))
			noErr(t, s.FlushAll(0))
			noErr(t, s.Close())

			name := filepath.Join(root, "consumequeue", r.Topic, itoa(r.QueueID), r.CQFileAndPos.File)
			data, err := os.ReadFile(name)
			noErr(t, err)
			if len(data) != DefaultUnitsPerFile*UnitSize {
				t.Fatalf("file is %d bytes", len(data))
			}
			pos := r.CQFileAndPos.Pos
			if got := data[pos : pos+UnitSize]; !bytes.Equal(got, want) {
				t.Fatalf("unit at %d = %x, want %x", pos, got, want)
			}
			for p := int64(0); p < pos; p += UnitSize {
				if DecodeUnit(data[p:]) != Blank {
					t.Fatalf("no blank at %d: %x", p, data[p:p+UnitSize])
				}
			}
			if !allZero(data[pos+UnitSize:]) {
				t.Fatal("bytes after the unit")
			}

			s = load(t, vfs.Default, root, 0)
			defer s.Close()
			cq = s.Find(r.Topic, r.QueueID)
			if cq == nil || cq.MaxOffset() != r.QueueOffset+1 || cq.MinOffset() != r.QueueOffset {
				t.Fatalf("after reload: %v", cq)
			}
			if got, err := cq.Unit(r.QueueOffset); err != nil || got != u {
				t.Fatalf("Unit(%d) = %+v, %v", r.QueueOffset, got, err)
			}
			wantPhys := r.PhysOffset + int64(r.TotalSize)
			if r.PhysOffset == 0 {
				wantPhys = -1 // see Unit.real
			}
			if cq.MaxPhysicalOffset() != wantPhys {
				t.Fatalf("max physical offset %d", cq.MaxPhysicalOffset())
			}
		})
	}
}

func itoa(id int32) string { return strconv.Itoa(int(id)) }
