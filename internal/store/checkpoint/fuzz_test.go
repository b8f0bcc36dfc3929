package checkpoint

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzDecode checks that Decode never panics, fails only with its sentinels, and accepts only
// bytes that Encode reproduces: the RocketMQ fields always, and the extension fields whenever
// it reports one (a longer extension's unknown fields are the one thing Encode drops).
func FuzzDecode(f *testing.F) {
	f.Add(Encode(Checkpoint{PhysicMsgTimestamp: 1700000000123, LogicsMsgTimestamp: 1700000000123}))
	f.Add(Encode(Checkpoint{PhysicMsgTimestamp: 1, Ext: Ext{Valid: true, DurableOffset: 4096, DispatchedOffset: 2048}}))
	f.Add(Encode(Checkpoint{})[:24])
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
		// Magic and version, then the two offsets; the length may differ (see above).
		if c.Ext.Valid && (!bytes.Equal(enc[extOff:extOff+6], page[extOff:extOff+6]) ||
			!bytes.Equal(enc[extOff+8:extOff+24], page[extOff+8:extOff+24])) {
			t.Fatalf("extension does not re-encode:\n got %x\nwant %x", enc[extOff:extOff+24], page[extOff:extOff+24])
		}
		again, err := Decode(enc)
		if err != nil || again != c {
			t.Fatalf("re-decode: %+v, %v; want %+v", again, err, c)
		}
	})
}
