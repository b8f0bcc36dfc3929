package commitlog

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/rocketstore/engine/internal/vfs"
)

func TestNewPropCRCRule(t *testing.T) {
	for _, c := range []struct {
		from, durable int64
		want          PropCRCRule
	}{
		{-1, 1000, PropCRCRule{}},       // not known: nowhere
		{0, 1000, PropCRCRule{0, 1000}}, // the engine's records, up to what it synced
		{500, 500, PropCRCRule{}},       // nothing durable since
		{800, 500, PropCRCRule{}},       // claimed past the durable data: nothing to require
		{0, 0, PropCRCRule{}},           // an empty store
		{100, 1 << 62, PropCRCRule{100, 1 << 62}},
	} {
		r := NewPropCRCRule(c.from, c.durable)
		if r != c.want || r.Empty() != (c.want == PropCRCRule{}) {
			t.Errorf("NewPropCRCRule(%d, %d) = %+v, want %+v", c.from, c.durable, r, c.want)
		}
	}
	r := PropCRCRule{From: 100, To: 200}
	for phys, want := range map[int64]bool{99: false, 100: true, 199: true, 200: false} {
		if r.Requires(phys) != want {
			t.Errorf("[100, 200) requires %d: %v", phys, !want)
		}
	}
}

// rocketMQShapes are records as RocketMQ's broker writes them by default: no __CRC32#, its
// own property orders, IPv6 hosts, a V2 topic, compressed and transactional sysflags, no
// properties at all.
func rocketMQShapes(t testing.TB) [][]byte {
	t.Helper()
	v6 := netip.MustParseAddrPort("[2001:db8::7]:10911")
	props := func(kv ...string) []byte {
		var p []byte
		for i := 0; i < len(kv); i += 2 {
			p = AppendProperty(p, kv[i], kv[i+1])
		}
		return p
	}
	msgs := []Message{
		{Topic: "orders", Properties: props("UNIQ_KEY", "7F0000011234", "CLUSTER", "DefaultCluster", "TAGS", "TagA", "KEYS", "k1 k2", "WAIT", "true")},
		{Topic: "orders", BornHost: v6, Properties: props("KEYS", "k3", "TAGS", "b", "UNIQ_KEY", "7F0000011235")},
		{Topic: "orders", BornHost: v6, StoreHost: v6, Flag: 7, ReconsumeTimes: 3, Properties: props("TAGS", "x||y", "CLUSTER", "c")},
		{Topic: RetryTopicPrefix + strings.Repeat("G", 123), Properties: props("RETRY_TOPIC", "orders")}, // V2
		{Topic: "orders", SysFlag: FlagCompressed | CompressionZLIB, Body: []byte{0x78, 0x9c, 3, 0}, Properties: props("UNIQ_KEY", "c1")},
		{Topic: "orders", SysFlag: TxPrepared, Properties: props("TRAN_MSG", "true", "REAL_TOPIC", "orders", "REAL_QID", "0")},
		{Topic: "orders", SysFlag: TxCommit, PreparedTransactionOffset: 1234, Properties: props("UNIQ_KEY", "c2")},
		{Topic: "orders"}, // no properties, empty body
	}
	var out [][]byte
	var flags int32
	for i := range msgs {
		m := &msgs[i]
		if !m.BornHost.IsValid() {
			m.BornHost = testBorn
		}
		if !m.StoreHost.IsValid() {
			m.StoreHost = testStore
		}
		if m.Body == nil && i != len(msgs)-1 {
			m.Body = []byte(strings.Repeat("rocketmq-", i+1))
		}
		rec, err := AppendRecord(nil, m, EncodeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		v, err := Parse(rec)
		if err != nil || v.HasPropCRC() {
			t.Fatalf("shape %d: %v", i, err)
		}
		if v.Version() == V2 {
			flags |= 1 << 30
		}
		flags |= v.SysFlag()
		out = append(out, rec)
	}
	if want := int32(1<<30) | FlagBornHostV6 | FlagStoreHostV6 | FlagCompressed | TxPrepared | TxCommit; flags&want != want {
		t.Fatalf("shapes cover %#x, want %#x", flags, want)
	}
	return out
}

// TestRecoverRocketMQShapesPastTheRule: the engine's records (with __CRC32#) up to its durable
// offset, then RocketMQ's (without): recovery keeps every one under the rule, says where the
// last record without the property ends, and still cuts a torn record after them exactly.
func TestRecoverRocketMQShapesPastTheRule(t *testing.T) {
	fsys := vfs.NewMem()
	l := openTestLog(t, fsys, "/s/commitlog", 1<<14)
	for seq := range 40 {
		if _, err := l.Append(encodeTest(t, seq, 150, true), int64(seq), 1, true); err != nil {
			t.Fatal(err)
		}
	}
	durable := l.MaxOffset()
	shapes := rocketMQShapes(t)
	var rmqEnd int64
	for round := range 6 { // enough to cross a segment
		for i, rec := range shapes {
			phys, err := l.Append(rec, int64(100+round*len(shapes)+i), 2, false)
			if err != nil {
				t.Fatal(err)
			}
			rmqEnd = phys + int64(len(rec))
		}
	}
	if err := l.Flush(l.MaxOffset()); err != nil {
		t.Fatal(err)
	}
	records := int64(40 + 6*len(shapes))
	if len(l.Queue().Files()) < 2 {
		t.Fatal("RocketMQ's records did not cross a segment")
	}
	// A torn record after them: its first 60 bytes.
	f := l.Queue().Last()
	tear := l.MaxOffset()
	torn := encodeTest(t, 99, 150, false)
	copy(f.Data()[tear-f.Base():], torn[:60])

	res, err := l.Recover(RecoverOptions{PropCRC: NewPropCRCRule(0, durable), Sealed: durable})
	if err != nil {
		t.Fatal(err)
	}
	if res.End != tear || res.Tail != TailCorrupt || res.Records != records || res.NoPropCRCEnd != rmqEnd {
		t.Fatalf("recovered %+v, want the end at the tear %d after %d records, the last without __CRC32# ending at %d",
			res, tear, records, rmqEnd)
	}
}

// TestRecoverRequiresPropCRCInsideTheRule: inside the rule a record without the property is
// one whose property's name was damaged: below the durable offset recovery refuses, above it it
// cuts there.
func TestRecoverRequiresPropCRCInsideTheRule(t *testing.T) {
	build := func(t *testing.T) (*Log, []int64) {
		l := openTestLog(t, vfs.NewMem(), "/s/commitlog", 1<<16)
		var at []int64
		for seq := range 30 {
			phys, err := l.Append(encodeTest(t, seq, 150, true), int64(seq), 1, true)
			if err != nil {
				t.Fatal(err)
			}
			at = append(at, phys)
		}
		// Damage the name of record 10's property: "__CRC32#" becomes "__CRC33#".
		v, _, err := l.Read(at[10])
		if err != nil {
			t.Fatal(err)
		}
		i := len(v.Bytes()) - PropCRCLen + len("__CRC3")
		f := l.Queue().Last()
		f.Data()[at[10]-f.Base()+int64(i)] = '3'
		return l, at
	}
	t.Run("sealed", func(t *testing.T) {
		l, at := build(t)
		end := l.MaxOffset()
		_, err := l.Recover(RecoverOptions{PropCRC: NewPropCRCRule(0, end), Sealed: end})
		if !errors.Is(err, ErrSealedCorrupt) || !strings.Contains(err.Error(), "property missing") {
			t.Fatalf("Recover = %v, want ErrSealedCorrupt for the missing property at %d", err, at[10])
		}
	})
	t.Run("tail", func(t *testing.T) {
		l, at := build(t)
		res, err := l.Recover(RecoverOptions{PropCRC: NewPropCRCRule(0, l.MaxOffset())})
		if err != nil || res.End != at[10] {
			t.Fatalf("Recover = %+v, %v; want the end at %d", res, err, at[10])
		}
		ce, ok := errors.AsType[*CorruptError](res.Corrupt)
		if !ok || ce.Reason != ReasonPropCRCMissing {
			t.Fatalf("corrupt %v", res.Corrupt)
		}
	})
	t.Run("past the rule", func(t *testing.T) {
		// Past the durable offset the record might be another writer's: it is kept on its body
		// CRC, as RocketMQ keeps it.
		l, at := build(t)
		res, err := l.Recover(RecoverOptions{PropCRC: NewPropCRCRule(0, at[10])})
		if err != nil || res.End != l.MaxOffset() || res.Records != 30 || res.NoPropCRCEnd != at[11] {
			t.Fatalf("Recover = %+v, %v", res, err)
		}
	})
}

func TestCheckPlaced(t *testing.T) {
	with, without := encodeTest(t, 1, 50, true), encodeTest(t, 2, 50, false)
	Stamp(with, 0, 1000, 1, true)
	Stamp(without, 0, 2000, 1, false)
	vw, _ := Parse(with)
	vo, _ := Parse(without)
	rule := PropCRCRule{From: 500, To: 3000}
	if err := CheckPlaced(0, 1000, vw, rule); err != nil {
		t.Fatal(err)
	}
	if err := CheckPlaced(7, 1001, vw, rule); !errors.Is(err, ErrCorrupt) || err.(*CorruptError).Reason != ReasonPhysOffset || err.(*CorruptError).Off != 7 {
		t.Fatalf("wrong position: %v", err)
	}
	if err := CheckPlaced(0, 2000, vo, rule); err == nil || err.(*CorruptError).Reason != ReasonPropCRCMissing {
		t.Fatalf("missing inside the rule: %v", err)
	}
	if err := CheckPlaced(0, 2000, vo, PropCRCRule{From: 500, To: 2000}); err != nil {
		t.Fatalf("missing past the rule: %v", err)
	}
}
