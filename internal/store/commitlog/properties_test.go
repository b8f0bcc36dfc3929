package commitlog

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
)

func TestPropertiesParseRule(t *testing.T) {
	cases := []struct {
		in   string
		want []string // name, value, name, value, ...
	}{
		{"", nil},
		{"a\x01b\x02", []string{"a", "b"}},
		{"a\x01b", []string{"a", "b"}}, // last entry without separator
		{"\x01b\x02", nil},             // empty name
		{"a\x01\x02", nil},             // empty value
		{"ab\x02", nil},                // no 0x01
		{"\x02\x02a\x01b\x02\x02", []string{"a", "b"}},
		{"a\x01b\x01c\x02", []string{"a", "b\x01c"}}, // value after the first 0x01
		{"k\x01v\x02k\x01w\x02", []string{"k", "v", "k", "w"}},
		{"x\x02a\x01bc\x02", []string{"a", "bc"}},
	}
	for _, c := range cases {
		var got []string
		for n, v := range Properties(c.in).All() {
			got = append(got, string(n), string(v))
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%q: got %q, want %q", c.in, got, c.want)
		}
	}
	p := Properties("k\x01v\x02TAGS\x01TagA\x02k\x01w\x02")
	if v, ok := p.Get("k"); !ok || string(v) != "w" {
		t.Errorf("Get(k) = %q, %v; the last entry wins", v, ok)
	}
	if _, ok := p.Get("missing"); ok {
		t.Error("Get(missing) found something")
	}
	if m := p.Map(); !maps.Equal(m, map[string]string{"k": "w", "TAGS": "TagA"}) {
		t.Errorf("Map = %v", m)
	}
}

func TestCheckProperty(t *testing.T) {
	if err := CheckProperty("KEYS", "a b c"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, value, want string }{
		{"", "v", "name is empty"},
		{"n", "", "value is empty"},
		{"a\x01", "v", "name \"a\\x01\" has separator byte 0x01 at 1"},
		{"n", "x\x02", "value \"x\\x02\" has separator byte 0x02 at 1"},
		{"\xff", "v", "not valid UTF-8"},
		{"n", "\xc3", "not valid UTF-8"},
	} {
		err := CheckProperty(c.name, c.value)
		if !errors.Is(err, ErrInvalidProperty) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("CheckProperty(%q, %q) = %v, want %q", c.name, c.value, err, c.want)
		}
	}
}

func TestKeys(t *testing.T) {
	it := Keys([]byte("  OrderID188 OrderID189  x "))
	var got []string
	for {
		k, ok := it.Next()
		if !ok {
			break
		}
		got = append(got, string(k))
	}
	if !slices.Equal(got, []string{"OrderID188", "OrderID189", "x"}) {
		t.Fatalf("keys %q", got)
	}
}

func TestStripPropCRC(t *testing.T) {
	for in, want := range map[string]string{
		"":                                      "",
		"__CRC32#\x011\x02":                     "",
		"a\x01b\x02__CRC32#\x011\x02c\x01d\x02": "a\x01b\x02c\x01d\x02",
		"a\x01b\x02__CRC32#\x011":               "a\x01b\x02",
		"x__CRC32#\x011\x02":                    "x__CRC32#\x011\x02", // not at an entry start
		"__CRC32#x\x011\x02":                    "__CRC32#x\x011\x02", // a different name
		"a\x01b":                                "a\x01b",
	} {
		got := appendWithoutPropCRC(nil, []byte(in))
		n, ends := lenWithoutPropCRC([]byte(in))
		if string(got) != want || n != len(want) || ends != strings.HasSuffix(want, "\x02") {
			t.Errorf("strip %q = %q (%d, %v), want %q", in, got, n, ends, want)
		}
	}
}

func TestJavaHashMapOrderReput(t *testing.T) {
	// A re-put keeps the first position and takes the last value; the order is by bucket.
	got := JavaHashMapOrder([]Property{{"WAIT", "true"}, {"TAGS", "a"}, {"UNIQ_KEY", "u"}, {"TAGS", "b"}})
	want := []Property{{"UNIQ_KEY", "u"}, {"TAGS", "b"}, {"WAIT", "true"}}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	// "Aa" and "BB" share a hash, so they keep put order in either direction.
	for _, in := range [][]Property{{{"Aa", "1"}, {"BB", "2"}}, {{"BB", "2"}, {"Aa", "1"}}} {
		if got := JavaHashMapOrder(in); !slices.Equal(got, in) {
			t.Fatalf("colliding names reordered: %v", got)
		}
	}
	// Past 96 entries the table has 256 buckets: the order is still by bucket, and stable.
	var many []Property
	for i := range 150 {
		many = append(many, Property{strings.Repeat("k", 1+i%7) + string(rune('A'+i%50)) + string(rune('a'+i/50)), "v"})
	}
	out := JavaHashMapOrder(many)
	if len(out) != len(many) {
		t.Fatalf("%d entries out of %d", len(out), len(many))
	}
}
