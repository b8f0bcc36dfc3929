package derive

import (
	"slices"
	"strings"
	"testing"

	"github.com/rocketstore/engine/internal/store/commitlog"
)

// deriveCase is a record's props, the delay levels it is dispatched with, and whether its index
// can be worked out ahead of the append.
type deriveCase struct {
	name   string
	p      Props
	levels DelayLevels
	known  bool
}

func deriveCases() []deriveCase {
	const uniq = "7F00000112340A0B0C0D000000640001"
	sched := commitlog.ScheduleTopic
	return []deriveCase{
		{"no properties", Props{Topic: "T"}, nil, true},
		{"tags only", Props{Topic: "T", Tags: "TagA"}, nil, true},
		{"tags hash is MIN_VALUE, sign-extended", Props{Topic: "T", Tags: "polygenelubricants"}, nil, true},
		{"uniq key only", Props{Topic: "TopicTest", UniqKey: uniq}, nil, true},
		{"uniq key and one key", Props{Topic: "TopicTest", UniqKey: uniq, Keys: "OrderID188", Tags: "TagA"}, nil, true},
		{"one key, no uniq key", Props{Topic: "TopicTest", Keys: "OrderID188"}, nil, true},
		{"two keys, no uniq key", Props{Topic: "TopicTest", Keys: "OrderID188 OrderID189"}, nil, true},
		{"uniq key and two keys", Props{Topic: "TopicTest", UniqKey: uniq, Keys: "OrderID188 OrderID189"}, nil, false},
		{"keys among spaces", Props{Topic: "T", UniqKey: "U1", Keys: " a  b c "}, nil, false},
		{"one key among spaces", Props{Topic: "T", UniqKey: "U1", Keys: "  a "}, nil, true},
		{"keys of spaces only", Props{Topic: "T", UniqKey: "U1", Keys: "   "}, nil, true},
		{"key whose hash is MIN_VALUE", Props{Topic: "TopicTest", Keys: "DV[XZAX"}, nil, true},
		{"non-ASCII tags and key", Props{Topic: "T", Tags: "étiquette", Keys: "clé"}, nil, true},
		{"surrogate pairs", Props{Topic: "T", UniqKey: "😀", Keys: "日本 😀😀"}, nil, false},
		{"longest topic", Props{Topic: strings.Repeat("G", commitlog.MaxTopicLen), UniqKey: "u", Tags: "t"}, nil, true},
		{"retry topic, version 2 record", Props{Topic: commitlog.RetryTopicPrefix + strings.Repeat("G", 248), UniqKey: uniq}, nil, true},
		{"delay on an ordinary topic", Props{Topic: "T", Tags: "TagA", Delay: "3"}, nil, true},
		{"schedule topic without a delay", Props{Topic: sched, Tags: "TagA", UniqKey: "u"}, nil, true},
		{"schedule topic, level 3", Props{Topic: sched, Tags: "TagA", Delay: "3"}, nil, false},
		{"schedule topic, level 1, no tags", Props{Topic: sched, Delay: "1"}, nil, false},
		{"schedule topic, the last level", Props{Topic: sched, Delay: "18"}, nil, false},
		{"schedule topic, level clamped", Props{Topic: sched, Delay: "99"}, nil, false},
		{"schedule topic, level +2", Props{Topic: sched, Delay: "+2"}, nil, false},
		{"schedule topic, level 0 keeps the tags", Props{Topic: sched, Tags: "TagA", Delay: "0"}, nil, false},
		{"schedule topic, level -1 keeps the tags", Props{Topic: sched, Tags: "TagA", Delay: "-1"}, nil, false},
		{"schedule topic, level not a number", Props{Topic: sched, Tags: "TagA", Delay: "x"}, nil, false},
		{"schedule topic, level past int32", Props{Topic: sched, Tags: "TagA", Delay: "99999999999"}, nil, false},
		{"schedule topic, own levels", Props{Topic: sched, Delay: "2", UniqKey: "u"}, DelayLevels{7, 11}, false},
		{"schedule topic, no levels", Props{Topic: sched, Tags: "TagA", Delay: "2"}, DelayLevels{}, false},
	}
}

// TestAheadMatchesReadBack: for each record, what the encoder works out ahead (Ahead, from the
// props it puts in) is what dispatch reads back from the record's bytes (PropsOf, TagsCode,
// KeyHashes) whenever Ahead says it knows, and both are what the format says, worked out
// independently (the whole "topic#key" strings hashed, Integer.parseInt of DELAY). Where Ahead
// cannot be sure (a delivery time, more keys than it holds) it says so.
func TestAheadMatchesReadBack(t *testing.T) {
	const ts = t0 + 123
	for _, c := range deriveCases() {
		t.Run(c.name, func(t *testing.T) {
			v := parse(t, encode(t, c.p, 0, commitlog.TxNotType, 0, 0, ts))
			p := PropsOf(v)
			if p != c.p {
				t.Fatalf("read back props %+v, encoded %+v", p, c.p)
			}
			tags, hashes := TagsCode(p, v.StoreTimestamp(), c.levels), KeyHashes(nil, TopicPrefix(p.Topic), p)
			if want := oracleTagsCode(c.p, ts, c.levels); tags != want {
				t.Errorf("read back tag code %d, want %d", tags, want)
			}
			if want := oracleKeyHashes(c.p); !slices.Equal(hashes, want) {
				t.Errorf("read back key hashes %v, want %v", hashes, want)
			}
			if n := NumKeys(p); n != len(hashes) {
				t.Errorf("NumKeys %d, KeyHashes %d", n, len(hashes))
			}
			if u := Unit(4096, v, p, c.levels); u.Phys != 4096 || int(u.Size) != v.TotalSize() || u.TagsCode != tags {
				t.Errorf("unit %+v, want {4096 %d %d}", u, v.TotalSize(), tags)
			}
			x := Ahead(c.p, TopicPrefix(c.p.Topic))
			if x.Known != c.known {
				t.Fatalf("Ahead known %v, want %v (%+v)", x.Known, c.known, x)
			}
			if !x.Known {
				if x != (Index{}) {
					t.Fatalf("an unknown Index holds %+v", x)
				}
				return
			}
			if x.TagsCode != tags || !slices.Equal(x.Hashes[:x.NHashes], hashes) {
				t.Fatalf("ahead: tags %d hashes %v; read back: %d %v", x.TagsCode, x.Hashes[:x.NHashes], tags, hashes)
			}
		})
	}
}

// TestEmptyTopicKeys: KeyHashes over a topic no record can have (ValidateTopic refuses "") is
// still the hash of "#key", and TopicPrefix of a topic is the state that continues it.
func TestEmptyTopicKeys(t *testing.T) {
	for _, p := range []Props{{UniqKey: "u", Keys: "k1"}, {Topic: "", Keys: " k1 k2"}, {Topic: "T"}} {
		if got, want := KeyHashes(nil, TopicPrefix(p.Topic), p), oracleKeyHashes(p); !slices.Equal(got, want) {
			t.Errorf("%+v: %v, want %v", p, got, want)
		}
		if x := Ahead(p, TopicPrefix(p.Topic)); !x.Known || !slices.Equal(x.Hashes[:x.NHashes], oracleKeyHashes(p)) {
			t.Errorf("%+v: Ahead %+v", p, x)
		}
	}
}
