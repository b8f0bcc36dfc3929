package checkpoint

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"testing"

	"github.com/rocketstore/engine/internal/golden"
)

func TestGoldenVector(t *testing.T) {
	v := golden.Load().CHECKPOINT
	c := Checkpoint{PhysicMsgTimestamp: 1700000000123, LogicsMsgTimestamp: 1700000000123}
	b := Encode(c)
	if len(b) != v.FileSize || len(b) != Size {
		t.Fatalf("encoded %d bytes, want %d", len(b), v.FileSize)
	}
	if want := golden.Hex(v.First40Hex); !bytes.Equal(b[:40], want) {
		t.Fatalf("first 40 bytes\n got %x\nwant %x", b[:40], want)
	}
	if !allZero(b[40:]) {
		t.Fatal("bytes after the first 40 are not zero without an extension")
	}

	golden40 := golden.Hex(v.First40Hex)
	file := append(golden40, make([]byte, v.FileSize-40)...)
	got, err := Decode(file)
	if err != nil {
		t.Fatal(err)
	}
	if got != c {
		t.Fatalf("decoded %+v, want %+v", got, c)
	}
	if got.MinTimestamp() != 1700000000123-3000 || got.MinTimestampIndex() != 0 {
		t.Fatalf("MinTimestamp %d, MinTimestampIndex %d", got.MinTimestamp(), got.MinTimestampIndex())
	}
}

func TestRoundTripWithExtension(t *testing.T) {
	for _, c := range []Checkpoint{
		{Ext: Ext{Valid: true}},
		{
			PhysicMsgTimestamp: 1700000000123, LogicsMsgTimestamp: 1700000000100, IndexMsgTimestamp: 1699999990000,
			MasterFlushedOffset: 7, ConfirmPhyOffset: 1 << 40,
			Ext: Ext{Valid: true, DurableOffset: 3 << 30, DispatchedOffset: 3<<30 - 226},
		},
		{
			PhysicMsgTimestamp: math.MaxInt64, LogicsMsgTimestamp: math.MinInt64, IndexMsgTimestamp: -1,
			MasterFlushedOffset: math.MinInt64, ConfirmPhyOffset: math.MaxInt64,
			Ext: Ext{Valid: true, DurableOffset: math.MaxInt64, DispatchedOffset: -1},
		},
	} {
		b := Encode(c)
		if len(b) != Size {
			t.Fatalf("encoded %d bytes", len(b))
		}
		if string(b[40:44]) != "RSCK" || !allZero(b[extOff+extLenV2:]) {
			t.Fatalf("extension layout: %x", b[40:80])
		}
		got, err := Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		if got != c {
			t.Fatalf("round trip\n got %+v\nwant %+v", got, c)
		}
	}
}

// TestRocketMQFiles decodes what RocketMQ writes: 4096 bytes with zeros after the first 40,
// and the 24 bytes of older versions; a file longer than a page is read as its first page.
func TestRocketMQFiles(t *testing.T) {
	c := Checkpoint{PhysicMsgTimestamp: 11, LogicsMsgTimestamp: 22, IndexMsgTimestamp: 33, MasterFlushedOffset: 44, ConfirmPhyOffset: 55}
	full := Encode(c)
	for _, tc := range []struct {
		name string
		b    []byte
		want Checkpoint
	}{
		{"page", full, c},
		{"40 bytes", full[:40], c},
		{"24 bytes", full[:24], Checkpoint{PhysicMsgTimestamp: 11, LogicsMsgTimestamp: 22, IndexMsgTimestamp: 33}},
		{"longer than a page", append(bytes.Clone(full), 1, 2, 3), c},
	} {
		got, err := Decode(tc.b)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got != tc.want || got.Ext.Valid {
			t.Fatalf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
	for _, n := range []int{0, 1, 23} {
		if _, err := Decode(full[:n]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%d bytes: %v, want ErrCorrupt", n, err)
		}
	}
}

func TestMinTimestamp(t *testing.T) {
	for _, tc := range []struct {
		physic, logics, index int64
		min, minIndex         int64
	}{
		{10_000, 20_000, 50_000, 7_000, 7_000},
		{20_000, 10_000, 5_000, 7_000, 5_000},
		{2_999, 10_000, 50_000, 0, 0},
		{3_000, 3_000, 50_000, 0, 0},
		{0, 0, 0, 0, 0},
		{-5, 10, 100, 0, 0},
		// Java's long wraps: min(..) - 3000 of MinInt64 is a large positive number.
		{math.MinInt64, 0, math.MaxInt64, math.MaxInt64 - 2999, math.MaxInt64 - 2999},
	} {
		c := Checkpoint{PhysicMsgTimestamp: tc.physic, LogicsMsgTimestamp: tc.logics, IndexMsgTimestamp: tc.index}
		if got := c.MinTimestamp(); got != tc.min {
			t.Errorf("%+v: MinTimestamp %d, want %d", tc, got, tc.min)
		}
		if got := c.MinTimestampIndex(); got != tc.minIndex {
			t.Errorf("%+v: MinTimestampIndex %d, want %d", tc, got, tc.minIndex)
		}
	}
}

// TestEveryByteCorruptionDetected changes each byte of the extension (its CRC included) to
// every other value: each change must be reported as ErrCorrupt, never decode silently, and never
// pass for a file without an extension. A change to RocketMQ's 40 bytes is what RocketMQ does
// when it runs on the store: the extension still decodes, marked Rewritten, with RocketMQ's new
// fields.
func TestEveryByteCorruptionDetected(t *testing.T) {
	want := Checkpoint{
		PhysicMsgTimestamp: 1700000000123, LogicsMsgTimestamp: 1700000000123, IndexMsgTimestamp: 1700000000000,
		ConfirmPhyOffset: 4096, Ext: Ext{Valid: true, DurableOffset: 8192, DispatchedOffset: 4096, PropCRCFrom: 0},
	}
	good := Encode(want)
	b := bytes.Clone(good)
	for i := range extOff + extLenV2 {
		for x := 1; x < 256; x++ {
			b[i] = good[i] ^ byte(x)
			c, err := Decode(b)
			if i < rocketMQLen {
				if err != nil || !c.Ext.Valid || !c.Ext.Rewritten || c.Ext.DurableOffset != 8192 ||
					c.Ext.DispatchedOffset != 4096 || c.Ext.PropCRCFrom != 0 {
					t.Fatalf("RocketMQ byte %d xor %#02x: %+v, %v; want the extension intact and Rewritten", i, x, c, err)
				}
				if c.PhysicMsgTimestamp == want.PhysicMsgTimestamp && c.LogicsMsgTimestamp == want.LogicsMsgTimestamp &&
					c.IndexMsgTimestamp == want.IndexMsgTimestamp && c.MasterFlushedOffset == want.MasterFlushedOffset &&
					c.ConfirmPhyOffset == want.ConfirmPhyOffset {
					t.Fatalf("RocketMQ byte %d xor %#02x: the change is not in the decoded fields", i, x)
				}
				continue
			}
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("byte %d xor %#02x: err %v (decoded %+v), want ErrCorrupt", i, x, err, c)
			}
			if c.Ext != (Ext{}) {
				t.Fatalf("byte %d xor %#02x: extension %+v returned with an error", i, x, c.Ext)
			}
			if c.PhysicMsgTimestamp != want.PhysicMsgTimestamp || c.ConfirmPhyOffset != want.ConfirmPhyOffset {
				t.Fatalf("byte %d xor %#02x: RocketMQ's fields lost with the extension: %+v", i, x, c)
			}
		}
		b[i] = good[i]
	}
	// The same for an extension-less (RocketMQ) file: the bytes where the extension would be
	// must stay zero. RocketMQ's own 40 bytes have no CRC to protect them.
	rmq := Encode(Checkpoint{PhysicMsgTimestamp: 1, LogicsMsgTimestamp: 2})
	for i := extOff; i < extOff+extLenV2; i++ {
		rmq[i] = 0x5a
		if _, err := Decode(rmq); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("RocketMQ file with byte %d set: %v, want ErrCorrupt", i, err)
		}
		rmq[i] = 0
	}
}

// TestTruncatedFile cuts a file with an extension at every length. Past the extension it
// decodes whole; with part of the extension it is ErrCorrupt; with none of it (24 to 40 bytes)
// it is a RocketMQ file, indistinguishable from one an old broker wrote, and decodes without an
// extension, so that the caller falls back to RocketMQ's timestamp-based recovery. It never
// yields an extension it did not fully read.
func TestTruncatedFile(t *testing.T) {
	c := Checkpoint{PhysicMsgTimestamp: 5, LogicsMsgTimestamp: 6, Ext: Ext{Valid: true, DurableOffset: 100, DispatchedOffset: 90}}
	b := Encode(c)
	for n := range Size + 1 {
		got, err := Decode(b[:n])
		switch {
		case n >= extOff+extLenV2:
			if err != nil || got != c {
				t.Fatalf("%d bytes: %+v, %v", n, got, err)
			}
		case n >= rocketMQMinLen && n <= extOff:
			if err != nil || got.Ext.Valid || got.PhysicMsgTimestamp != 5 || got.LogicsMsgTimestamp != 6 {
				t.Fatalf("%d bytes: %+v, %v", n, got, err)
			}
		case !errors.Is(err, ErrCorrupt):
			t.Fatalf("%d bytes: %v, want ErrCorrupt", n, err)
		}
	}
}

// TestBytesPastTheExtensionIgnored documents that the CRC stops at the extension: bytes after
// it belong to nobody yet and do not make the checkpoint corrupt.
func TestBytesPastTheExtensionIgnored(t *testing.T) {
	c := Checkpoint{PhysicMsgTimestamp: 5, Ext: Ext{Valid: true, DurableOffset: 1}}
	b := Encode(c)
	for _, i := range []int{extOff + extLenV2, 1000, Size - 1} {
		b[i] = 0xff
	}
	if got, err := Decode(b); err != nil || got != c {
		t.Fatalf("%+v, %v", got, err)
	}
}

// TestLongerExtensionAndOtherVersions checks the two ways a later format can differ: a longer
// extension of the same version is read (its new fields skipped), another version is refused
// with ErrVersion, not ErrCorrupt.
func TestLongerExtensionAndOtherVersions(t *testing.T) {
	c := Checkpoint{PhysicMsgTimestamp: 5, Ext: Ext{Valid: true, DurableOffset: 100, DispatchedOffset: 90, PropCRCFrom: 7}}
	withLayout := func(version, length uint16) []byte {
		b := Encode(c)
		clear(b[extOff+extLenV2-4:])
		binary.BigEndian.PutUint16(b[extOff+4:], version)
		binary.BigEndian.PutUint16(b[extOff+6:], length)
		for i := extOff + extLenV2 - 4; i < extOff+int(length)-4; i++ {
			b[i] = byte(i) // fields this version does not know
		}
		crcOff := extOff + int(length) - 4
		binary.BigEndian.PutUint32(b[crcOff:], crc32.Checksum(b[extOff:crcOff], crc32.MakeTable(crc32.Castagnoli)))
		return b
	}
	if got, err := Decode(withLayout(extVersion, 64)); err != nil || got != c {
		t.Fatalf("longer extension: %+v, %v", got, err)
	}
	if got, err := Decode(withLayout(extVersion, extMaxLen)); err != nil || got != c {
		t.Fatalf("longest extension: %+v, %v", got, err)
	}
	for _, v := range []uint16{0, 3, 0xffff} {
		got, err := Decode(withLayout(v, extLenV2))
		if !errors.Is(err, ErrVersion) || errors.Is(err, ErrCorrupt) {
			t.Fatalf("version %d: %v, want ErrVersion", v, err)
		}
		if got.Ext.Valid || got.PhysicMsgTimestamp != 5 {
			t.Fatalf("version %d: %+v", v, got)
		}
	}
	for _, n := range []uint16{0, extLenV2 - 1, extMaxLen + 1, 0xffff} {
		b := Encode(c)
		binary.BigEndian.PutUint16(b[extOff+6:], n)
		if _, err := Decode(b); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("length %d: %v, want ErrCorrupt", n, err)
		}
	}
}

func allZero(b []byte) bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}
