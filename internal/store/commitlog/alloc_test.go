package commitlog

import (
	"net/netip"
	"testing"
	"time"

	"github.com/rocketstore/engine/internal/golden"
)

// TestHotPathsDoNotAllocate pins the zero-allocation promises of the doc comments.
func TestHotPathsDoNotAllocate(t *testing.T) {
	if testing.Short() {
		t.Skip()
	}
	m := goldenMessage(t, golden.Load().TV1)
	m.Properties = append(m.Properties, "__CRC32#\x011\x02"...) // exercise the strip path too
	dst := make([]byte, 0, 1024)
	seg := make([]byte, 4096)
	tv4 := golden.Load().TV4.Bytes()
	v, err := Parse(tv4)
	if err != nil {
		t.Fatal(err)
	}
	g := NewUniqKeyGen(netip.MustParseAddr("10.0.0.1"), 1, 2, func() time.Time { return time.Unix(1700000000, 0) })
	host := netip.MustParseAddrPort("[2001:db8::1]:10911")
	checks := map[string]func(){
		"AppendRecord": func() {
			rec, err := AppendRecord(dst[:0], &m, EncodeOptions{PropCRC: true})
			if err != nil {
				t.Fatal(err)
			}
			Stamp(rec, 1, 2, 3, true)
		},
		"Stamp":       func() { n := copy(seg, tv4); Stamp(seg[:n], 1, 2, 3, true) },
		"Scan":        func() { _, _, _ = Scan(tv4, 0, Check{RequirePropCRC: true}, func(int, View) error { return nil }) },
		"CheckRecord": func() { _, _, _ = CheckRecord(seg, Check{}) },
		"Get":         func() { _, _ = v.Properties().Get(PropWait) },
		"All": func() {
			for range v.Properties().All() {
			}
		},
		"DispatchProps": func() { _ = v.Properties().DispatchProps() },
		"Keys": func() {
			it := v.Keys()
			for _, ok := it.Next(); ok; _, ok = it.Next() {
			}
		},
		"OffsetMsgID":   func() { _ = AppendOffsetMsgID(dst[:0], host, 42) },
		"ViewMsgID":     func() { _ = v.AppendOffsetMsgID(dst[:0]) },
		"UniqKey":       func() { _ = g.Append(dst[:0]) },
		"Hosts":         func() { _, _ = v.BornHost(), v.StoreHost() },
		"ValidateTopic": func() { _ = ValidateTopic("TopicTest") },
	}
	for name, f := range checks {
		if n := testing.AllocsPerRun(50, f); n != 0 {
			t.Errorf("%s: %v allocs per run, want 0", name, n)
		}
	}
}
