package checkpoint

import (
	"bytes"
	"errors"
	"os"
	"testing"
)

// FuzzDecode checks that Decode never panics, fails only with its sentinels, and accepts only
// bytes that Encode reproduces: the RocketMQ fields always, and the extension fields whenever
// it reports one (what Encode drops: a longer extension's unknown fields, an older version's
// layout, and the marks Rewritten and Stale, which say how the file was found).
func FuzzDecode(f *testing.F) {
	f.Add(Encode(Checkpoint{PhysicMsgTimestamp: 1700000000123, LogicsMsgTimestamp: 1700000000123}))
	f.Add(Encode(Checkpoint{PhysicMsgTimestamp: 1, Ext: Ext{Valid: true, DurableOffset: 4096, DispatchedOffset: 2048}}))
	f.Add(Encode(Checkpoint{})[:24])
	for _, name := range []string{"engine-written", "after-rocketmq"} {
		b, err := os.ReadFile("testdata/rocketmq-5.3.3/" + name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := Decode(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrVersion) {
				t.Fatalf("error without a sentinel: %v", err)
			}
			if c.Ext != (Ext{}) {
				t.Fatalf("extension %+v returned with an error", c.Ext)
			}
			return
		}
		enc := Encode(c)
		var page [Size]byte
		copy(page[:], b)
		if !bytes.Equal(enc[:rocketMQLen], page[:rocketMQLen]) {
			t.Fatalf("RocketMQ fields do not re-encode:\n got %x\nwant %x", enc[:rocketMQLen], page[:rocketMQLen])
		}
		if c.Ext.Valid && c.Ext.Stale {
			t.Fatalf("extension both valid and stale: %+v", c.Ext)
		}
		// Magic and the two offsets sit where they sat in every version; the version, length
		// and CRCs may differ (an older version, a longer extension).
		if c.Ext.Valid && (!bytes.Equal(enc[extOff:extOff+4], page[extOff:extOff+4]) ||
			!bytes.Equal(enc[extOff+8:extOff+24], page[extOff+8:extOff+24])) {
			t.Fatalf("extension does not re-encode:\n got %x\nwant %x", enc[extOff:extOff+24], page[extOff:extOff+24])
		}
		// Encoding writes what the engine would write: its own header CRC, so no longer
		// Rewritten, and nothing for a stale extension.
		want := c
		want.Ext.Rewritten = false
		if want.Ext.Stale {
			want.Ext = Ext{}
		}
		again, err := Decode(enc)
		if err != nil || again != want {
			t.Fatalf("re-decode: %+v, %v; want %+v", again, err, want)
		}
	})
}

// FuzzDecodeFile checks that DecodeFile never panics, fails only with Decode's sentinels, and
// answers Decode's answer or a whole extension: Decode's own (the first half is the checkpoint),
// or the one the backup slot holds, with RocketMQ's fields either those the slot says the engine
// wrote or marked Rewritten. The page is built from its two parts that matter, the first bytes
// (up to the extension's end and a little more) and the slot, so that the fuzzer works on them
// rather than on 4 KiB of zeros; its seeds are the pages of a save in place: before, between its
// two writes, after, and torn.
func FuzzDecodeFile(f *testing.F) {
	const headLen, slotLen = primaryLen + 8, backupEnd - backupOff + 8
	add := func(p []byte) { f.Add(p[:headLen], p[backupOff:backupOff+slotLen]) }
	page := func(c, prev Checkpoint) []byte {
		b := Encode(c)
		encodeBackup(b, Encode(prev))
		return b
	}
	a := Checkpoint{PhysicMsgTimestamp: 7, LogicsMsgTimestamp: 6, Ext: Ext{Valid: true, DurableOffset: 4096, DispatchedOffset: 2048}}
	b := Checkpoint{PhysicMsgTimestamp: 9, LogicsMsgTimestamp: 8, Ext: Ext{Valid: true, DurableOffset: 8192, DispatchedOffset: 8000, PropCRCFrom: 1}}
	whole := page(b, a)
	between := bytes.Clone(Encode(a))
	copy(between[backupOff:], whole[backupOff:])
	torn := bytes.Clone(whole)
	copy(torn[:20], Encode(a)[:20])
	for _, p := range [][]byte{whole, between, torn, page(a, a), Encode(b)} {
		add(p)
	}
	f.Fuzz(func(t *testing.T, head, slot []byte) {
		data := make([]byte, Size)
		copy(data[:headLen], head)
		copy(data[backupOff:backupOff+slotLen], slot)
		c, err := DecodeFile(data)
		d, derr := Decode(data)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrVersion) {
				t.Fatalf("error without a sentinel: %v", err)
			}
			if c != d || derr == nil {
				t.Fatalf("DecodeFile failed with %v where Decode gave %+v, %v", err, d, derr)
			}
			return
		}
		if c == d && derr == nil {
			return // the first half is the checkpoint
		}
		bk, ok := decodeBackup((*[Size]byte)(data))
		if !ok || !c.Ext.Valid {
			t.Fatalf("%+v (Decode: %+v, %v) without an intact slot", c, d, derr)
		}
		var np [Size]byte
		copy(np[:], bk.next[:])
		next, err := Decode(np[:])
		if err != nil {
			t.Fatalf("slot's checkpoint does not decode: %v", err)
		}
		if c.Ext.Rewritten {
			ext := c.Ext
			ext.Rewritten = false
			if ext != next.Ext || !bytes.Equal(Encode(c)[:rocketMQLen], data[:rocketMQLen]) {
				t.Fatalf("Rewritten %+v is not the slot's extension %+v with the page's fields", c, next.Ext)
			}
			return
		}
		if c != next {
			t.Fatalf("%+v, want the slot's %+v", c, next)
		}
	})
}
