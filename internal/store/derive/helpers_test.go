package derive

import (
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/internal/store/consumequeue"
	"github.com/rocketstore/engine/internal/store/indexfile"
	"github.com/rocketstore/engine/internal/store/javahash"
	"github.com/rocketstore/engine/internal/vfs"
)

const t0 = 1_700_000_000_000 // store timestamps start here (ms)

var (
	bornHost  = netip.MustParseAddrPort("10.0.0.1:40000")
	storeHost = netip.MustParseAddrPort("127.0.0.1:10911")
)

// propsOf are p as the properties an encoder writes: each non-empty one, after two the broker
// adds, so that the derived ones are not simply the first.
func propsOf(p Props) []byte {
	b := commitlog.AppendProperty(nil, commitlog.PropCluster, "DefaultCluster")
	for _, kv := range [][2]string{
		{commitlog.PropUniqKey, p.UniqKey}, {commitlog.PropTags, p.Tags}, {commitlog.PropKeys, p.Keys},
		{commitlog.PropDelay, p.Delay},
	} {
		if kv[1] != "" {
			b = commitlog.AppendProperty(b, kv[0], kv[1])
		}
	}
	return commitlog.AppendProperty(b, commitlog.PropWait, "true")
}

// encode returns the record of a message with props p on queue q, of transaction type tx,
// stamped as the appender stamps it.
func encode(t testing.TB, p Props, q, tx int32, queueOffset, phys, storeTimestamp int64) []byte {
	t.Helper()
	m := commitlog.Message{Topic: p.Topic, QueueID: q, SysFlag: tx, BornTimestamp: t0, BornHost: bornHost,
		StoreHost: storeHost, Body: []byte("body of " + p.Topic), Properties: propsOf(p)}
	rec, err := commitlog.AppendRecord(nil, &m, commitlog.EncodeOptions{PropCRC: true})
	if err != nil {
		t.Fatalf("encoding %+v: %v", p, err)
	}
	commitlog.Stamp(rec, queueOffset, phys, storeTimestamp, true)
	return rec
}

// parse parses a record the test made.
func parse(t testing.TB, rec []byte) commitlog.View {
	t.Helper()
	v, err := commitlog.Parse(rec)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// oracleTagsCode is TagsCode worked out independently of the package: the hashCode of TAGS, or
// on the schedule topic the delivery time of a DELAY level (Integer.parseInt, clamped to the
// last level, none when <= 0).
func oracleTagsCode(p Props, storeTimestamp int64, levels DelayLevels) int64 {
	if levels == nil {
		levels = DefaultDelayLevels()
	}
	if p.Topic == commitlog.ScheduleTopic {
		if n, err := strconv.ParseInt(p.Delay, 10, 32); err == nil && n > 0 && len(levels) > 0 {
			return storeTimestamp + levels[min(n, int64(len(levels)))-1]
		}
	}
	return int64(javahash.String(p.Tags))
}

// oracleKeyHashes are the index hashes of "topic#UNIQ_KEY" and "topic#key" for each key of KEYS,
// hashed as whole strings.
func oracleKeyHashes(p Props) []int32 {
	var keys []string
	if p.UniqKey != "" {
		keys = append(keys, p.UniqKey)
	}
	for _, k := range strings.Split(p.Keys, " ") {
		if k != "" {
			keys = append(keys, k)
		}
	}
	var h []int32
	for _, k := range keys {
		h = append(h, javahash.IndexKeyHash(p.Topic+"#"+k))
	}
	return h
}

// stores is a ConsumeQueue store and an IndexFile service on one vfs.Mem, and a Builder over
// them.
type stores struct {
	fs    *vfs.Mem
	cq    *consumequeue.Store
	index *indexfile.Service
	b     *Builder
}

func openStores(t testing.TB, levels DelayLevels) *stores {
	t.Helper()
	mem := vfs.NewMem()
	cq, err := consumequeue.Open(consumequeue.Options{FS: mem, Root: "/s", UnitsPerFile: 16})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cq.Load(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cq.Close() })
	names := time.UnixMilli(t0)
	index, err := indexfile.Open(indexfile.Options{
		FS: mem, Dir: "/s/index", Geometry: indexfile.Geometry{Slots: 16, Entries: 40}, Location: time.UTC,
		Now: func() time.Time { names = names.Add(time.Second); return names },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { index.Close() })
	return &stores{fs: mem, cq: cq, index: index, b: NewBuilder(cq, index, levels)}
}

// units are the units of every queue, by queue.
func (s *stores) units(t testing.TB) map[string][]consumequeue.Unit {
	t.Helper()
	out := make(map[string][]consumequeue.Unit)
	for _, cq := range s.cq.Queues() {
		units := make([]consumequeue.Unit, cq.MaxOffset())
		if n, err := cq.Read(0, units); err != nil || n != len(units) {
			t.Fatalf("%s: read %d of %d units: %v", cq, n, len(units), err)
		}
		out[cq.String()] = units
	}
	return out
}

// indexFiles are the bytes of every IndexFile, in order.
func (s *stores) indexFiles(t testing.TB) [][]byte {
	t.Helper()
	if err := s.index.Flush(); err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, f := range s.index.Files() {
		b, err := s.fs.ReadFile(f.Name())
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// lookup returns the CommitLog offsets the index has for key in topic.
func (s *stores) lookup(t testing.TB, topic, key string) []int64 {
	t.Helper()
	res, err := s.index.Query(nil, topic, key, 64, 0, 1<<62)
	if err != nil {
		t.Fatal(err)
	}
	return res.PhyOffsets
}
