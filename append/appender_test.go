package appender

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/internal/vfs"
	"github.com/rocketstore/engine/stages"
)

var (
	bornHost  = netip.MustParseAddrPort("10.0.0.1:40000")
	storeHost = netip.MustParseAddrPort("127.0.0.1:10911")
	// t0 is the fake store clock's start.
	t0 = time.UnixMilli(1_700_000_000_000)
)

// encode builds a record as ingress does: encoded with a reserved __CRC32# entry, UNIQ_KEY =
// msgID when set.
func encode(t testing.TB, topic string, queue int32, body string, msgID string, sysFlag int32) stages.Record {
	t.Helper()
	var props []byte
	if msgID != "" {
		props = commitlog.AppendProperty(props, commitlog.PropUniqKey, msgID)
	}
	m := commitlog.Message{
		Topic: topic, QueueID: queue, SysFlag: sysFlag, BornTimestamp: t0.UnixMilli() - 5,
		BornHost: bornHost, StoreHost: storeHost, Body: []byte(body), Properties: props,
	}
	rec, err := commitlog.AppendRecord(nil, &m, commitlog.EncodeOptions{PropCRC: true})
	if err != nil {
		t.Fatal(err)
	}
	return stages.Record{Bytes: rec, Topic: topic, QueueID: queue, PropCRC: true, MsgID: msgID}
}

// clock is a fake store clock the test moves between rounds.
type clock struct{ ms atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.ms.Store(t0.UnixMilli())
	return c
}

func (c *clock) now() time.Time            { return time.UnixMilli(c.ms.Load()) }
func (c *clock) add(d time.Duration) int64 { return c.ms.Add(d.Milliseconds()) }

// harness runs one appender over a real commitlog.Log on a vfs.Mem.
type harness struct {
	t       *testing.T
	mem     *vfs.Mem
	log     *commitlog.Log
	clock   *clock
	in      chan *stages.Batch
	out     chan *stages.Batch
	kick    chan struct{}
	written *stages.Watermark
	app     *Appender
	done    chan error
	stopped bool
}

const testFileSize = 64 << 10

// start opens a log on mem (a fresh one when nil) and runs an appender configured by cfg, whose
// Log, In, Out, Written, Dispatched (always ahead unless set), Kick and Now it fills in.
func start(t *testing.T, mem *vfs.Mem, cfg Config) *harness {
	t.Helper()
	if mem == nil {
		mem = vfs.NewMem()
	}
	log, err := commitlog.OpenLog(commitlog.LogOptions{FS: mem, Dir: "/store/commitlog", FileSize: testFileSize})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { log.Close() })
	h := &harness{
		t: t, mem: mem, log: log, clock: newClock(),
		in: make(chan *stages.Batch, 16), out: make(chan *stages.Batch, 16), kick: make(chan struct{}, 1),
		written: stages.NewWatermark(log.MaxOffset()), done: make(chan error, 1),
	}
	cfg.Log, cfg.In, cfg.Out, cfg.Written, cfg.Kick, cfg.Now = log, h.in, h.out, h.written, h.kick, h.clock.now
	if cfg.Dispatched == nil {
		cfg.Dispatched = stages.NewWatermark(math.MaxInt64)
	}
	h.app = New(cfg)
	go func() { h.done <- h.app.Run(context.Background()) }()
	t.Cleanup(func() {
		if !h.stopped {
			h.stop()
		}
	})
	return h
}

// round appends one batch and returns it as the appender passed it on.
func (h *harness) round(recs ...stages.Record) *stages.Batch {
	h.t.Helper()
	b := &stages.Batch{Records: recs}
	h.in <- b
	got := <-h.out
	if got != b {
		h.t.Fatal("the appender passed on another batch")
	}
	return b
}

// stop closes In and returns what Run returned, after checking that Out is closed.
func (h *harness) stop() error {
	h.t.Helper()
	h.stopped = true
	close(h.in)
	for b := range h.out { // bounded: In is closed, so only what was queued comes out
		h.t.Errorf("unexpected batch after stop: %+v", b)
	}
	return <-h.done
}

// check reads the record r points at back from the log and verifies the stamps and CRCs.
func (h *harness) check(r *stages.Record) {
	h.t.Helper()
	if r.Err != nil || r.Duplicate {
		h.t.Fatalf("record not stored: err=%v duplicate=%v", r.Err, r.Duplicate)
	}
	v, release, err := h.log.Read(r.PhysOffset)
	if err != nil {
		h.t.Fatal(err)
	}
	defer release()
	if _, err := commitlog.Decode(v.Bytes(), commitlog.Check{RequirePropCRC: true}); err != nil {
		h.t.Fatalf("record at %d: %v", r.PhysOffset, err)
	}
	if v.TotalSize() != int(r.Size) || int(r.Size) != len(r.Bytes) {
		h.t.Fatalf("record at %d: size %d, record says %d, encoded %d", r.PhysOffset, v.TotalSize(), r.Size, len(r.Bytes))
	}
	if v.QueueOffset() != r.QueueOffset || v.PhysicalOffset() != r.PhysOffset || v.StoreTimestamp() != r.StoreTimestamp {
		h.t.Fatalf("record at %d: stamped (qo %d, phys %d, ts %d), reported (qo %d, phys %d, ts %d)", r.PhysOffset,
			v.QueueOffset(), v.PhysicalOffset(), v.StoreTimestamp(), r.QueueOffset, r.PhysOffset, r.StoreTimestamp)
	}
	if string(v.Topic()) != r.Topic || v.QueueID() != r.QueueID {
		h.t.Fatalf("record at %d: %s/%d, want %s/%d", r.PhysOffset, v.Topic(), v.QueueID(), r.Topic, r.QueueID)
	}
	// Everything but the stamped fields and the CRC entry is what ingress encoded.
	n := commitlog.PosQueueOffset
	if !bytes.Equal(v.Bytes()[:n], r.Bytes[:n]) {
		h.t.Fatalf("record at %d: header changed", r.PhysOffset)
	}
}

func TestAppenderQueueOffsetsAndStamps(t *testing.T) {
	h := start(t, nil, Config{
		MaxLag: 1 << 30, MaxBatch: 4,
		NextOffsets: map[QueueKey]int64{{"A", 0}: 5, {"B", 1}: 100},
	})
	type want struct {
		topic string
		queue int32
		qo    int64
	}
	var all []*stages.Record
	rounds := [][]want{
		{{"A", 0, 5}, {"A", 1, 0}, {"B", 1, 100}, {"A", 0, 6}},
		{{"A", 0, 7}},
		{{"B", 1, 101}, {"B", 1, 102}, {"A", 1, 1}, {"C", 0, 0}},
	}
	var end int64
	for i, ws := range rounds {
		var recs []stages.Record
		for j, w := range ws {
			recs = append(recs, encode(t, w.topic, w.queue, fmt.Sprintf("body %d.%d", i, j), "", 0))
		}
		ts := h.clock.add(time.Second)
		b := h.round(recs...)
		for j, w := range ws {
			r := &b.Records[j]
			if r.Topic != w.topic || r.QueueOffset != w.qo {
				t.Fatalf("round %d record %d: %s/%d got queue offset %d, want %d", i, j, r.Topic, r.QueueID, r.QueueOffset, w.qo)
			}
			if r.PhysOffset != end {
				t.Fatalf("round %d record %d: phys %d, want %d (records back to back)", i, j, r.PhysOffset, end)
			}
			if r.StoreTimestamp != ts {
				t.Fatalf("round %d record %d: store timestamp %d, want %d", i, j, r.StoreTimestamp, ts)
			}
			end = r.End()
			all = append(all, r)
		}
		if b.End != end {
			t.Fatalf("round %d: batch End %d, want %d", i, b.End, end)
		}
		if got := h.written.Load(); got != h.log.MaxOffset() || got != end {
			t.Fatalf("round %d: Written %d, log end %d, want %d", i, got, h.log.MaxOffset(), end)
		}
	}
	for _, r := range all {
		h.check(r)
	}
	st := h.app.Stats()
	if st.Records != int64(len(all)) || st.Batches != 3 || st.Bytes != end || st.Errors != 0 {
		t.Fatalf("stats %+v", st)
	}
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
}

// TestAppenderTransactionalRecordsTakeNoQueueOffset: as RocketMQ's doAppend, a PREPARED or
// ROLLBACK record is stamped with queue offset 0 and does not advance its queue's counter (it
// never gets a ConsumeQueue unit, so counting it would leave a gap the dispatcher refuses).
func TestAppenderTransactionalRecordsTakeNoQueueOffset(t *testing.T) {
	h := start(t, nil, Config{MaxLag: 1 << 30, NextOffsets: map[QueueKey]int64{{"T", 0}: 3}})
	b := h.round(
		encode(t, "T", 0, "normal", "", commitlog.TxNotType),
		encode(t, "T", 0, "half", "", commitlog.TxPrepared),
		encode(t, "T", 0, "commit", "", commitlog.TxCommit),
		encode(t, "T", 0, "rollback", "", commitlog.TxRollback),
		encode(t, "T", 0, "normal again", "", commitlog.TxNotType),
	)
	for i, want := range []int64{3, 0, 4, 0, 5} {
		r := &b.Records[i]
		if r.QueueOffset != want {
			t.Errorf("record %d: queue offset %d, want %d", i, r.QueueOffset, want)
		}
		h.check(r)
	}
}

func TestAppenderDedupe(t *testing.T) {
	h := start(t, nil, Config{MaxLag: 1 << 30, DedupeWindow: time.Minute, DedupeMax: 100})

	b1 := h.round(
		encode(t, "A", 0, "first", "id-1", 0),
		encode(t, "A", 0, "second", "id-2", 0),
		encode(t, "A", 2, "first again, another queue", "id-1", 0),
		encode(t, "B", 0, "same id, other topic", "id-1", 0),
	)
	orig := b1.Records[0]
	dup := b1.Records[2]
	if !dup.Duplicate || dup.Err != nil {
		t.Fatalf("same id in one batch: duplicate=%v err=%v", dup.Duplicate, dup.Err)
	}
	if dup.PhysOffset != orig.PhysOffset || dup.Size != orig.Size || dup.QueueOffset != orig.QueueOffset ||
		dup.QueueID != orig.QueueID || dup.StoreTimestamp != orig.StoreTimestamp {
		t.Fatalf("duplicate %+v does not carry the first's position %+v", dup, orig)
	}
	other := b1.Records[3]
	if other.Duplicate {
		t.Fatal("the same id in another topic was taken for a duplicate")
	}
	h.check(&b1.Records[0])
	h.check(&b1.Records[1])
	h.check(&other)
	if b1.Records[1].QueueOffset != 1 {
		t.Fatalf("second record of A/0: queue offset %d, want 1", b1.Records[1].QueueOffset)
	}
	end := h.log.MaxOffset()
	if want := orig.End() - orig.PhysOffset + b1.Records[1].End() - b1.Records[1].PhysOffset + other.End() - other.PhysOffset; end != want {
		t.Fatalf("log holds %d bytes, want %d: the duplicate was written", end, want)
	}

	// Across batches: a batch of duplicates only waits for the originals.
	h.clock.add(30 * time.Second)
	b2 := h.round(encode(t, "A", 0, "retry", "id-1", 0))
	if r := b2.Records[0]; !r.Duplicate || r.PhysOffset != orig.PhysOffset || r.QueueOffset != orig.QueueOffset {
		t.Fatalf("across batches: %+v", r)
	}
	if b2.End != orig.End() {
		t.Fatalf("batch of one duplicate: End %d, want the original's end %d", b2.End, orig.End())
	}
	if h.log.MaxOffset() != end {
		t.Fatal("a duplicate was written")
	}
	// The next new record of A/0 takes the next offset: duplicates use none.
	b3 := h.round(encode(t, "A", 0, "new", "id-3", 0))
	if r := b3.Records[0]; r.Duplicate || r.QueueOffset != 2 {
		t.Fatalf("new record after duplicates: duplicate=%v queue offset %d, want 2", r.Duplicate, r.QueueOffset)
	}
	st := h.app.Stats()
	if st.Duplicates != 2 || st.Records != 4 || st.DedupeSize != 4 {
		t.Fatalf("stats %+v", st)
	}
}

func TestAppenderDedupeWindowExpiry(t *testing.T) {
	h := start(t, nil, Config{MaxLag: 1 << 30, DedupeWindow: time.Minute, DedupeMax: 100})
	first := h.round(encode(t, "T", 0, "m", "id", 0)).Records[0]

	h.clock.add(time.Minute) // exactly the window: still remembered
	if r := h.round(encode(t, "T", 0, "m", "id", 0)).Records[0]; !r.Duplicate || r.PhysOffset != first.PhysOffset {
		t.Fatalf("at the window's end: %+v", r)
	}
	h.clock.add(time.Millisecond) // past it: forgotten, stored anew
	r := h.round(encode(t, "T", 0, "m", "id", 0)).Records[0]
	if r.Duplicate || r.PhysOffset == first.PhysOffset || r.QueueOffset != 1 {
		t.Fatalf("past the window: duplicate=%v phys %d queue offset %d", r.Duplicate, r.PhysOffset, r.QueueOffset)
	}
	h.check(&r)
	// The new copy is remembered from its own time on.
	h.clock.add(59 * time.Second)
	if d := h.round(encode(t, "T", 0, "m", "id", 0)).Records[0]; !d.Duplicate || d.PhysOffset != r.PhysOffset {
		t.Fatalf("the second copy is not remembered: %+v", d)
	}
}

// TestAppenderDedupeMax: without a store to look ids up in (no Lookup: no IndexFile), the oldest
// id is forgotten past DedupeMax, and every id forgotten within its window is counted.
func TestAppenderDedupeMax(t *testing.T) {
	h := start(t, nil, Config{MaxLag: 1 << 30, DedupeWindow: time.Hour, DedupeMax: 2})
	b := h.round(
		encode(t, "T", 0, "a", "a", 0),
		encode(t, "T", 0, "b", "b", 0),
		encode(t, "T", 0, "c", "c", 0), // pushes a out
	)
	if st := h.app.Stats(); st.DedupeSize != 2 || st.DedupeEvicted != 1 {
		t.Fatalf("dedupe holds %d ids, %d dropped early; want 2 and 1", st.DedupeSize, st.DedupeEvicted)
	}
	r := h.round(encode(t, "T", 0, "c", "c", 0), encode(t, "T", 0, "a", "a", 0))
	if c := r.Records[0]; !c.Duplicate || c.PhysOffset != b.Records[2].PhysOffset {
		t.Fatalf("newest id forgotten: %+v", c)
	}
	if a := r.Records[1]; a.Duplicate || a.QueueOffset != 3 {
		t.Fatalf("oldest id should be forgotten past DedupeMax: duplicate=%v queue offset %d", a.Duplicate, a.QueueOffset)
	}
	// Storing a again pushed b out.
	if got := h.round(encode(t, "T", 0, "b", "b", 0)).Records[0]; got.Duplicate {
		t.Fatal("b should have been pushed out by the new a")
	}
	if st := h.app.Stats(); st.DedupeEvicted != 3 || st.DedupeLookups != 0 {
		t.Fatalf("stats %+v, want 3 ids dropped early, no lookups", st)
	}
}

// storeIndex stands in for the IndexFile behind Config.Lookup: the records the test saw stored,
// by topic and id, found from since on. The engine's tests run the real one.
type storeIndex struct {
	recs    []stages.Record
	lookups int
}

func (s *storeIndex) add(b *stages.Batch) *stages.Batch {
	for _, r := range b.Records {
		if r.Err == nil && !r.Duplicate {
			s.recs = append(s.recs, r)
		}
	}
	return b
}

func (s *storeIndex) lookup(topic, id string, since int64) (Stored, bool) {
	s.lookups++
	for _, r := range s.recs {
		if r.Topic == topic && r.MsgID == id && r.StoreTimestamp >= since {
			return Stored{PhysOffset: r.PhysOffset, Size: r.Size, QueueOffset: r.QueueOffset, StoreTimestamp: r.StoreTimestamp,
				QueueID: r.QueueID}, true
		}
	}
	return Stored{}, false
}

// TestAppenderDedupeMaxLooksUpTheStore: with a store to look ids up in, an id pushed out of
// memory past DedupeMax is still a duplicate for its whole window: a retry that its producer did
// not look up (stamp 0) is looked up by the writer and answered with the first copy's position;
// one whose producer looked up every id dropped (its stamp) is not looked up again; past the
// window nothing is looked up.
func TestAppenderDedupeMaxLooksUpTheStore(t *testing.T) {
	idx := &storeIndex{}
	h := start(t, nil, Config{MaxLag: 1 << 30, DedupeWindow: time.Minute, DedupeMax: 2, Lookup: idx.lookup})
	first := idx.add(h.round(
		encode(t, "T", 0, "a", "a", 0),
		encode(t, "T", 0, "b", "b", 0),
		encode(t, "T", 0, "c", "c", 0), // pushes a out of memory
	))
	if st := h.app.Stats(); st.DedupeSize != 2 || st.DedupeEvicted != 1 {
		t.Fatalf("stats %+v, want 2 ids held, 1 dropped", st)
	}
	if checked, until := h.app.Forgotten(); checked != 1 || until != h.clock.now().Add(time.Minute).UnixNano() {
		t.Fatalf("Forgotten() = %d, %d; want id 1 (a) checked, for a minute", checked, until)
	}
	h.clock.add(59 * time.Second)
	retry := h.round(encode(t, "T", 0, "a", "a", 0)).Records[0]
	if !retry.Duplicate || retry.PhysOffset != first.Records[0].PhysOffset || retry.QueueOffset != 0 {
		t.Fatalf("a retry of a, out of memory but within its window: duplicate %v at %d (queue offset %d), want a duplicate of the first at %d",
			retry.Duplicate, retry.PhysOffset, retry.QueueOffset, first.Records[0].PhysOffset)
	}
	if st := h.app.Stats(); st.DedupeLookups != 1 || st.DedupeFound != 1 || idx.lookups != 1 {
		t.Fatalf("stats %+v, %d lookups; want one lookup, found", st, idx.lookups)
	}
	// The producer looked a up itself (stamp 1 >= a's sequence): not looked up again.
	checkedRetry := encode(t, "T", 0, "a", "a", 0)
	checkedRetry.DedupeChecked = 1
	if r := h.round(checkedRetry).Records[0]; r.Duplicate || idx.lookups != 1 {
		t.Fatalf("a record its producer looked up: duplicate %v, %d lookups", r.Duplicate, idx.lookups)
	}
	h.clock.add(2 * time.Second) // a's window is over
	if r := h.round(encode(t, "T", 0, "b", "b", 0)).Records[0]; r.Duplicate || idx.lookups != 1 {
		t.Fatalf("past the window: duplicate %v, %d lookups", r.Duplicate, idx.lookups)
	}
}

// TestAppenderDedupeWaitsForDispatch: with a store to look ids up in, ids leave memory only once
// dispatched; a round that would push undispatched ids out waits for dispatch first, so memory
// stays within DedupeMax plus one round.
func TestAppenderDedupeWaitsForDispatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &fakeLog{}
		in := make(chan *stages.Batch, 4)
		out := make(chan *stages.Batch, 8)
		written, dispatched := stages.NewWatermark(0), stages.NewWatermark(0)
		idx := &storeIndex{}
		a := New(Config{Log: log, In: in, Out: out, Written: written, Dispatched: dispatched, MaxLag: 1 << 30,
			DedupeWindow: time.Hour, DedupeMax: 2, Lookup: idx.lookup})
		done := make(chan error, 1)
		go func() { done <- a.Run(context.Background()) }()
		rec := func(id string) stages.Record { return stages.Record{Bytes: make([]byte, 100), Topic: "T", MsgID: id} }
		in <- &stages.Batch{Records: []stages.Record{rec("a"), rec("b"), rec("c")}}
		synctest.Wait()
		if st := a.Stats(); st.DedupeSize != 3 || st.DedupeEvicted != 0 || written.Load() != 300 {
			t.Fatalf("nothing dispatched: stats %+v, written %d; want all 3 ids held", st, written.Load())
		}
		in <- &stages.Batch{Records: []stages.Record{rec("d")}}
		synctest.Wait()
		if written.Load() != 300 {
			t.Fatal("the round that pushes out undispatched ids went ahead")
		}
		dispatched.Advance(200) // a and b: what d's round pushes out
		synctest.Wait()
		if st := a.Stats(); written.Load() != 400 || st.DedupeSize != 2 || st.DedupeEvicted != 2 {
			t.Fatalf("after dispatch: stats %+v, written %d", st, written.Load())
		}
		close(in)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}

func TestAppenderDedupeOff(t *testing.T) {
	h := start(t, nil, Config{MaxLag: 1 << 30}) // window 0: off
	b := h.round(encode(t, "T", 0, "a", "id", 0), encode(t, "T", 0, "a", "id", 0))
	if b.Records[1].Duplicate || b.Records[1].QueueOffset != 1 {
		t.Fatalf("dedupe off, yet %+v", b.Records[1])
	}
}

// gateFunc is a Gate from a function.
type gateFunc func() error

func (f gateFunc) Admit() error { return f() }

func (f gateFunc) LogFull(error) {}

func TestAppenderGateRefusesBatch(t *testing.T) {
	full := errors.New("disk above the high-water mark")
	var refuse atomic.Bool
	refuse.Store(true)
	h := start(t, nil, Config{
		MaxLag: 1 << 30, DedupeWindow: time.Minute, DedupeMax: 10,
		Gate: gateFunc(func() error {
			if refuse.Load() {
				return full
			}
			return nil
		}),
	})
	pre := errors.New("could not encode")
	b := h.round(encode(t, "T", 0, "a", "id-a", 0), stages.Record{Topic: "T", Err: pre}, encode(t, "T", 0, "b", "", 0))
	if !errors.Is(b.Records[0].Err, full) || !errors.Is(b.Records[2].Err, full) {
		t.Fatalf("gate error not given to every record: %v, %v", b.Records[0].Err, b.Records[2].Err)
	}
	if !errors.Is(b.Records[1].Err, pre) {
		t.Fatalf("a record's own error was replaced: %v", b.Records[1].Err)
	}
	if h.log.MaxOffset() != 0 || h.written.Load() != 0 || b.End != 0 {
		t.Fatalf("refused batch wrote: log end %d, Written %d, End %d", h.log.MaxOffset(), h.written.Load(), b.End)
	}
	refuse.Store(false)
	ok := h.round(encode(t, "T", 0, "a", "id-a", 0))
	r := ok.Records[0]
	if r.Err != nil || r.Duplicate || r.QueueOffset != 0 {
		t.Fatalf("after the gate opened: err=%v duplicate=%v queue offset %d (a refused record must not be remembered nor take an offset)",
			r.Err, r.Duplicate, r.QueueOffset)
	}
	h.check(&r)
	if st := h.app.Stats(); st.Errors != 2 || st.Records != 1 {
		t.Fatalf("stats %+v", st)
	}
	if err := h.stop(); err != nil {
		t.Fatalf("the appender stopped on a gate error: %v", err)
	}
}

// TestAppenderDiskFull fills a Mem whose capacity holds one segment: the roll to the second fails
// (ENOSPC), the records that needed it are marked, and once space returns the writer carries on.
func TestAppenderDiskFull(t *testing.T) {
	mem := vfs.NewMem(vfs.WithCapacity(testFileSize + testFileSize/2))
	h := start(t, mem, Config{MaxLag: 1 << 30, MaxBatch: 1})
	body := string(bytes.Repeat([]byte{'x'}, 1000))
	var recs []stages.Record
	for range 2 * testFileSize / 1000 { // more than a segment holds
		recs = append(recs, encode(t, "T", 0, body, "", 0))
	}
	b := h.round(recs...)
	var okN, failed int
	for i := range b.Records {
		r := &b.Records[i]
		switch {
		case r.Err == nil:
			if failed > 0 {
				t.Fatalf("record %d stored after a failed one", i)
			}
			if r.QueueOffset != int64(okN) {
				t.Fatalf("record %d: queue offset %d, want %d", i, r.QueueOffset, okN)
			}
			okN++
		case errors.Is(r.Err, syscall.ENOSPC):
			failed++
		default:
			t.Fatalf("record %d: %v", i, r.Err)
		}
	}
	if okN == 0 || failed == 0 {
		t.Fatalf("stored %d, failed %d: want both", okN, failed)
	}
	if w := h.written.Load(); w != b.End || w >= testFileSize {
		t.Fatalf("Written %d, batch End %d, segment %d", w, b.End, testFileSize)
	}

	mem.SetCapacity(0) // space returns
	b2 := h.round(encode(t, "T", 0, body, "", 0), encode(t, "T", 0, body, "", 0))
	for i := range b2.Records {
		r := &b2.Records[i]
		if r.Err != nil {
			t.Fatalf("after space returned, record %d: %v", i, r.Err)
		}
		if r.QueueOffset != int64(okN+i) {
			t.Fatalf("after space returned, record %d: queue offset %d, want %d (failed records take none)", i, r.QueueOffset, okN+i)
		}
		h.check(r)
	}
	if b2.Records[0].PhysOffset != testFileSize {
		t.Fatalf("first record after the roll at %d, want %d (the next segment's start)", b2.Records[0].PhysOffset, testFileSize)
	}
	// The log reads back as one sequence, across the blank filler.
	var got []int64
	end, err := h.log.Each(0, h.log.MaxOffset(), commitlog.Check{}, func(phys int64, v commitlog.View) error {
		got = append(got, v.QueueOffset())
		return nil
	})
	if err != nil || end != h.log.MaxOffset() || len(got) != okN+2 {
		t.Fatalf("Each: end %d (log %d), %d records (want %d), err %v", end, h.log.MaxOffset(), len(got), okN+2, err)
	}
	for i, qo := range got {
		if qo != int64(i) {
			t.Fatalf("record %d in the log has queue offset %d", i, qo)
		}
	}
	if err := h.stop(); err != nil {
		t.Fatalf("the appender stopped on a full disk: %v", err)
	}
}

func TestAppenderCleanStop(t *testing.T) {
	h := start(t, nil, Config{MaxLag: 1 << 30})
	h.round(encode(t, "T", 0, "a", "", 0))
	end := h.written.Load()
	if err := h.stop(); err != nil {
		t.Fatalf("Run = %v after In closed", err)
	}
	if _, ok := <-h.kick; ok {
		// A kick may be pending; the channel must be closed behind it.
		if _, ok := <-h.kick; ok {
			t.Fatal("Kick not closed")
		}
	}
	if err := h.written.Err(); !errors.Is(err, stages.ErrClosed) {
		t.Fatalf("Written failed with %v, want ErrClosed", err)
	}
	if err := h.written.Wait(context.Background(), end+1); !errors.Is(err, stages.ErrClosed) {
		t.Fatalf("wait past the end: %v", err)
	}
	if err := h.written.Wait(context.Background(), end); err != nil {
		t.Fatalf("wait at the end: %v", err)
	}
}

func TestAppenderCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &fakeLog{}
		in := make(chan *stages.Batch)
		out := make(chan *stages.Batch)
		written := stages.NewWatermark(0)
		a := New(Config{Log: log, In: in, Out: out, Written: written, Dispatched: stages.NewWatermark(0), MaxLag: 1 << 20})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- a.Run(ctx) }()
		in <- &stages.Batch{Records: []stages.Record{{Bytes: make([]byte, 10)}}}
		synctest.Wait() // blocked handing the batch to a stalled ack stage
		cancel()
		// The batch it took is handed over all the same (the ack stage drains until Out is
		// closed and answers it), then Out is closed.
		if b, ok := <-out; !ok || len(b.Records) != 1 {
			t.Fatalf("after cancel: %v, %v; want the batch it held", b, ok)
		}
		if _, ok := <-out; ok {
			t.Fatal("Out not closed after the cancel")
		}
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("Run = %v", err)
		}
		if err := written.Err(); !errors.Is(err, context.Canceled) {
			t.Fatalf("Written failed with %v, want the cancellation", err)
		}
		if _, ok := <-out; ok {
			t.Fatal("Out not closed")
		}
	})
}

// fakeLog is an in-memory Log for synctest: no locks, no I/O.
type fakeLog struct {
	end       int64
	appends   int
	needsNext bool
}

func (l *fakeLog) Append(rec []byte, queueOffset, storeTimestamp int64, propCRC bool) (int64, error) {
	phys := l.end
	l.end += int64(len(rec))
	l.appends++
	return phys, nil
}
func (l *fakeLog) Commit() error    { return nil }
func (l *fakeLog) MaxOffset() int64 { return l.end }
func (l *fakeLog) NeedsNext() bool  { return l.needsNext }
