package reader

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/internal/store/segment"
	"github.com/rocketstore/engine/internal/vfs"
)

func TestLookup(t *testing.T) {
	s := newTestStore(t, vfs.NewMem(), "/store", tiny)
	want := mixed(s, 12)
	for _, w := range want {
		id := commitlog.OffsetMsgID(storeHost, w.phys)
		m, err := s.r.Lookup(id)
		noErr(t, err)
		checkMessage(t, m, w)
		if m, err = s.r.Lookup(strings.ToLower(id)); err != nil || m.PhysicalOffset != w.phys {
			t.Fatalf("lower-case id: %v", err)
		}
	}
	for _, id := range []string{"", "XYZ", strings.Repeat("G", 32), strings.Repeat("0", 31), "0A0908070001FFFF" + strings.Repeat("0", 16)} {
		if _, err := s.r.Lookup(id); !errors.Is(err, ErrBadMsgID) {
			t.Fatalf("Lookup(%q): %v, want ErrBadMsgID", id, err)
		}
	}
	w := want[5]
	for name, id := range map[string]string{
		"inside a record":    commitlog.OffsetMsgID(storeHost, w.phys+4),
		"past the end":       commitlog.OffsetMsgID(storeHost, s.log.MaxOffset()+100),
		"negative offset":    commitlog.OffsetMsgID(storeHost, -8),
		"another store host": commitlog.OffsetMsgID(testBorn, w.phys),
	} {
		if _, err := s.r.Lookup(id); !errors.Is(err, ErrNotFound) {
			t.Fatalf("%s: %v, want ErrNotFound", name, err)
		}
	}
	// A Reader that names ids with another host still finds ids of the record's own host.
	other := New(s.log, s.cq, s.index, nil, testBorn)
	m, err := other.Lookup(commitlog.OffsetMsgID(storeHost, w.phys))
	noErr(t, err)
	if m.MsgID != commitlog.OffsetMsgID(testBorn, w.phys) {
		t.Fatalf("id %s", m.MsgID)
	}
	// Without a host, ids are the records' own.
	own := New(s.log, s.cq, s.index, nil, netipZero)
	if m, err = own.Lookup(commitlog.OffsetMsgID(storeHost, w.phys)); err != nil || m.MsgID != commitlog.OffsetMsgID(storeHost, w.phys) {
		t.Fatalf("own host: %v %s", err, m.MsgID)
	}
	// Deleted by retention.
	first := s.log.Queue().Files()[0]
	if _, err := s.log.Queue().DeleteFirst(1, func(*segment.File) bool { return true }); err != nil {
		t.Fatal(err)
	}
	if _, err := s.r.Lookup(commitlog.OffsetMsgID(storeHost, first.Base())); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleted: %v", err)
	}
}

// physOf lists the physical offsets of msgs.
func physOf(msgs []Message) []int64 {
	var out []int64
	for _, m := range msgs {
		out = append(out, m.PhysicalOffset)
	}
	return out
}

func query(t *testing.T, r *Reader, req QueryRequest) []int64 {
	t.Helper()
	msgs, err := r.Query(t.Context(), req)
	noErr(t, err)
	return physOf(msgs)
}

func TestQueryByKey(t *testing.T) {
	s := newTestStore(t, vfs.NewMem(), "/store", tiny)
	var k7, shared []int64
	for i := range 20 {
		keys := fmt.Sprintf("k%d  shared", i) // a double space: an empty token, skipped
		p := s.put(msg{keys: keys, uniq: fmt.Sprintf("U%d", i), body: body(i)})
		shared = append(shared, p)
		if i == 7 {
			k7 = append(k7, p)
		}
		s.put(msg{topic: "Other", keys: "shared k7", body: body(i)}) // same keys, other topic
	}
	if n := len(s.index.Files()); n < 10 {
		t.Fatalf("%d index files: the test should cross many", n)
	}
	slices.Reverse(shared)
	if got := query(t, s.r, QueryRequest{Topic: "T", Key: "k7"}); !slices.Equal(got, k7) {
		t.Fatalf("k7: %v, want %v", got, k7)
	}
	if got := query(t, s.r, QueryRequest{Topic: "T", Key: "U7"}); !slices.Equal(got, k7) {
		t.Fatalf("by UNIQ_KEY: %v, want %v", got, k7)
	}
	if got := query(t, s.r, QueryRequest{Topic: "T", Key: "shared"}); !slices.Equal(got, shared) {
		t.Fatalf("shared: %v, want %v (newest first)", got, shared)
	}
	if got := query(t, s.r, QueryRequest{Topic: "T", Key: "shared", Max: 3}); !slices.Equal(got, shared[:3]) {
		t.Fatalf("Max 3: %v, want %v", got, shared[:3])
	}
	if got := query(t, s.r, QueryRequest{Topic: "T", Key: "nope"}); len(got) != 0 {
		t.Fatalf("unknown key: %v", got)
	}
	msgs, err := s.r.Query(t.Context(), QueryRequest{Topic: "Other", Key: "k7"})
	noErr(t, err)
	if len(msgs) != 20 || msgs[0].Topic != "Other" {
		t.Fatalf("other topic: %d messages", len(msgs))
	}
	for _, req := range []QueryRequest{{Key: "k"}, {Topic: "T"}} {
		if _, err := s.r.Query(t.Context(), req); !errors.Is(err, ErrInvalidRequest) {
			t.Fatalf("%+v: %v", req, err)
		}
	}
	noIndex := New(s.log, s.cq, nil, nil, storeHost)
	if _, err := noIndex.Query(t.Context(), QueryRequest{Topic: "T", Key: "k7"}); !errors.Is(err, ErrIndexDisabled) {
		t.Fatalf("no index: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := s.r.Query(ctx, QueryRequest{Topic: "T", Key: "k7"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}

// TestQueryHashCollision: "T#Aa" and "T#BB" have one index hash; only the right key comes back.
func TestQueryHashCollision(t *testing.T) {
	s := newTestStore(t, vfs.NewMem(), "/store", small)
	aa := s.put(msg{keys: "Aa", body: body(0)})
	bb := s.put(msg{keys: "BB", body: body(1)})
	both := s.put(msg{keys: "BB Aa", body: body(2)})
	res, err := s.index.Query(nil, "T", "Aa", 64, 0, math.MaxInt64)
	noErr(t, err)
	if len(res.PhyOffsets) != 4 { // Aa, BB, and both keys of the third message
		t.Fatalf("the index gives %v for Aa: the hashes should collide", res.PhyOffsets)
	}
	if got := query(t, s.r, QueryRequest{Topic: "T", Key: "Aa"}); !slices.Equal(got, []int64{both, aa}) {
		t.Fatalf("Aa: %v, want %v", got, []int64{both, aa})
	}
	if got := query(t, s.r, QueryRequest{Topic: "T", Key: "BB"}); !slices.Equal(got, []int64{both, bb}) {
		t.Fatalf("BB: %v, want %v", got, []int64{both, bb})
	}
}

// TestQueryRounds: a key hidden behind more than a batch of colliding entries is found by the
// second round; behind more than three batches it is not (RocketMQ's bound).
func TestQueryRounds(t *testing.T) {
	s := newTestStore(t, vfs.NewMem(), "/store", geometry{segment: 1 << 20, units: 1000, index: &indexfile4k})
	t0 := s.clock
	old := s.put(msg{keys: "Aa", ts: t0})
	for i := range 70 { // one per second: each round moves End back by whole seconds
		s.put(msg{keys: "BB", ts: t0 + 1000*int64(i+1)})
	}
	if got := query(t, s.r, QueryRequest{Topic: "T", Key: "Aa"}); !slices.Equal(got, []int64{old}) {
		t.Fatalf("behind 70 collisions: %v, want %v", got, []int64{old})
	}
	s2 := newTestStore(t, vfs.NewMem(), "/store2", geometry{segment: 1 << 20, units: 1000, index: &indexfile4k})
	s2.put(msg{keys: "Aa", ts: t0})
	for i := range 3*MaxQueryMessages + 10 {
		s2.put(msg{keys: "BB", ts: t0 + 1000*int64(i+1)})
	}
	if got := query(t, s2.r, QueryRequest{Topic: "T", Key: "Aa"}); len(got) != 0 {
		t.Fatalf("behind %d collisions: %v, want nothing after three rounds", 3*MaxQueryMessages+10, got)
	}
	// Bounded in time, the first round reaches it.
	if got := query(t, s2.r, QueryRequest{Topic: "T", Key: "Aa", End: t0 + 5000}); len(got) != 1 {
		t.Fatalf("with End: %v", got)
	}
}

// TestQueryTimeRange checks Begin and End at their edges: both inclusive, on the index's time
// of an entry, which counts whole seconds from its file's begin timestamp (STORE-FORMAT §4.3,
// §4.4).
func TestQueryTimeRange(t *testing.T) {
	s := newTestStore(t, vfs.NewMem(), "/store", small)
	t0 := s.clock
	first := s.put(msg{keys: "k", ts: t0})         // the file's first entry: index time t0
	second := s.put(msg{keys: "k", ts: t0 + 1500}) // index time t0 + 1000
	third := s.put(msg{keys: "k", ts: t0 + 4000})  // index time t0 + 4000
	for _, c := range []struct {
		begin, end int64
		want       []int64
	}{
		{t0, t0, []int64{first}},
		{t0, t0 + 999, []int64{first}},
		{t0 - 1, t0 - 1, nil},
		{t0 + 1, t0 + 1000, []int64{second}},
		{t0 + 1000, t0 + 1000, []int64{second}},
		{t0 + 1001, t0 + 3999, nil}, // the second message was stored at t0+1500, indexed at t0+1000
		{t0 + 1500, t0 + 1500, nil},
		{t0, t0 + 4000, []int64{third, second, first}},
		{t0 + 4000, 0, []int64{third}}, // End 0: no bound
		{t0 + 4001, 0, nil},
		{0, 0, []int64{third, second, first}},
	} {
		if got := query(t, s.r, QueryRequest{Topic: "T", Key: "k", Begin: c.begin, End: c.end}); !slices.Equal(got, c.want) {
			t.Fatalf("[%+d, %+d]: %v, want %v", c.begin-t0, c.end-t0, got, c.want)
		}
	}
}

func TestOffsetForTimeAndOffsets(t *testing.T) {
	s := newTestStore(t, vfs.NewMem(), "/store", tiny)
	want := mixed(s, 25)
	for _, c := range []struct {
		ts   int64
		want int64
	}{
		{0, 0},
		{want[0].ts, 0},
		{want[0].ts + 1, 1},
		{want[9].ts, 9},
		{want[9].ts - 1, 9},
		{want[24].ts, 24},
		{want[24].ts + 1, 25},
		{math.MaxInt64, 25},
	} {
		got, err := s.r.OffsetForTime("T", 0, c.ts)
		noErr(t, err)
		if got != c.want {
			t.Fatalf("OffsetForTime(%d) = %d, want %d", c.ts-want[0].ts, got, c.want)
		}
	}
	if _, err := s.r.OffsetForTime("T", 9, 0); !errors.Is(err, ErrUnknownQueue) {
		t.Fatalf("unknown queue: %v", err)
	}

	offs, err := s.r.Offsets("T")
	noErr(t, err)
	if len(offs) != 2 || offs[0] != (QueueOffsets{QueueID: 0, Min: 0, Max: 25, MinStoreTime: want[0].ts, MaxStoreTime: want[24].ts}) ||
		offs[1].QueueID != 1 || offs[1].Max != 25 {
		t.Fatalf("offsets %+v", offs)
	}
	if _, err := s.r.Offsets("Nope"); !errors.Is(err, ErrUnknownQueue) {
		t.Fatalf("unknown topic: %v", err)
	}
	topics := s.r.Topics()
	if fmt.Sprint(topics) != "[{T [0 1]} {U [0]}]" {
		t.Fatalf("topics %v", topics)
	}

	// After retention the deleted records count as older than any time.
	noErr(t, deleteFirst(s, 3))
	got, err := s.r.OffsetForTime("T", 0, want[0].ts)
	noErr(t, err)
	if got == 0 || got > 10 {
		t.Fatalf("after retention: %d", got)
	}
	offs, err = s.r.Offsets("T")
	noErr(t, err)
	if offs[0].Min != 0 || offs[0].MinStoreTime != 0 {
		t.Fatalf("uncorrected min %+v", offs[0])
	}
}

// deleteFirst deletes the n oldest CommitLog segments, as retention would.
func deleteFirst(s *testStore, n int) error {
	_, err := s.log.Queue().DeleteFirst(n, func(*segment.File) bool { return true })
	return err
}
