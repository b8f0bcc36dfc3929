package commitlog

import (
	"errors"
	"math"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/rocketstore/engine/internal/vfs"
)

func TestNewPropCRCRule(t *testing.T) {
	const end = math.MaxInt64
	for _, c := range []struct {
		from, durable int64
		want          PropCRCRule
	}{
		{-1, 1000, PropCRCRule{Own: true, OwnFrom: 1000}},                // not known: nowhere, but past durable only the engine wrote
		{0, 1000, PropCRCRule{0, end, true, 1000}},                       // the engine's records, to the end of the log
		{500, 500, PropCRCRule{500, end, true, 500}},                     // nothing durable since: still the engine's
		{800, 500, PropCRCRule{800, end, true, 500}},                     // claimed past the durable data
		{0, 0, PropCRCRule{0, end, true, 0}},                             // an empty store
		{100, 1 << 62, PropCRCRule{100, end, true, 1 << 62}},             // a long log
		{-1, -5, PropCRCRule{Own: true}},                                 // a damaged durable offset
		{100, math.MaxInt64, PropCRCRule{100, end, true, math.MaxInt64}}, // nothing past durable
	} {
		if r := NewPropCRCRule(c.from, c.durable); r != c.want {
			t.Errorf("NewPropCRCRule(%d, %d) = %+v, want %+v", c.from, c.durable, r, c.want)
		}
	}
	if !(PropCRCRule{}).Empty() || (PropCRCRule{}).RequiresWellFormed(0) {
		t.Error("the zero rule requires something")
	}
	r := PropCRCRule{From: 100, To: 200, Own: true, OwnFrom: 150}
	for phys, want := range map[int64]bool{99: false, 100: true, 199: true, 200: false} {
		if r.Requires(phys) != want {
			t.Errorf("[100, 200) requires %d: %v", phys, !want)
		}
	}
	for phys, want := range map[int64]bool{149: false, 150: true, 1 << 40: true} {
		if r.RequiresWellFormed(phys) != want {
			t.Errorf("well-formed from 150 at %d: %v", phys, !want)
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
// offset, then RocketMQ's (without). Once RocketMQ has run on the store (its checkpoint
// rewritten: the zero rule) recovery keeps every one, says where the last record without the
// property ends, and still cuts a torn record after them exactly. While the checkpoint says the
// engine wrote last, only the engine can have written past its durable offset, and a record
// there without the property is taken for one torn before it.
func TestRecoverRocketMQShapesPastTheRule(t *testing.T) {
	build := func(t *testing.T) (l *Log, durable, rmqEnd, tear, records int64) {
		l = openTestLog(t, vfs.NewMem(), "/s/commitlog", 1<<14)
		for seq := range 40 {
			if _, err := l.Append(encodeTest(t, seq, 150, true), int64(seq), 1, true); err != nil {
				t.Fatal(err)
			}
		}
		durable = l.MaxOffset()
		shapes := rocketMQShapes(t)
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
		if len(l.Queue().Files()) < 2 {
			t.Fatal("RocketMQ's records did not cross a segment")
		}
		// A torn record after them: its first 60 bytes.
		f := l.Queue().Last()
		tear = l.MaxOffset()
		torn := encodeTest(t, 99, 150, false)
		copy(f.Data()[tear-f.Base():], torn[:60])
		return l, durable, rmqEnd, tear, int64(40 + 6*len(shapes))
	}
	t.Run("RocketMQ ran", func(t *testing.T) {
		l, durable, rmqEnd, tear, records := build(t)
		res, err := l.Recover(RecoverOptions{PropCRC: PropCRCRule{}, Sealed: durable})
		if err != nil {
			t.Fatal(err)
		}
		if res.End != tear || res.Tail != TailCorrupt || res.Records != records || res.NoPropCRCEnd != rmqEnd {
			t.Fatalf("recovered %+v, want the end at the tear %d after %d records, the last without __CRC32# ending at %d",
				res, tear, records, rmqEnd)
		}
	})
	t.Run("the engine wrote last", func(t *testing.T) {
		l, durable, _, _, _ := build(t)
		res, err := l.Recover(RecoverOptions{PropCRC: NewPropCRCRule(0, durable), Sealed: durable})
		if err != nil {
			t.Fatal(err)
		}
		ce, ok := errors.AsType[*CorruptError](res.Corrupt)
		if res.End != durable || res.Records != 40 || !ok || ce.Reason != ReasonPropCRCMissing {
			t.Fatalf("recovered %+v, want the end at the durable offset %d, where the property is missing", res, durable)
		}
	})
}

// TestRecoverCutsRecordTornInItsProperties: a record past the durable offset whose first page
// reached the disk and whose second did not, so that its properties stop after an entry and
// zeros follow; its body (in the first page) passes its CRC. While the engine wrote last,
// recovery cuts it, for the missing __CRC32# when the engine writes it and for the malformed
// properties when it does not (NoPropCRC: the rule has no CRC range); once RocketMQ ran it is
// RocketMQ's to read, and kept on its body CRC as RocketMQ keeps it.
func TestRecoverCutsRecordTornInItsProperties(t *testing.T) {
	for _, c := range []struct {
		name    string
		propCRC bool
		rule    func(durable int64) PropCRCRule
		cut     Reason
	}{
		{"engine", true, func(d int64) PropCRCRule { return NewPropCRCRule(0, d) }, ReasonPropCRCMissing},
		{"engine without __CRC32#", false, func(d int64) PropCRCRule { return NewPropCRCRule(-1, d) }, ReasonPropsMalformed},
		{"RocketMQ ran", true, func(int64) PropCRCRule { return PropCRCRule{} }, ReasonNone},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := openTestLog(t, vfs.NewMem(), "/s/commitlog", 1<<16)
			for seq := range 5 {
				if _, err := l.Append(encodeTest(t, seq, 150, c.propCRC), int64(seq), 1, c.propCRC); err != nil {
					t.Fatal(err)
				}
			}
			durable := l.MaxOffset()
			m := &Message{Topic: "orders", BornHost: testBorn, StoreHost: testStore, Body: []byte("body"),
				Properties: AppendProperty(AppendProperty(nil, "NATS_SUBJ", "orders.eu"), PropUniqKey, "K1")}
			rec, err := AppendRecord(nil, m, EncodeOptions{PropCRC: c.propCRC})
			if err != nil {
				t.Fatal(err)
			}
			phys, err := l.Append(rec, 5, 1, c.propCRC)
			if err != nil {
				t.Fatal(err)
			}
			v, release, err := l.Read(phys)
			if err != nil {
				t.Fatal(err)
			}
			// The page boundary falls right after "NATS_SUBJ": the rest of the record is zeros.
			keep := len(v.Bytes()) - len(v.Properties()) + len("NATS_SUBJ")
			release()
			f := l.Queue().Last()
			clear(f.Data()[phys-f.Base()+int64(keep) : phys-f.Base()+int64(len(rec))])
			if _, _, err := CheckRecord(f.Data()[phys-f.Base():], Check{}); err != nil {
				t.Fatalf("the torn record fails its own checks, so this tests nothing: %v", err)
			}
			res, err := l.Recover(RecoverOptions{PropCRC: c.rule(durable), Sealed: durable})
			if err != nil {
				t.Fatal(err)
			}
			if c.cut == ReasonNone {
				if res.End != phys+int64(len(rec)) || res.Records != 6 {
					t.Fatalf("recovered %+v, want the record kept", res)
				}
				return
			}
			ce, ok := errors.AsType[*CorruptError](res.Corrupt)
			if res.End != phys || res.Records != 5 || !ok || ce.Reason != c.cut {
				t.Fatalf("recovered %+v, want the end at the torn record %d for %v", res, phys, c.cut)
			}
		})
	}
}

func TestPropertiesWellFormed(t *testing.T) {
	for p, want := range map[string]bool{
		"":                            true,
		"A\x01b\x02":                  true,
		"A\x01b\x02C\x01dd\x02":       true,
		"__CRC32#\x010123456789\x02":  true,
		"A\x01b":                      false, // no 0x02 at the end
		"A\x01b\x02\x00\x00":          false, // zeros after an entry
		"A\x01b\x02NATS_SUBJ\x00\x00": false, // cut inside a name
		"A\x01\x02":                   false, // empty value
		"\x01b\x02":                   false, // empty name
		"A\x02":                       false, // no 0x01
		"\x02":                        false,
		"A\x01b\x01c\x02":             true, // the value is everything after the first 0x01
	} {
		if got := Properties(p).WellFormed(); got != want {
			t.Errorf("WellFormed(%q) = %v", p, got)
		}
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
	t.Run("after RocketMQ ran", func(t *testing.T) {
		// Once RocketMQ has run on the store, records without the property are RocketMQ's to
		// write: the record is kept on its body CRC, as RocketMQ keeps it.
		l, at := build(t)
		res, err := l.Recover(RecoverOptions{PropCRC: PropCRCRule{}})
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
	// Well-formed properties where only the engine wrote: the record without the entry passes,
	// the same record with its last 0x02 turned to zero does not, and does outside that range.
	own := PropCRCRule{Own: true, OwnFrom: 2000}
	if err := CheckPlaced(0, 2000, vo, own); err != nil {
		t.Fatalf("well formed: %v", err)
	}
	torn := slices.Clone(without)
	torn[len(torn)-1] = 0
	vt, _ := Parse(torn)
	if err := CheckPlaced(0, 2000, vt, own); err == nil || err.(*CorruptError).Reason != ReasonPropsMalformed {
		t.Fatalf("torn in the engine's range: %v", err)
	}
	if err := CheckPlaced(0, 2000, vt, PropCRCRule{Own: true, OwnFrom: 2001}); err != nil {
		t.Fatalf("torn below the engine's range: %v", err)
	}
}
