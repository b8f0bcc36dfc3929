package derive

import (
	"slices"
	"testing"

	"github.com/rocketstore/engine/internal/golden"
	"github.com/rocketstore/engine/internal/store/commitlog"
)

// FuzzAheadMatchesReadBack: for any props an encoder accepts (commitlog.CheckProperty), what
// Ahead works out is what the record derives read back from its bytes whenever Ahead says it
// knows; Ahead knows unless the tag code may be a delivery time or the keys do not fit; and the
// read-back derivation is the one the format defines, worked out independently.
func FuzzAheadMatchesReadBack(f *testing.F) {
	for _, c := range deriveCases() {
		f.Add(c.p.Topic, c.p.Tags, c.p.Keys, c.p.UniqKey, c.p.Delay, int64(t0))
	}
	f.Fuzz(func(t *testing.T, topic, tags, keys, uniq, delay string, ts int64) {
		p := Props{Topic: topic, Tags: tags, Keys: keys, UniqKey: uniq, Delay: delay}
		if commitlog.ValidateTopic(topic) != nil {
			return
		}
		for _, kv := range [][2]string{{commitlog.PropTags, tags}, {commitlog.PropKeys, keys},
			{commitlog.PropUniqKey, uniq}, {commitlog.PropDelay, delay}} {
			if kv[1] != "" && commitlog.CheckProperty(kv[0], kv[1]) != nil {
				return // no encoder writes it
			}
		}
		if len(propsOf(p))+commitlog.PropCRCLen > commitlog.MaxPropertiesLen {
			return
		}
		v := parse(t, encode(t, p, 0, commitlog.TxNotType, 0, 0, ts))
		rb := PropsOf(v)
		if rb != p {
			t.Fatalf("read back %+v, encoded %+v", rb, p)
		}
		tagsCode, hashes := TagsCode(rb, v.StoreTimestamp(), nil), KeyHashes(nil, TopicPrefix(rb.Topic), rb)
		if want := oracleTagsCode(p, ts, nil); tagsCode != want {
			t.Fatalf("tag code %d, want %d", tagsCode, want)
		}
		if want := oracleKeyHashes(p); !slices.Equal(hashes, want) {
			t.Fatalf("key hashes %v, want %v", hashes, want)
		}
		x := Ahead(p, TopicPrefix(p.Topic))
		if want := !(topic == commitlog.ScheduleTopic && delay != "") && len(hashes) <= len(x.Hashes); x.Known != want {
			t.Fatalf("Ahead known %v, want %v", x.Known, want)
		}
		if x.Known && (x.TagsCode != tagsCode || !slices.Equal(x.Hashes[:x.NHashes], hashes)) {
			t.Fatalf("ahead %+v; read back %d %v", x, tagsCode, hashes)
		}
	})
}

// FuzzReadBack: any record Parse accepts derives without a panic, its key hashes are those of
// the whole "topic#key" strings (whatever the bytes), and its unit names it.
func FuzzReadBack(f *testing.F) {
	for _, r := range golden.Load().Records() {
		f.Add(r.Bytes())
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := commitlog.Parse(b)
		if err != nil {
			return
		}
		p := PropsOf(v)
		if got, want := KeyHashes(nil, TopicPrefix(p.Topic), p), oracleKeyHashes(p); !slices.Equal(got, want) {
			t.Fatalf("key hashes %v, want %v", got, want)
		}
		if n := NumKeys(p); n != len(oracleKeyHashes(p)) {
			t.Fatalf("NumKeys %d", n)
		}
		u := Unit(7, v, p, nil)
		if u.Phys != 7 || int(u.Size) != v.TotalSize() || u.TagsCode != TagsCode(p, v.StoreTimestamp(), nil) {
			t.Fatalf("unit %+v", u)
		}
	})
}
