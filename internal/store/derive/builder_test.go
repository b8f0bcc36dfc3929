package derive

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/internal/store/consumequeue"
	"github.com/rocketstore/engine/internal/store/indexfile"
)

// logRec is one record of a log the test made up, where it went and what it holds.
type logRec struct {
	p             Props
	queue, tx     int32
	queueOffset   int64
	phys, storeTS int64
	bytes         []byte
}

// makeLog lays the records of props out as the appender would: one after the other, queue
// offsets taken per queue by queued records only.
func makeLog(t testing.TB, props []Props, txOf func(i int) int32) []logRec {
	t.Helper()
	next := make(map[string]int64)
	var phys int64
	var out []logRec
	for i, p := range props {
		r := logRec{p: p, queue: int32(i % 3), tx: txOf(i), phys: phys, storeTS: t0 + int64(i)*250}
		if Queued(r.tx) {
			k := fmt.Sprintf("%s/%d", p.Topic, r.queue)
			r.queueOffset = next[k]
			next[k]++
		}
		r.bytes = encode(t, p, r.queue, r.tx, r.queueOffset, r.phys, r.storeTS)
		phys += int64(len(r.bytes))
		out = append(out, r)
	}
	return out
}

// TestBuilderIndexKeys: the Builder indexes "topic#UNIQ_KEY", then "topic#key" for each key of
// KEYS split at single spaces (empty tokens skipped), for every record but rolled-back ones, and
// gives a unit to normal and committed records only.
func TestBuilderIndexKeys(t *testing.T) {
	s := openStores(t, nil)
	recs := []struct {
		p  Props
		tx int32
	}{
		{Props{Topic: "T", UniqKey: "U1", Keys: " a  b "}, commitlog.TxNotType},
		{Props{Topic: "T", UniqKey: "U2", Keys: "c"}, commitlog.TxRollback},
		{Props{Topic: "T"}, commitlog.TxNotType}, // no keys
		{Props{Topic: "T", UniqKey: "U3", Keys: "a"}, commitlog.TxPrepared},
		{Props{Topic: "T", Keys: "a"}, commitlog.TxCommit},
	}
	var props []Props
	for _, r := range recs {
		props = append(props, r.p)
	}
	log := makeLog(t, props, func(i int) int32 { return recs[i].tx })
	for _, r := range log[:1] {
		if err := s.b.Apply(r.phys, parse(t, r.bytes)); err != nil {
			t.Fatal(err)
		}
	}
	f := s.index.Files()[0]
	var got []int32
	f.Each(func(_ int32, e indexfile.Entry) bool { got = append(got, e.KeyHash); return true })
	if want := []int32{indexfile.KeyHash("T", "U1"), indexfile.KeyHash("T", "a"), indexfile.KeyHash("T", "b")}; !slices.Equal(got, want) {
		t.Fatalf("entries %v, want %v", got, want)
	}
	before := f.Header()
	for _, r := range log[1:3] {
		if err := s.b.Apply(r.phys, parse(t, r.bytes)); err != nil {
			t.Fatal(err)
		}
	}
	if h := f.Header(); h != before {
		t.Fatalf("a rolled-back record and one without keys changed the index: %+v -> %+v", before, h)
	}
	for _, r := range log[3:] {
		if err := s.b.Apply(r.phys, parse(t, r.bytes)); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := s.lookup(t, "T", "a"), []int64{log[4].phys, log[3].phys, log[0].phys}; !slices.Equal(got, want) {
		t.Fatalf("query a = %v, want %v", got, want)
	}
	if got := s.lookup(t, "T", "U2"); len(got) != 0 {
		t.Fatalf("rolled-back record indexed: %v", got)
	}
	var queued []int64
	for _, units := range s.units(t) {
		for _, u := range units {
			queued = append(queued, u.Phys)
		}
	}
	slices.Sort(queued)
	if want := []int64{log[0].phys, log[2].phys, log[4].phys}; !slices.Equal(queued, want) {
		t.Fatalf("units for %v, want the normal and committed records %v", queued, want)
	}
}

// TestBuilderFedMatchesReadBack builds the same log twice: once read back from the bytes
// (Apply), once with every record whose Index the encoder knows fed (ApplyFed with Ahead's
// Index, as the DispatchFeed hands them over) and the rest read back. The ConsumeQueues and the
// IndexFiles, rolls included, are the same bytes.
func TestBuilderFedMatchesReadBack(t *testing.T) {
	var props []Props
	for range 4 {
		for _, c := range deriveCases() {
			if c.levels == nil {
				props = append(props, c.p)
			}
		}
	}
	log := makeLog(t, props, func(i int) int32 {
		return []int32{commitlog.TxNotType, commitlog.TxNotType, commitlog.TxPrepared, commitlog.TxNotType,
			commitlog.TxCommit, commitlog.TxNotType, commitlog.TxRollback}[i%7]
	})
	a, b := openStores(t, nil), openStores(t, nil)
	fed := 0
	for _, r := range log {
		v := parse(t, r.bytes)
		if err := a.b.Apply(r.phys, v); err != nil {
			t.Fatal(err)
		}
		x := Ahead(r.p, TopicPrefix(r.p.Topic))
		if r.tx != commitlog.TxNotType || !x.Known {
			if err := b.b.Apply(r.phys, v); err != nil {
				t.Fatal(err)
			}
			continue
		}
		fed++
		f := Fed{Phys: r.phys, Size: int32(len(r.bytes)), QueueID: r.queue, QueueOffset: r.queueOffset,
			StoreTimestamp: r.storeTS, Topic: r.p.Topic, Index: x}
		if err := b.b.ApplyFed(&f); err != nil {
			t.Fatal(err)
		}
	}
	if fed < len(log)/4 || fed == len(log) {
		t.Fatalf("%d of %d records fed: the test wants both ways", fed, len(log))
	}
	ua, ub := a.units(t), b.units(t)
	if len(ua) == 0 || !maps.EqualFunc(ua, ub, slices.Equal[[]consumequeue.Unit]) {
		t.Fatalf("ConsumeQueues differ:\nread back %v\nfed       %v", ua, ub)
	}
	fa, fb := a.indexFiles(t), b.indexFiles(t)
	if len(fa) < 3 || len(fa) != len(fb) {
		t.Fatalf("%d index files read back, %d fed (want the same, and rolls)", len(fa), len(fb))
	}
	for i := range fa {
		if !bytes.Equal(fa[i], fb[i]) {
			t.Fatalf("index file %d differs", i)
		}
	}
	if a.b.LastStoreTimestamp != log[len(log)-1].storeTS || b.b.LastStoreTimestamp != a.b.LastStoreTimestamp ||
		a.b.IndexFilled == 0 || b.b.IndexFilled != a.b.IndexFilled {
		t.Fatalf("timestamps: last %d / %d, index filled %d / %d", a.b.LastStoreTimestamp, b.b.LastStoreTimestamp,
			a.b.IndexFilled, b.b.IndexFilled)
	}
}

// TestBuilderAllocs: applying a record, read back or fed, allocates nothing once its queue
// exists (the record is one the stores hold already: their skip comes after the hashing).
func TestBuilderAllocs(t *testing.T) {
	s := openStores(t, nil)
	p := Props{Topic: "TopicTest", UniqKey: "7F00000112340A0B0C0D000000640001", Keys: "OrderID188 OrderID189", Tags: "TagA"}
	rec := encode(t, p, 0, commitlog.TxNotType, 0, 0, t0)
	v := parse(t, rec)
	for i, r := range [][]byte{rec, encode(t, p, 0, commitlog.TxNotType, 1, 1000, t0)} {
		if err := s.b.Apply(int64(i)*1000, parse(t, r)); err != nil {
			t.Fatal(err)
		}
	}
	if n := testing.AllocsPerRun(100, func() {
		if err := s.b.Apply(0, v); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("Apply allocates %v times per record", n)
	}
	f := Fed{Size: int32(len(rec)), Topic: p.Topic, Index: Ahead(Props{Topic: p.Topic, Keys: "k"}, TopicPrefix(p.Topic))}
	if n := testing.AllocsPerRun(100, func() {
		if err := s.b.ApplyFed(&f); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("ApplyFed allocates %v times per record", n)
	}
	var x Index
	if n := testing.AllocsPerRun(100, func() { x = Ahead(p, TopicPrefix(p.Topic)) }); n != 0 || x.Known {
		t.Errorf("Ahead allocates %v times (known %v)", n, x.Known)
	}
	q := Props{Topic: "TopicTest", UniqKey: p.UniqKey, Keys: "OrderID188", Tags: "TagA"}
	if n := testing.AllocsPerRun(100, func() { x = Ahead(q, TopicPrefix(q.Topic)) }); n != 0 || !x.Known {
		t.Errorf("Ahead allocates %v times (known %v)", n, x.Known)
	}
}
