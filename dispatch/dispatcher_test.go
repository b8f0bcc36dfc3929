package dispatch

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/internal/store/consumequeue"
	"github.com/rocketstore/engine/internal/store/derive"
	"github.com/rocketstore/engine/internal/store/indexfile"
	"github.com/rocketstore/engine/internal/store/javahash"
	"github.com/rocketstore/engine/internal/vfs"
	"github.com/rocketstore/engine/stages"
)

var (
	bornHost  = netip.MustParseAddrPort("10.0.0.1:40000")
	storeHost = netip.MustParseAddrPort("127.0.0.1:10911")
)

const t0 = 1_700_000_000_000 // store timestamps start here (ms)

// rec is what the test appended, to check the derived files against.
type rec struct {
	phys        int64
	size        int32
	topic       string
	queue       int32
	queueOffset int64
	tx          int32
	tags, uniq  string
	keys        []string
	ts          int64 // store timestamp
}

func (r rec) queued() bool { return r.tx == commitlog.TxNotType || r.tx == commitlog.TxCommit }

// store is a CommitLog, ConsumeQueue store and IndexFile service on one vfs.Mem, written by the
// test the way the appender would.
type store struct {
	t     testing.TB
	log   *commitlog.Log
	cq    *consumequeue.Store
	index *indexfile.Service
	next  map[string]int64
	recs  []rec
	ts    int64
}

func openStore(t testing.TB, fsys vfs.FS, root string, fileSize int64, cqUnits int, geo indexfile.Geometry) *store {
	t.Helper()
	log, err := commitlog.OpenLog(commitlog.LogOptions{FS: fsys, Dir: root + "/commitlog", FileSize: fileSize})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { log.Close() })
	cq, err := consumequeue.Open(consumequeue.Options{FS: fsys, Root: root, UnitsPerFile: cqUnits})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cq.Load(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cq.Close() })
	names := time.UnixMilli(t0)
	index, err := indexfile.Open(indexfile.Options{
		FS: fsys, Dir: root + "/index", Geometry: geo, Location: time.UTC,
		Now: func() time.Time { names = names.Add(time.Second); return names },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { index.Close() })
	return &store{t: t, log: log, cq: cq, index: index, next: make(map[string]int64), ts: t0}
}

func newMemStore(t testing.TB) *store {
	return openStore(t, vfs.NewMem(), "/s", 4096, 16, indexfile.Geometry{Slots: 16, Entries: 40})
}

// add appends one record, stamped as the appender stamps it (queue offset 0 and none taken for
// PREPARED and ROLLBACK, as RocketMQ).
func (s *store) add(topic string, queue int32, tx int32, tags, uniq string, keys []string, body string) rec {
	s.t.Helper()
	var props []byte
	if uniq != "" {
		props = commitlog.AppendProperty(props, commitlog.PropUniqKey, uniq)
	}
	if tags != "" {
		props = commitlog.AppendProperty(props, commitlog.PropTags, tags)
	}
	if len(keys) > 0 {
		props = commitlog.AppendProperty(props, commitlog.PropKeys, strings.Join(keys, " "))
	}
	m := commitlog.Message{
		Topic: topic, QueueID: queue, SysFlag: tx, BornTimestamp: t0, BornHost: bornHost, StoreHost: storeHost,
		Body: []byte(body), Properties: props,
	}
	b, err := commitlog.AppendRecord(nil, &m, commitlog.EncodeOptions{PropCRC: true})
	if err != nil {
		s.t.Fatal(err)
	}
	r := rec{topic: topic, queue: queue, tx: tx, tags: tags, uniq: uniq, keys: keys, size: int32(len(b))}
	if r.queued() {
		k := fmt.Sprintf("%s/%d", topic, queue)
		r.queueOffset = s.next[k]
		s.next[k]++
	}
	s.ts++
	r.ts = s.ts
	if r.phys, err = s.log.Append(b, r.queueOffset, s.ts, true); err != nil {
		s.t.Fatal(err)
	}
	s.recs = append(s.recs, r)
	return r
}

// fill appends n ordinary records over topics A and B, queues 0 and 1.
func (s *store) fill(n int) {
	for i := range n {
		topic := []string{"A", "B"}[i%2]
		s.add(topic, int32(i/2%2), commitlog.TxNotType, fmt.Sprintf("tag%d", i%3), fmt.Sprintf("uniq-%d", len(s.recs)),
			[]string{fmt.Sprintf("key-%d", len(s.recs)), "shared"}, strings.Repeat("b", 100+i%7*30))
	}
}

// checkQueues verifies that every queued record has its unit and that the queues hold nothing else.
func (s *store) checkQueues() {
	s.t.Helper()
	counts := make(map[string]int64)
	for _, r := range s.recs {
		if !r.queued() {
			continue
		}
		counts[fmt.Sprintf("%s/%d", r.topic, r.queue)]++
		cq := s.cq.Find(r.topic, r.queue)
		if cq == nil {
			s.t.Fatalf("no consumequeue %s/%d", r.topic, r.queue)
		}
		u, err := cq.Unit(r.queueOffset)
		if err != nil {
			s.t.Fatalf("%s/%d unit %d: %v", r.topic, r.queue, r.queueOffset, err)
		}
		var tags int64
		if r.tags != "" {
			tags = javahash.TagsCode(r.tags)
		}
		if want := (consumequeue.Unit{Phys: r.phys, Size: r.size, TagsCode: tags}); u != want {
			s.t.Fatalf("%s/%d unit %d = %+v, want %+v", r.topic, r.queue, r.queueOffset, u, want)
		}
	}
	for _, cq := range s.cq.Queues() {
		k := fmt.Sprintf("%s/%d", cq.Topic(), cq.QueueID())
		if got := cq.MaxOffset(); got != counts[k] {
			s.t.Fatalf("queue %s holds %d units, want %d", k, got, counts[k])
		}
	}
}

// lookup returns the CommitLog offsets the index has for key in topic.
func (s *store) lookup(topic, key string) []int64 {
	s.t.Helper()
	res, err := s.index.Query(nil, topic, key, 64, 0, math.MaxInt64)
	if err != nil {
		s.t.Fatal(err)
	}
	return res.PhyOffsets
}

// checkIndex verifies that the keys of every indexed record find it, and that rolled-back ones
// are not found.
func (s *store) checkIndex() {
	s.t.Helper()
	for _, r := range s.recs {
		for _, key := range append([]string{r.uniq}, r.keys...) {
			if key == "" || key == "shared" {
				continue
			}
			found := slices.Contains(s.lookup(r.topic, key), r.phys)
			if want := r.tx != commitlog.TxRollback; found != want {
				s.t.Fatalf("record at %d (tx %#x): key %q found=%v, want %v", r.phys, r.tx, key, found, want)
			}
		}
	}
}

// indexEntries counts the entries of every index file.
func (s *store) indexEntries() int {
	n := 0
	for _, f := range s.index.Files() {
		if c := f.Header().IndexCount; c > 0 {
			n += int(c) - 1
		}
	}
	return n
}

// running is a dispatcher running in the background until the test ends.
type running struct {
	d     *Dispatcher
	limit *stages.Watermark
	done  chan error
}

func startDispatcher(t testing.TB, s *store, log Reader, from int64, step int64) *running {
	t.Helper()
	r := &running{
		d: &Dispatcher{Log: log, Builder: derive.NewBuilder(s.cq, s.index, nil),
			Limit: stages.NewWatermark(from), Dispatched: stages.NewWatermark(from), MaxStep: step},
		limit: stages.NewWatermark(from),
		done:  make(chan error, 1),
	}
	r.d.Limit = r.limit
	go func() { r.done <- r.d.Run(context.Background()) }()
	t.Cleanup(func() {
		r.limit.Fail(stages.ErrClosed)
		<-r.done
	})
	return r
}

// catchUp moves the limit to the log's end and waits for dispatch to get there.
func (r *running) catchUp(t testing.TB, s *store) {
	t.Helper()
	end := s.log.MaxOffset()
	r.limit.Advance(end)
	if err := r.d.Dispatched.Wait(context.Background(), end); err != nil {
		t.Fatalf("waiting for dispatch to reach %d: %v", end, err)
	}
	if got := r.d.Dispatched.Load(); got != end {
		t.Fatalf("Dispatched %d, log end %d", got, end)
	}
}

func TestDispatchBuildsQueuesAndIndex(t *testing.T) {
	s := newMemStore(t)
	r := startDispatcher(t, s, s.log, 0, 0)
	s.fill(25)
	r.catchUp(t, s)
	s.fill(40) // a second round, continuing every queue
	r.catchUp(t, s)

	if n := len(s.log.Queue().Files()); n < 3 {
		t.Fatalf("the log has %d segments: the test should cross blank fillers", n)
	}
	crossed := 0
	for _, rc := range s.recs {
		if rc.phys%s.log.FileSize() == 0 && rc.phys > 0 {
			crossed++
		}
	}
	if crossed < 2 {
		t.Fatalf("%d records start a segment", crossed)
	}
	s.checkQueues()
	s.checkIndex()
	if got := s.lookup("A", "shared"); len(got) != 33 {
		t.Fatalf("key shared in topic A: %d offsets, want 33", len(got))
	}
	if len(s.index.Files()) < 2 {
		t.Fatal("the index never rolled: the test should cover a full file")
	}
	last := s.recs[len(s.recs)-1]
	if ts := r.d.LastStoreTimestamp(); ts != t0+int64(len(s.recs)) {
		t.Fatalf("LastStoreTimestamp %d, want the last record's %d (at %d)", ts, t0+int64(len(s.recs)), last.phys)
	}
	if r.d.IndexFilled() == 0 {
		t.Fatal("IndexFilled not reported after the index rolled")
	}
}

// TestDispatchTransactions: as RocketMQ, only normal and committed records get a ConsumeQueue
// unit, and all but rolled-back ones are indexed.
func TestDispatchTransactions(t *testing.T) {
	s := newMemStore(t)
	r := startDispatcher(t, s, s.log, 0, 0)
	// A half message first in a queue, then one of each kind: a prepared or rolled-back record
	// that got a unit would take offset 0 of its queue.
	s.add("TX", 0, commitlog.TxPrepared, "t", "half-0", []string{"order-1"}, "half")
	s.add("TX", 1, commitlog.TxRollback, "t", "rb-0", []string{"order-2"}, "rolled back")
	for i, tx := range []int32{commitlog.TxNotType, commitlog.TxPrepared, commitlog.TxCommit, commitlog.TxRollback} {
		for q := range int32(2) {
			s.add("TX", q, tx, "t", fmt.Sprintf("tx-%d-%d", i, q), []string{fmt.Sprintf("k-%d-%d", i, q)}, "body")
		}
	}
	r.catchUp(t, s)
	s.checkQueues()
	s.checkIndex()
	for q := range int32(2) {
		cq := s.cq.Find("TX", q)
		if cq.MaxOffset() != 2 {
			t.Fatalf("TX/%d holds %d units, want 2 (normal and commit)", q, cq.MaxOffset())
		}
	}
	if got := s.lookup("TX", "order-1"); len(got) != 1 || got[0] != s.recs[0].phys {
		t.Fatalf("prepared record not indexed: %v", got)
	}
	if got := s.lookup("TX", "order-2"); len(got) != 0 {
		t.Fatalf("rolled-back record indexed: %v", got)
	}
}

// steppedReader hands each Each call over to the test: a round starts when the test sends on
// start, and its result comes back on rounds; the records it visited are kept.
type steppedReader struct {
	log    Reader
	start  chan struct{}
	rounds chan round
}

type round struct {
	from, end int64
	applied   []int64
	err       error
}

func (r *steppedReader) Each(from, limit int64, chk commitlog.Check, fn func(int64, commitlog.View) error) (int64, error) {
	<-r.start
	var applied []int64
	end, err := r.log.Each(from, limit, chk, func(phys int64, v commitlog.View) error {
		err := fn(phys, v)
		if err == nil {
			applied = append(applied, phys)
		}
		return err
	})
	r.rounds <- round{from, end, applied, err}
	return end, err
}

// TestDispatchMaxStep: a backlog far over MaxStep is dispatched in several rounds, each applying
// only records that start within MaxStep of where it began, and Dispatched moves after each one.
func TestDispatchMaxStep(t *testing.T) {
	const step = 1000
	s := newMemStore(t)
	s.fill(60)
	end := s.log.MaxOffset()
	sr := &steppedReader{log: s.log, start: make(chan struct{}), rounds: make(chan round)}
	r := startDispatcher(t, s, sr, 0, step)
	r.limit.Advance(end)

	var next int64 // where the next round must start
	var applied []int64
	rounds := 0
	for next < end {
		if rounds++; rounds > 200 {
			t.Fatal("too many rounds")
		}
		sr.start <- struct{}{}
		// The previous round's advance happened before this round started, and this one's
		// cannot happen before its result is taken below.
		if got := r.d.Dispatched.Load(); got != next {
			t.Fatalf("round %d: Dispatched %d, want %d", rounds, got, next)
		}
		rd := <-sr.rounds
		if rd.from != next || rd.end <= rd.from || len(rd.applied) == 0 {
			t.Fatalf("round %d: [%d, %d) after %d, %d records", rounds, rd.from, rd.end, next, len(rd.applied))
		}
		if last := rd.applied[len(rd.applied)-1]; last >= rd.from+step {
			t.Fatalf("round %d from %d applied a record at %d, past MaxStep", rounds, rd.from, last)
		}
		applied = append(applied, rd.applied...)
		next = rd.end
	}
	if err := r.d.Dispatched.Wait(context.Background(), end); err != nil {
		t.Fatal(err)
	}
	if minRounds := int(end / (step + 500)); rounds < minRounds {
		t.Fatalf("%d rounds for %d bytes with MaxStep %d", rounds, end, step)
	}
	var want []int64
	for _, rc := range s.recs {
		want = append(want, rc.phys)
	}
	if !slices.Equal(applied, want) {
		t.Fatalf("records applied %v, want each once in order %v", applied, want)
	}
	s.checkQueues()
	s.checkIndex()
}

// TestDispatchBlankFillerAtLimit: a limit that ends exactly at a segment's end (after its blank
// filler) is reached, and dispatch goes on from the next segment.
func TestDispatchBlankFillerAtLimit(t *testing.T) {
	s := newMemStore(t)
	r := startDispatcher(t, s, s.log, 0, 0)
	for s.log.Queue().Last() == nil || len(s.log.Queue().Files()) < 2 {
		if len(s.recs) > 100 {
			t.Fatal("no roll")
		}
		s.fill(1)
	}
	segEnd := s.log.FileSize()
	// Dispatch up to the end of the first segment only: the blank filler is the last thing below.
	r.limit.Advance(segEnd)
	if err := r.d.Dispatched.Wait(context.Background(), segEnd); err != nil {
		t.Fatal(err)
	}
	if got := r.d.Dispatched.Load(); got != segEnd {
		t.Fatalf("Dispatched %d, want the segment end %d", got, segEnd)
	}
	r.catchUp(t, s)
	s.checkQueues()
	s.checkIndex()
}

// TestDispatchTwiceIsHarmless re-dispatches the whole log over the files already built (as
// recovery does from an old checkpoint): the ConsumeQueues are unchanged, and the index gains
// nothing but the entries of the record at its end, which RocketMQ's rule (skip offsets below the
// last file's endPhyOffset) re-indexes.
func TestDispatchTwiceIsHarmless(t *testing.T) {
	s := newMemStore(t)
	r := startDispatcher(t, s, s.log, 0, 0)
	s.fill(30)
	r.catchUp(t, s)
	units := snapshotQueues(t, s)
	entries := s.indexEntries()

	again := startDispatcher(t, s, s.log, 0, 0)
	again.catchUp(t, s)
	if got := snapshotQueues(t, s); !equalQueues(got, units) {
		t.Fatalf("consumequeues changed by a second dispatch:\n%v\n%v", got, units)
	}
	last := s.recs[len(s.recs)-1]
	if got, want := s.indexEntries(), entries+1+len(last.keys); got != want {
		t.Fatalf("index holds %d entries after a second dispatch, want %d (+%d for the last record)",
			got, want, 1+len(last.keys))
	}
	s.checkQueues()
	s.checkIndex()

	// Builder.Apply on a record the queues already hold is a no-op for them.
	b := derive.NewBuilder(s.cq, nil, nil)
	if _, err := s.log.Each(0, s.log.MaxOffset(), commitlog.Check{}, b.Apply); err != nil {
		t.Fatal(err)
	}
	if got := snapshotQueues(t, s); !equalQueues(got, units) {
		t.Fatal("consumequeues changed by a third apply")
	}
}

func snapshotQueues(t testing.TB, s *store) map[string][]consumequeue.Unit {
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

func equalQueues(a, b map[string][]consumequeue.Unit) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}

func TestDispatcherStops(t *testing.T) {
	t.Run("clean", func(t *testing.T) {
		s := newMemStore(t)
		s.fill(10)
		d := &Dispatcher{Log: s.log, Builder: derive.NewBuilder(s.cq, s.index, nil),
			Limit: stages.NewWatermark(0), Dispatched: stages.NewWatermark(0)}
		// The limit is closed with records still to dispatch: they are dispatched first.
		d.Limit.Advance(s.log.MaxOffset())
		d.Limit.Fail(stages.ErrClosed)
		if err := d.Run(context.Background()); err != nil {
			t.Fatalf("Run = %v", err)
		}
		if d.Dispatched.Load() != s.log.MaxOffset() || !errors.Is(d.Dispatched.Err(), stages.ErrClosed) {
			t.Fatalf("Dispatched %d (log end %d), err %v", d.Dispatched.Load(), s.log.MaxOffset(), d.Dispatched.Err())
		}
		s.checkQueues()
	})
	t.Run("limit failed", func(t *testing.T) {
		s := newMemStore(t)
		s.fill(3)
		d := &Dispatcher{Log: s.log, Builder: derive.NewBuilder(s.cq, s.index, nil),
			Limit: stages.NewWatermark(0), Dispatched: stages.NewWatermark(0)}
		boom := errors.New("sync failed")
		d.Limit.Fail(boom)
		if err := d.Run(context.Background()); !errors.Is(err, boom) {
			t.Fatalf("Run = %v", err)
		}
		if !errors.Is(d.Dispatched.Err(), boom) || d.Dispatched.Load() != 0 {
			t.Fatalf("Dispatched %d, err %v", d.Dispatched.Load(), d.Dispatched.Err())
		}
	})
	t.Run("apply failed", func(t *testing.T) {
		s := newMemStore(t)
		s.fill(4)
		// A record whose queue offset leaves a gap: the ConsumeQueue refuses it.
		s.next["A/0"] += 5
		s.add("A", 0, commitlog.TxNotType, "", "", nil, "gap")
		d := &Dispatcher{Log: s.log, Builder: derive.NewBuilder(s.cq, s.index, nil),
			Limit: stages.NewWatermark(0), Dispatched: stages.NewWatermark(0)}
		d.Limit.Advance(s.log.MaxOffset())
		err := d.Run(context.Background())
		if !errors.Is(err, consumequeue.ErrGap) {
			t.Fatalf("Run = %v, want ErrGap", err)
		}
		if !errors.Is(d.Dispatched.Err(), consumequeue.ErrGap) || d.Dispatched.Load() != 0 {
			t.Fatalf("Dispatched %d, err %v: nothing of a failed round may count", d.Dispatched.Load(), d.Dispatched.Err())
		}
	})
	t.Run("cancel", func(t *testing.T) {
		s := newMemStore(t)
		d := &Dispatcher{Log: s.log, Builder: derive.NewBuilder(s.cq, s.index, nil),
			Limit: stages.NewWatermark(0), Dispatched: stages.NewWatermark(0)}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := d.Run(ctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("Run = %v", err)
		}
	})
}

// noSpaceReader makes fn fail with ENOSPC at the record at phys at, the first failures times.
type noSpaceReader struct {
	Reader
	at       int64
	failures int
}

func (r *noSpaceReader) Each(from, limit int64, chk commitlog.Check, fn func(int64, commitlog.View) error) (int64, error) {
	return r.Reader.Each(from, limit, chk, func(phys int64, v commitlog.View) error {
		if phys == r.at && r.failures > 0 {
			r.failures--
			return fmt.Errorf("consumequeue: reserve: %w", syscall.ENOSPC)
		}
		return fn(phys, v)
	})
}

// TestDispatchPausesOnNoSpace: with NoSpace set, ENOSPC is a pause: what came before the record
// counts, NoSpace hears of the stall once per try and of the end once, the record goes in once
// space is back, and everything is built. When the limit is closed (stopping), ENOSPC ends Run
// at once, cleanly (a SIGTERM on a full disk is a clean stop): Dispatched stays at the record
// that could not be built, and the next start dispatches the rest.
func TestDispatchPausesOnNoSpace(t *testing.T) {
	s := newMemStore(t)
	s.fill(6)
	at := s.recs[3].phys
	var calls []error
	r := &noSpaceReader{Reader: s.log, at: at, failures: 2}
	d := &Dispatcher{Log: r, Builder: derive.NewBuilder(s.cq, s.index, nil),
		Limit: stages.NewWatermark(0), Dispatched: stages.NewWatermark(0),
		NoSpace: func(err error) { calls = append(calls, err) }, RetryNoSpace: time.Millisecond}
	d.Limit.Advance(s.log.MaxOffset())
	done := make(chan error, 1)
	go func() { done <- d.Run(context.Background()) }()
	if err := d.Dispatched.Wait(context.Background(), s.log.MaxOffset()); err != nil {
		t.Fatal(err)
	}
	d.Limit.Fail(stages.ErrClosed)
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
	if len(calls) != 3 || !errors.Is(calls[0], syscall.ENOSPC) || !errors.Is(calls[1], syscall.ENOSPC) || calls[2] != nil {
		t.Fatalf("NoSpace calls %v, want ENOSPC, ENOSPC, nil", calls)
	}
	s.checkQueues()
	s.checkIndex()

	// Stopping: no wait for space, and no error.
	s2 := newMemStore(t)
	s2.fill(4)
	r2 := &noSpaceReader{Reader: s2.log, at: s2.recs[1].phys, failures: 1 << 30}
	d2 := &Dispatcher{Log: r2, Builder: derive.NewBuilder(s2.cq, s2.index, nil),
		Limit: stages.NewWatermark(0), Dispatched: stages.NewWatermark(0),
		NoSpace: func(error) {}, RetryNoSpace: time.Hour}
	d2.Limit.Advance(s2.log.MaxOffset())
	d2.Limit.Fail(stages.ErrClosed)
	if err := d2.Run(context.Background()); err != nil {
		t.Fatalf("Run while stopping = %v, want nil", err)
	}
	if got, want := d2.Dispatched.Load(), s2.recs[1].phys; got != want {
		t.Fatalf("stopped at %d, want %d (the record that could not be built)", got, want)
	}
}
