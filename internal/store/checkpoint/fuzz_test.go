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
