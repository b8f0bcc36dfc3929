package commitlog

import (
	"strings"
	"testing"

	"github.com/rocketstore/engine/internal/store/javahash"
)

func viewOf(t *testing.T, topic string, props []Property, storeTS int64) View {
	t.Helper()
	m := baseMessage()
	m.Topic = topic
	m.Properties = AppendProperties(nil, props)
	rec, err := AppendRecord(nil, &m, EncodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	Stamp(rec, 0, 0, storeTS, false)
	v, err := Parse(rec)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestTagsCode(t *testing.T) {
	const ts = 1700000000000
	tagA := int64(javahash.String("TagA"))
	cases := []struct {
		topic  string
		props  []Property
		levels DelayLevels
		want   int64
	}{
		{"T", nil, nil, 0},
		{"T", []Property{{PropTags, "TagA"}}, nil, tagA},
		{"T", []Property{{PropTags, "polygenelubricants"}}, nil, -2147483648}, // sign-extended
		{"T", []Property{{PropTags, "TagA"}, {PropDelay, "3"}}, nil, tagA},    // not the schedule topic
		{ScheduleTopic, []Property{{PropTags, "TagA"}, {PropDelay, "3"}}, nil, ts + 10000},
		{ScheduleTopic, []Property{{PropDelay, "1"}}, nil, ts + 1000},
		{ScheduleTopic, []Property{{PropDelay, "18"}}, nil, ts + 7200000},
		{ScheduleTopic, []Property{{PropDelay, "99"}}, nil, ts + 7200000}, // clamped to the last level
		{ScheduleTopic, []Property{{PropDelay, "+2"}}, nil, ts + 5000},
		{ScheduleTopic, []Property{{PropTags, "TagA"}, {PropDelay, "0"}}, nil, tagA},
		{ScheduleTopic, []Property{{PropTags, "TagA"}, {PropDelay, "-1"}}, nil, tagA},
		{ScheduleTopic, []Property{{PropTags, "TagA"}, {PropDelay, "x"}}, nil, tagA},
		{ScheduleTopic, []Property{{PropTags, "TagA"}, {PropDelay, "99999999999"}}, nil, tagA},
		{ScheduleTopic, []Property{{PropDelay, "2"}}, DelayLevels{7, 11}, ts + 11},
		{ScheduleTopic, []Property{{PropTags, "TagA"}, {PropDelay, "2"}}, DelayLevels{}, tagA},
	}
	for _, c := range cases {
		v := viewOf(t, c.topic, c.props, ts)
		if got := v.TagsCode(c.levels); got != c.want {
			t.Errorf("%s %v %v: tags code %d, want %d", c.topic, c.props, c.levels, got, c.want)
		}
	}
}

func TestParseDelayLevels(t *testing.T) {
	got, err := ParseDelayLevels("1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h")
	if err != nil {
		t.Fatal(err)
	}
	def := DefaultDelayLevels()
	if len(got) != len(def) {
		t.Fatalf("%d levels, want %d", len(got), len(def))
	}
	for i := range got {
		if got[i] != def[i] {
			t.Fatalf("level %d = %d, want %d", i+1, got[i], def[i])
		}
	}
	if d, err := ParseDelayLevels("2d"); err != nil || d[0] != 2*86400000 {
		t.Fatalf("2d = %v, %v", d, err)
	}
	for _, bad := range []string{"", "1s  2s", "1x", "s", "-1s", "99999999999999999999s"} {
		if _, err := ParseDelayLevels(bad); err == nil {
			t.Errorf("ParseDelayLevels(%q) accepted", bad)
		}
	}
	def[0] = 0 // the copy is the caller's
	if DefaultDelayLevels()[0] != 1000 {
		t.Fatal("DefaultDelayLevels shares its slice")
	}
}

func TestViewDispatchHelpers(t *testing.T) {
	v := viewOf(t, "T", []Property{{PropKeys, " k1  k2 "}, {PropUniqKey, "U"}}, 1)
	var keys []string
	it := v.Keys()
	for {
		k, ok := it.Next()
		if !ok {
			break
		}
		keys = append(keys, string(k))
	}
	if strings.Join(keys, ",") != "k1,k2" {
		t.Errorf("keys %q", keys)
	}
	if u, ok := v.UniqKey(); !ok || string(u) != "U" {
		t.Errorf("uniq key %q %v", u, ok)
	}
	for _, tx := range []int32{TxNotType, TxPrepared, TxCommit, TxRollback} {
		m := baseMessage()
		m.SysFlag = tx | FlagMultiTags
		rec, _ := AppendRecord(nil, &m, EncodeOptions{})
		v, _ := Parse(rec)
		if v.TransactionType() != tx {
			t.Errorf("tx type %#x, want %#x", v.TransactionType(), tx)
		}
	}
}
