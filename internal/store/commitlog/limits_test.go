package commitlog

import (
	"bytes"
	"errors"
	"net/netip"
	"strings"
	"testing"
)

func baseMessage() Message {
	return Message{
		Topic:     "TopicTest",
		BornHost:  netip.MustParseAddrPort("192.168.0.10:54321"),
		StoreHost: netip.MustParseAddrPort("192.168.0.20:10911"),
		Body:      []byte("hello"),
	}
}

func TestBodyLimit(t *testing.T) {
	m := baseMessage()
	m.Body = make([]byte, DefaultMaxBodySize+1)
	dst := []byte("keep")
	out, err := AppendRecord(dst, &m, EncodeOptions{})
	if !errors.Is(err, ErrBodyTooLarge) {
		t.Fatalf("body of %d bytes: err = %v, want ErrBodyTooLarge", len(m.Body), err)
	}
	if !bytes.Equal(out, dst) {
		t.Fatal("dst changed on error")
	}
	m.Body = m.Body[:DefaultMaxBodySize]
	if _, err := AppendRecord(nil, &m, EncodeOptions{}); err != nil {
		t.Fatalf("body of exactly the limit: %v", err)
	}
	m.Body = make([]byte, 101)
	if _, err := AppendRecord(nil, &m, EncodeOptions{MaxBodySize: 100}); !errors.Is(err, ErrBodyTooLarge) {
		t.Fatalf("MaxBodySize 100: err = %v", err)
	}
}

func TestPropertiesLimit(t *testing.T) {
	m := baseMessage()
	value := strings.Repeat("v", MaxPropertiesLen-len("K\x01\x02"))
	m.Properties = AppendProperty(nil, "K", value) // exactly 32767 bytes
	if _, err := AppendRecord(nil, &m, EncodeOptions{}); err != nil {
		t.Fatalf("properties of exactly the limit: %v", err)
	}
	// The CRC reservation counts towards the limit.
	if _, err := AppendRecord(nil, &m, EncodeOptions{PropCRC: true}); !errors.Is(err, ErrPropertiesTooLarge) {
		t.Fatalf("properties + CRC reservation: err = %v, want ErrPropertiesTooLarge", err)
	}
	m.Properties = AppendProperty(nil, "K", value+"v")
	if _, err := AppendRecord(nil, &m, EncodeOptions{}); !errors.Is(err, ErrPropertiesTooLarge) {
		t.Fatalf("properties of 32768 bytes: err = %v, want ErrPropertiesTooLarge", err)
	}
	// The limit applies after an incoming __CRC32# entry is dropped.
	m.Properties = AppendProperty(AppendProperty(nil, "K", value), PropCRC32, "1")
	if _, err := AppendRecord(nil, &m, EncodeOptions{}); err != nil {
		t.Fatalf("limit + a dropped __CRC32# entry: %v", err)
	}
}

func TestRecordLimitFits(t *testing.T) {
	// With every other limit at its maximum a record stays within maxMessageSize + 64 KiB.
	n := RecordLen(V2, FlagBornHostV6|FlagStoreHostV6, DefaultMaxBodySize, MaxSysTopicLen, MaxPropertiesLen)
	if n > DefaultMaxBodySize+RecordOverhead {
		t.Fatalf("largest valid record is %d bytes", n)
	}
	m := baseMessage()
	m.Body = make([]byte, 1<<20)
	// A MaxBodySize beyond what TOTALSIZE can hold is still bounded by the int32 field.
	if _, err := AppendRecord(nil, &m, EncodeOptions{MaxBodySize: 1 << 40}); err != nil {
		t.Fatal(err)
	}
}

func TestInvalidTopicsRejected(t *testing.T) {
	long := strings.Repeat("a", 128)
	for _, topic := range []string{"", ".", "..", "../x", "a/b", "/abs", `a\b`, "a.b", "a b", "a\x00", "é", long,
		"%RETRY%" + strings.Repeat("a", 249), "%DLQ%" + strings.Repeat("a", 251)} {
		m := baseMessage()
		m.Topic = topic
		if _, err := AppendRecord(nil, &m, EncodeOptions{}); !errors.Is(err, ErrInvalidTopic) {
			t.Errorf("topic %q: err = %v, want ErrInvalidTopic", topic, err)
		}
	}
}

func TestValidateTopic(t *testing.T) {
	for _, topic := range []string{"a", "TopicTest", "%|a-Z_0-9", strings.Repeat("a", 127),
		"%RETRY%" + strings.Repeat("G", 248), "%DLQ%" + strings.Repeat("G", 250), ScheduleTopic} {
		if err := ValidateTopic(topic); err != nil {
			t.Errorf("ValidateTopic(%q) = %v", topic, err)
		}
	}
	for topic, want := range map[string]string{
		"":                                 "empty",
		"a/b":                              `character '/' at byte 1`,
		"..":                               `character '.' at byte 0`,
		strings.Repeat("a", 128):           "128 bytes, longer than the limit of 127",
		"%DLQ%" + strings.Repeat("a", 251): "256 bytes, longer than the limit of 255",
	} {
		err := ValidateTopic(topic)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ValidateTopic(%.20q) = %v, want it to say %q", topic, err, want)
		}
	}
}

func TestVersionChoice(t *testing.T) {
	if VersionForTopic(strings.Repeat("a", 127)) != V1 || VersionForTopic(strings.Repeat("a", 128)) != V2 {
		t.Fatal("V2 starts at 128 chars")
	}
	// Java counts UTF-16 units: 64 surrogate pairs are 128 chars.
	if VersionForTopic(strings.Repeat("😀", 64)) != V2 || VersionForTopic(strings.Repeat("é", 127)) != V1 {
		t.Fatal("topic length must be counted in UTF-16 units")
	}
}

func TestEncodeSysFlagHostBits(t *testing.T) {
	cases := []struct {
		born, store string
		want        int32
	}{
		{"1.2.3.4:1", "1.2.3.4:2", 0},
		{"[::ffff:1.2.3.4]:1", "[::ffff:1.2.3.4]:2", 0},
		{"[2001:db8::1]:1", "1.2.3.4:2", FlagBornHostV6},
		{"1.2.3.4:1", "[2001:db8::1]:2", FlagStoreHostV6},
		{"[::1]:1", "[::]:2", FlagBornHostV6 | FlagStoreHostV6},
	}
	for _, c := range cases {
		m := baseMessage()
		m.SysFlag = FlagBornHostV6 | FlagStoreHostV6 | TxCommit // the client's V6 bits are replaced
		m.BornHost = netip.MustParseAddrPort(c.born)
		m.StoreHost = netip.MustParseAddrPort(c.store)
		rec, err := AppendRecord(nil, &m, EncodeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		v, err := Parse(rec)
		if err != nil {
			t.Fatal(err)
		}
		if got := v.SysFlag(); got != c.want|TxCommit {
			t.Errorf("%s %s: sysflag %#x, want %#x", c.born, c.store, got, c.want|TxCommit)
		}
		if v.BornHost() != storedForm(m.BornHost) || v.StoreHost() != storedForm(m.StoreHost) {
			t.Errorf("hosts %v %v", v.BornHost(), v.StoreHost())
		}
		if len(rec) != RecordLen(V1, c.want, len(m.Body), len(m.Topic), 0) {
			t.Errorf("length %d", len(rec))
		}
	}
	// The zero AddrPort is written as 0.0.0.0:0.
	m := baseMessage()
	m.BornHost = netip.AddrPort{}
	rec, err := AppendRecord(nil, &m, EncodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	v, _ := Parse(rec)
	if v.BornHost() != netip.AddrPortFrom(netip.IPv4Unspecified(), 0) {
		t.Errorf("zero born host decoded as %v", v.BornHost())
	}
}

func TestStampPositions(t *testing.T) {
	for _, born := range []string{"1.2.3.4:5", "[2001:db8::1]:5"} {
		m := baseMessage()
		m.BornHost = netip.MustParseAddrPort(born)
		rec, err := AppendRecord(nil, &m, EncodeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		v, _ := Parse(rec)
		if v.QueueOffset() != 0 || v.PhysicalOffset() != 0 || v.StoreTimestamp() != 0 {
			t.Fatal("encoder must leave the stamped fields zero")
		}
		// Stamping into a larger buffer touches only the record.
		buf := append(bytes.Clone(rec), 0xEE, 0xEE)
		Stamp(buf, -5, 1<<40, 1700000000123, false)
		v, _ = Parse(buf)
		if v.QueueOffset() != -5 || v.PhysicalOffset() != 1<<40 || v.StoreTimestamp() != 1700000000123 {
			t.Fatalf("stamped %d %d %d", v.QueueOffset(), v.PhysicalOffset(), v.StoreTimestamp())
		}
		if buf[len(rec)] != 0xEE || buf[len(rec)+1] != 0xEE {
			t.Fatal("Stamp wrote past the record")
		}
	}
}

func TestAppendRecordReusesDst(t *testing.T) {
	m := baseMessage()
	m.Properties = AppendProperty(nil, PropTags, "TagA")
	first, err := AppendRecord(nil, &m, EncodeOptions{PropCRC: true})
	if err != nil {
		t.Fatal(err)
	}
	// Encoding into dirty capacity must produce the same bytes: every byte is written.
	dirty := bytes.Repeat([]byte{0xFF}, 3*len(first))
	again, err := AppendRecord(dirty[:7], &m, EncodeOptions{PropCRC: true})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again[7:], first) || !bytes.Equal(again[:7], dirty[:7]) {
		t.Fatal("encoding into reused capacity differs")
	}
}
