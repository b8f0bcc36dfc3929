package commitlog

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"net/netip"
	"strconv"
	"strings"
	"testing"
)

// templateCase is a message whose properties are prefix + digits + suffix.
type templateCase struct {
	topic          string
	v6             bool
	propCRC        bool
	prefix, suffix string
	maxBody        int
	// trusted cases must make a template (the others may be refused by Reset).
	trusted bool
}

func (c templateCase) message(queueID int32, body []byte, digits string) Message {
	m := baseMessage()
	m.Topic, m.QueueID, m.Body, m.BornTimestamp = c.topic, queueID, body, 1_700_000_000_000
	m.Flag, m.ReconsumeTimes = 7, 2
	if c.v6 {
		m.StoreHost = netip.MustParseAddrPort("[2001:db8::1]:10911")
	}
	m.Properties = []byte(c.prefix + digits + c.suffix)
	return m
}

// checkTemplate makes a template of the record with digits0 and body0 and checks that it encodes
// the record with digits and body exactly as AppendRecord does, errors included.
func checkTemplate(t *testing.T, c templateCase, body0 []byte, digits0 string, queueID int32, body []byte, digits string) {
	t.Helper()
	opt := EncodeOptions{PropCRC: c.propCRC, MaxBodySize: c.maxBody}
	m0 := c.message(3, body0, digits0)
	rec0, err := AppendRecord(nil, &m0, opt)
	if err != nil {
		t.Skipf("the template record itself is refused: %v", err)
	}
	var tmpl RecordTemplate
	if err := tmpl.Reset(rec0, m0.Properties, len(c.prefix), len(digits0), opt); err != nil {
		if c.trusted {
			t.Fatalf("Reset: %v", err)
		}
		return // refused: the caller encodes every record itself
	}
	m := c.message(queueID, body, digits)
	m.BornTimestamp += 12_345 // the template outlives the batch time it was made with
	want, wantErr := AppendRecord([]byte("keep"), &m, opt)
	tmpl.SetBorn(m.BornTimestamp)
	got, gotErr := tmpl.Append([]byte("keep"), queueID, body, []byte(digits))
	switch {
	case (wantErr == nil) != (gotErr == nil):
		t.Fatalf("%+v digits %q body %d: AppendRecord err %v, template err %v", c, digits, len(body), wantErr, gotErr)
	case wantErr != nil:
		for _, e := range []error{ErrBodyTooLarge, ErrPropertiesTooLarge, ErrRecordTooLarge} {
			if errors.Is(wantErr, e) != errors.Is(gotErr, e) {
				t.Fatalf("%+v: AppendRecord err %v, template err %v", c, wantErr, gotErr)
			}
		}
		if string(got) != "keep" {
			t.Fatalf("a refused record changed dst: %q", got)
		}
	case !bytes.Equal(got, want):
		t.Fatalf("%+v digits %q body %d:\n template %x\n want     %x", c, digits, len(body), got, want)
	case tmpl.Len(len(body), len(digits)) != len(want)-len("keep"):
		t.Fatalf("Len %d, record %d", tmpl.Len(len(body), len(digits)), len(want)-len("keep"))
	}
}

func TestRecordTemplateMatchesAppendRecord(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	long := strings.Repeat("t", 200) // a V2 topic
	cases := []templateCase{
		{topic: "orders", propCRC: true, prefix: "NATS_SUBJECT\x01orders\x02UNIQ_KEY\x01p1:", suffix: "\x02"},
		{topic: "orders", propCRC: false, prefix: "UNIQ_KEY\x01s:", suffix: "\x02TAGS\x01red\x02"},
		{topic: long, v6: true, propCRC: true, prefix: "UNIQ_KEY\x01", suffix: ""},
		{topic: "t", propCRC: true, prefix: "A\x01", suffix: "\x02B\x01" + strings.Repeat("x", MaxPropertiesLen-60) + "\x02"},
		{topic: "small", propCRC: true, prefix: "UNIQ_KEY\x01s:", suffix: "\x02", maxBody: 64},
	}
	for _, c := range cases {
		c.trusted = true
		// Decimal sequences, and the uppercase hex of generated UNIQ_KEYs.
		for _, d0 := range []string{"1", "9", "42", "999999999", "7F0000010A2B1C2D3E4F00000012FFFF"} {
			for _, d := range []string{"0", "7", "10", "123", "99999", "18446744073709551615", "ABCDEF", "7F0000010A2B1C2D3E4F000000130000", d0} {
				for _, n := range []int{0, 1, 63, 64, 65, 300} {
					body := make([]byte, n)
					for i := range body {
						body[i] = byte(rng.Uint32())
					}
					checkTemplate(t, c, []byte("first"), d0, int32(rng.IntN(64)), body, d)
				}
			}
		}
	}
}

func TestRecordTemplateRefuses(t *testing.T) {
	c := templateCase{topic: "orders", propCRC: true, prefix: "UNIQ_KEY\x01s:", suffix: "\x02"}
	m := c.message(0, []byte("b"), "12")
	opt := EncodeOptions{PropCRC: true}
	rec, err := AppendRecord(nil, &m, opt)
	if err != nil {
		t.Fatal(err)
	}
	var tmpl RecordTemplate
	stripped := []byte("__CRC32#\x0112\x02")
	m2 := c.message(0, []byte("b"), "")
	m2.Properties = stripped
	rec2, err := AppendRecord(nil, &m2, opt)
	if err != nil {
		t.Fatal(err)
	}
	inName := []byte("A12\x01v\x02")
	m3 := m2
	m3.Properties = inName
	rec3, err := AppendRecord(nil, &m3, opt)
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		rec, props []byte
		at, digits int
	}{
		"not digits":        {rec, m.Properties, 0, 2},
		"past the end":      {rec, m.Properties, len(c.prefix), 100},
		"no digits":         {rec, m.Properties, len(c.prefix), 0},
		"short":             {rec[:40], m.Properties, 0, 1},
		"torn":              {rec[:len(rec)-1], m.Properties, len(c.prefix), 2},
		"negative position": {rec, m.Properties, -1, 1},
		"other properties":  {rec, []byte("UNIQ_KEY\x01s:13\x02"), len(c.prefix), 2},
		"a dropped entry":   {rec2, stripped, len("__CRC32#\x01"), 2},
		"digits in a name":  {rec3, inName, 1, 2},
	} {
		if err := tmpl.Reset(tc.rec, tc.props, tc.at, tc.digits, opt); err == nil || tmpl.Ok() {
			t.Errorf("%s: Reset accepted it (ok %v)", name, tmpl.Ok())
		}
	}
	if err := tmpl.Reset(rec, m.Properties, len(c.prefix), 2, opt); err != nil || !tmpl.Ok() {
		t.Fatalf("Reset of a good record: %v", err)
	}
}

// FuzzRecordTemplate: whatever the topic, properties, digits and bodies, a template encodes what
// AppendRecord encodes.
func FuzzRecordTemplate(f *testing.F) {
	f.Add("orders", "NATS_SUBJECT\x01orders\x02UNIQ_KEY\x01p1:", "\x02", uint64(7), uint64(1000), []byte("body"), true, false)
	f.Add(strings.Repeat("t", 128), "", "", uint64(0), uint64(1<<63), []byte{}, false, true)
	f.Add("a", "__CRC32#\x01", "\x02", uint64(5), uint64(55), []byte("x"), true, false)
	f.Fuzz(func(t *testing.T, topic, prefix, suffix string, seq0, seq uint64, body []byte, propCRC, v6 bool) {
		c := templateCase{topic: topic, v6: v6, propCRC: propCRC, prefix: prefix, suffix: suffix}
		if ValidateTopic(topic) != nil {
			return
		}
		checkTemplate(t, c, []byte("first body"), strconv.FormatUint(seq0, 10), 1, body, strconv.FormatUint(seq, 10))
	})
}

// BenchmarkPackEntryEncode compares the two ways to encode a pack entry (128 B body, the
// properties ingress gives a batched message without headers): AppendRecord, and a template made
// of the pack's first entry.
func BenchmarkPackEntryEncode(b *testing.B) {
	c := templateCase{topic: "bench_t07", propCRC: true,
		prefix: "NATS_SUBJECT\x01bench.t07\x02UNIQ_KEY\x01pub-3-4f2a9c:", suffix: "\x02"}
	body := bytes.Repeat([]byte("x"), 128)
	opt := EncodeOptions{PropCRC: true}
	dst := make([]byte, 0, 1024)
	b.Run("AppendRecord", func(b *testing.B) {
		m := c.message(1, body, "1234567")
		for b.Loop() {
			dst, _ = AppendRecord(dst[:0], &m, opt)
		}
	})
	b.Run("template", func(b *testing.B) {
		m := c.message(1, body, "1234567")
		rec, _ := AppendRecord(nil, &m, opt)
		var tmpl RecordTemplate
		if err := tmpl.Reset(rec, m.Properties, len(c.prefix), 7, opt); err != nil {
			b.Fatal(err)
		}
		digits := []byte("1234568")
		for b.Loop() {
			dst, _ = tmpl.Append(dst[:0], 2, body, digits)
		}
	})
}
