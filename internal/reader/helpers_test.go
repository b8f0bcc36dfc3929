package reader

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"testing"

	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/internal/store/consumequeue"
	"github.com/rocketstore/engine/internal/store/derive"
	"github.com/rocketstore/engine/internal/store/indexfile"
	"github.com/rocketstore/engine/internal/vfs"
	"github.com/rocketstore/engine/stages"
)

var (
	netipZero netip.AddrPort
	testBorn  = netip.MustParseAddrPort("10.1.2.3:4000")
	storeHost = netip.MustParseAddrPort("10.9.8.7:10911")
)

// geometry is the shape of a test store.
type geometry struct {
	segment int64               // CommitLog segment size
	units   int                 // ConsumeQueue units per file
	index   *indexfile.Geometry // nil: no index
}

// small: CommitLog segments of 64 KiB, the default index geometry scaled down.
var small = geometry{segment: 64 << 10, units: 1000, index: &indexfile.Geometry{Slots: 1024, Entries: 4096}}

// indexfile4k is an index geometry of 4096 entries.
var indexfile4k = indexfile.Geometry{Slots: 1024, Entries: 4096}

// tiny: segments that hold a few records and index files that hold five keys, so that reads
// cross segment, ConsumeQueue file and index file boundaries.
var tiny = geometry{segment: 1024, units: 4, index: &indexfile.Geometry{Slots: 8, Entries: 6}}

// testStore is a store built from the real store packages: records are appended with
// commitlog.Log.Append and dispatched with the real derive.Builder, as the engine does,
// and the Dispatched watermark follows. Only one goroutine at a time may call put.
type testStore struct {
	t          testing.TB
	fs         vfs.FS
	dir        string
	geo        geometry
	log        *commitlog.Log
	cq         *consumequeue.Store
	index      *indexfile.Service
	builder    *derive.Builder
	dispatched *stages.Watermark
	next       map[string]int64 // next queue offset by "topic/queue"
	clock      int64            // store timestamp of the next record
	r          *Reader
}

func newTestStore(t testing.TB, fsys vfs.FS, dir string, geo geometry) *testStore {
	t.Helper()
	s := &testStore{t: t, fs: fsys, dir: dir, geo: geo, next: make(map[string]int64), clock: 1_700_000_000_000}
	var err error
	if s.log, err = commitlog.OpenLog(commitlog.LogOptions{FS: fsys, Dir: filepath.Join(dir, "commitlog"), FileSize: geo.segment}); err != nil {
		t.Fatal(err)
	}
	if s.cq, err = consumequeue.Open(consumequeue.Options{FS: fsys, Root: dir, UnitsPerFile: geo.units}); err != nil {
		t.Fatal(err)
	}
	if geo.index != nil {
		if s.index, err = indexfile.Open(indexfile.Options{FS: fsys, Dir: filepath.Join(dir, "index"), Geometry: *geo.index}); err != nil {
			t.Fatal(err)
		}
	}
	s.builder = derive.NewBuilder(s.cq, s.index, nil)
	s.dispatched = stages.NewWatermark(0)
	s.r = New(s.log, s.cq, s.index, s.dispatched, storeHost)
	t.Cleanup(s.close)
	return s
}

func (s *testStore) close() {
	if s.index != nil {
		s.index.Close()
	}
	s.cq.FlushAll(0)
	s.cq.Close()
	s.log.Close()
}

// msg is what a test puts; zero fields get defaults.
type msg struct {
	topic string
	queue int32
	tags  string
	keys  string
	uniq  string
	body  []byte
	props [][2]string // more properties
	ts    int64       // store timestamp; 0: the store's clock, which then moves on 10 ms
}

// put appends m and dispatches it, then advances Dispatched; it returns the record's offset.
func (s *testStore) put(m msg) int64 {
	s.t.Helper()
	phys := s.append(m)
	s.dispatch(phys)
	return phys
}

// append appends m to the CommitLog only, as the writer does before dispatch follows; it
// returns the record's offset.
func (s *testStore) append(m msg) int64 {
	s.t.Helper()
	if m.topic == "" {
		m.topic = "T"
	}
	var props []byte
	if m.uniq != "" {
		props = commitlog.AppendProperty(props, commitlog.PropUniqKey, m.uniq)
	}
	if m.tags != "" {
		props = commitlog.AppendProperty(props, commitlog.PropTags, m.tags)
	}
	if m.keys != "" {
		props = commitlog.AppendProperty(props, commitlog.PropKeys, m.keys)
	}
	for _, p := range m.props {
		props = commitlog.AppendProperty(props, p[0], p[1])
	}
	rec, err := commitlog.AppendRecord(nil, &commitlog.Message{
		Topic: m.topic, QueueID: m.queue, BornTimestamp: s.clock - 5, BornHost: testBorn,
		StoreHost: storeHost, Body: m.body, Properties: props,
	}, commitlog.EncodeOptions{PropCRC: true})
	if err != nil {
		s.t.Fatal(err)
	}
	ts := m.ts
	if ts == 0 {
		ts = s.clock
		s.clock += 10
	}
	key := fmt.Sprintf("%s/%d", m.topic, m.queue)
	phys, err := s.log.Append(rec, s.next[key], ts, true)
	if err != nil {
		s.t.Fatal(err)
	}
	s.next[key]++
	return phys
}

// dispatch builds the unit and index keys of the record at phys, as dispatch does, and advances
// Dispatched past it.
func (s *testStore) dispatch(phys int64) {
	s.t.Helper()
	v, release, err := s.log.Read(phys)
	if err != nil {
		s.t.Fatal(err)
	}
	end := phys + int64(v.TotalSize())
	err = s.builder.Apply(phys, v)
	release()
	if err != nil {
		s.t.Fatal(err)
	}
	s.dispatched.Advance(end)
}

// body is the body of the n-th test message.
func body(n int) []byte { return fmt.Appendf(nil, "message %d", n) }

func noErr(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
