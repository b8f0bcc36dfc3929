package checkpoint

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"os"
	"testing"
)

// encodeV1 writes c as the engines before version 2 did: the CRC over RocketMQ's bytes and the
// extension, 36 bytes long (28 without propCRCFrom, the first layout).
func encodeV1(c Checkpoint, withPropCRC bool) []byte {
	b := Encode(Checkpoint{
		PhysicMsgTimestamp: c.PhysicMsgTimestamp, LogicsMsgTimestamp: c.LogicsMsgTimestamp,
		IndexMsgTimestamp: c.IndexMsgTimestamp, MasterFlushedOffset: c.MasterFlushedOffset, ConfirmPhyOffset: c.ConfirmPhyOffset,
	})
	be := binary.BigEndian
	n := extLenV1
	if withPropCRC {
		n = extLenV1b
	}
	copy(b[extOff:], extMagic[:])
	be.PutUint16(b[extOff+4:], extVersion1)
	be.PutUint16(b[extOff+6:], uint16(n))
	be.PutUint64(b[extOff+8:], uint64(c.Ext.DurableOffset))
	be.PutUint64(b[extOff+16:], uint64(c.Ext.DispatchedOffset))
	if withPropCRC {
		be.PutUint64(b[extOff+24:], uint64(c.Ext.PropCRCFrom))
	}
	crcOff := extOff + n - 4
	be.PutUint32(b[crcOff:], crc32.Checksum(b[:crcOff], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// TestVersion1StillReads: a checkpoint an older engine wrote loads with its offsets, both
// layouts; after RocketMQ changed only its confirm or HA offset (which those engines wrote as
// zeros) it still loads, as Rewritten; after any other change it cannot be checked and is
// ignored (Stale, no offsets) with RocketMQ's fields kept, never returned as if intact.
func TestVersion1StillReads(t *testing.T) {
	c := Checkpoint{
		PhysicMsgTimestamp: 1700000000123, LogicsMsgTimestamp: 1700000000123, IndexMsgTimestamp: 1700000000000,
		Ext: Ext{Valid: true, DurableOffset: 1 << 20, DispatchedOffset: 1<<20 - 300, PropCRCFrom: 4096},
	}
	for _, withPropCRC := range []bool{false, true} {
		want := c
		if !withPropCRC {
			want.Ext.PropCRCFrom = -1
		}
		good := encodeV1(c, withPropCRC)
		if got, err := Decode(good); err != nil || got != want {
			t.Fatalf("propCRC %v: %+v, %v; want %+v", withPropCRC, got, err, want)
		}
		for i := range Size {
			for _, x := range []byte{1, 0x80, 0xff} {
				b := bytes.Clone(good)
				b[i] ^= x
				got, err := Decode(b)
				n := extLenV1
				if withPropCRC {
					n = extLenV1b
				}
				switch {
				case i >= extOff+n:
					if err != nil || got != want {
						t.Fatalf("byte %d past the extension: %+v, %v", i, got, err)
					}
				case i >= v1ZeroFrom && i < v1ZeroTo:
					w := want
					w.Ext.Rewritten = true
					w.MasterFlushedOffset, w.ConfirmPhyOffset = got.MasterFlushedOffset, got.ConfirmPhyOffset
					if err != nil || got != w || (got.MasterFlushedOffset == 0 && got.ConfirmPhyOffset == 0) {
						t.Fatalf("byte %d (RocketMQ's offsets) xor %#02x: %+v, %v; want %+v", i, x, got, err, w)
					}
				case err != nil:
					// The magic, version or length changed: corrupt or unknown, never an extension.
					if got.Ext != (Ext{}) {
						t.Fatalf("byte %d xor %#02x: %+v with %v", i, x, got.Ext, err)
					}
				default:
					if got.Ext != (Ext{Stale: true}) {
						t.Fatalf("byte %d xor %#02x: %+v; want a stale extension, ignored", i, x, got.Ext)
					}
					if i >= rocketMQLen && (got.PhysicMsgTimestamp != c.PhysicMsgTimestamp || got.IndexMsgTimestamp != c.IndexMsgTimestamp) {
						t.Fatalf("byte %d xor %#02x: RocketMQ's fields lost: %+v", i, x, got)
					}
				}
			}
		}
	}
}

// TestRocketMQFixtures decodes the two checkpoints of the RocketMQ fixtures (internal/rmqfixture; copied
// into testdata): the one the engine wrote, and the same file after RocketMQ 5.3.3 opened the
// store and shut down, which set confirmPhyOffset and kept the extension's bytes. Both load with
// the engine's offsets; only the second is Rewritten, with RocketMQ's confirm offset.
func TestRocketMQFixtures(t *testing.T) {
	const end, lastRecord = 29429172, 29428371
	const ts = 1796156530133
	engine := Checkpoint{
		PhysicMsgTimestamp: ts, LogicsMsgTimestamp: ts, IndexMsgTimestamp: ts,
		Ext: Ext{Valid: true, DurableOffset: end, DispatchedOffset: end, PropCRCFrom: 0},
	}
	rocketmq := engine
	rocketmq.ConfirmPhyOffset = lastRecord
	rocketmq.Ext.Rewritten = true
	for name, want := range map[string]Checkpoint{"engine-written": engine, "after-rocketmq": rocketmq} {
		b, err := os.ReadFile("testdata/rocketmq-5.3.3/" + name)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := Decode(b); err != nil || got != want {
			t.Fatalf("%s: %+v, %v; want %+v", name, got, err, want)
		}
	}
}

// TestRocketMQRewritesCurrentVersion applies what RocketMQ did to the fixture (its 40 bytes
// replaced, every other byte kept) to checkpoints of this version, with every RocketMQ field
// changed: the extension reads intact, marked Rewritten, and RocketMQ's fields are RocketMQ's.
// The engine's next checkpoint is no longer Rewritten.
func TestRocketMQRewritesCurrentVersion(t *testing.T) {
	mine := Checkpoint{
		PhysicMsgTimestamp: 1796156530000, LogicsMsgTimestamp: 1796156530000, IndexMsgTimestamp: 1796156500000,
		Ext: Ext{Valid: true, DurableOffset: 29429172, DispatchedOffset: 29429000, PropCRCFrom: 0},
	}
	theirs := Checkpoint{
		PhysicMsgTimestamp: 1796156590000, LogicsMsgTimestamp: 1796156589000, IndexMsgTimestamp: 1796156580000,
		MasterFlushedOffset: 12, ConfirmPhyOffset: 31000000,
	}
	b := Encode(mine)
	copy(b[:rocketMQLen], Encode(theirs)[:rocketMQLen])
	got, err := Decode(b)
	want := theirs
	want.Ext = mine.Ext
	want.Ext.Rewritten = true
	if err != nil || got != want {
		t.Fatalf("%+v, %v; want %+v", got, err, want)
	}
	got.Ext.Rewritten = false
	if again, err := Decode(Encode(got)); err != nil || again != got {
		t.Fatalf("re-encoded: %+v, %v; want %+v", again, err, got)
	}
}
