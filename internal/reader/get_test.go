package reader

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rocketstore/engine/internal/natssubject"
	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/internal/store/segment"
	"github.com/rocketstore/engine/internal/vfs"
)

// sent is what a test put, to compare Messages with.
type sent struct {
	msg
	phys, offset, ts int64
}

// putAll puts msgs and returns them with their offsets and store times.
func (s *testStore) putAll(msgs ...msg) []sent {
	var out []sent
	for _, m := range msgs {
		ts := s.clock
		if m.ts != 0 {
			ts = m.ts
		}
		off := s.next[fmt.Sprintf("%s/%d", cmpStr(m.topic, "T"), m.queue)]
		out = append(out, sent{msg: m, phys: s.put(m), offset: off, ts: ts})
	}
	return out
}

func cmpStr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// checkMessage compares a returned Message with what was put.
func checkMessage(t *testing.T, got Message, want sent) {
	t.Helper()
	fail := func(what string, g, w any) {
		t.Helper()
		t.Fatalf("message at offset %d (phys %d): %s = %v, want %v", want.offset, want.phys, what, g, w)
	}
	switch {
	case got.Topic != cmpStr(want.topic, "T"):
		fail("topic", got.Topic, cmpStr(want.topic, "T"))
	case got.QueueID != want.queue:
		fail("queue", got.QueueID, want.queue)
	case got.QueueOffset != want.offset:
		fail("queue offset", got.QueueOffset, want.offset)
	case got.PhysicalOffset != want.phys:
		fail("physical offset", got.PhysicalOffset, want.phys)
	case got.MsgID != commitlog.OffsetMsgID(storeHost, want.phys):
		fail("msg id", got.MsgID, commitlog.OffsetMsgID(storeHost, want.phys))
	case got.StoreTimestamp != want.ts:
		fail("store time", got.StoreTimestamp, want.ts)
	case got.BornTimestamp != want.ts-5 && want.msg.ts == 0:
		fail("born time", got.BornTimestamp, want.ts-5)
	case got.BornHost != testBorn || got.StoreHost != storeHost:
		fail("hosts", []any{got.BornHost, got.StoreHost}, []any{testBorn, storeHost})
	case got.Tags != want.tags || got.Keys != want.keys || got.UniqKey != want.uniq:
		fail("tags/keys/uniq", []string{got.Tags, got.Keys, got.UniqKey}, []string{want.tags, want.keys, want.uniq})
	case !bytes.Equal(got.Body, want.body):
		fail("body", got.Body, want.body)
	case cap(got.Body) != len(got.Body):
		fail("body capacity", cap(got.Body), len(got.Body))
	}
	for _, p := range want.props {
		if got.Properties[p[0]] != p[1] {
			fail("property "+p[0], got.Properties[p[0]], p[1])
		}
	}
	if got.Properties[commitlog.PropTags] != want.tags {
		fail("TAGS property", got.Properties[commitlog.PropTags], want.tags)
	}
	if _, ok := got.Properties[commitlog.PropCRC32]; !ok {
		fail("__CRC32# property", "absent", "present")
	}
}

func get(t *testing.T, r *Reader, req GetRequest) GetResult {
	t.Helper()
	res, err := r.Get(t.Context(), req)
	noErr(t, err)
	return res
}

// mixed puts n messages in T/0 interleaved with messages of T/1 and U/0, with every field
// set, and returns T/0's.
func mixed(s *testStore, n int) []sent {
	var out []sent
	for i := range n {
		tags := []string{"TagA", "TagB", ""}[i%3]
		out = append(out, s.putAll(msg{
			tags: tags, keys: fmt.Sprintf("order-%d order-x", i), uniq: fmt.Sprintf("UNIQ%04d", i),
			body: body(i), props: [][2]string{{"color", fmt.Sprint(i % 5)}, {"nats-subject", "a.b"}},
		})...)
		s.put(msg{queue: 1, body: body(1000 + i)})
		if i%4 == 0 {
			s.put(msg{topic: "U", body: bytes.Repeat([]byte{'u'}, 50)})
		}
	}
	return out
}

func TestGetRoundTrip(t *testing.T) {
	s := newTestStore(t, vfs.NewMem(), "/store", tiny)
	const n = 40
	want := mixed(s, n)
	if n := len(s.log.Queue().Files()); n < 10 {
		t.Fatalf("only %d CommitLog segments: the test should cross many", n)
	}
	var got []Message
	for off := int64(0); ; {
		res := get(t, s.r, GetRequest{Topic: "T", QueueID: 0, Offset: off, Max: 7})
		if res.MinOffset != 0 || res.MaxOffset != n {
			t.Fatalf("bounds [%d, %d)", res.MinOffset, res.MaxOffset)
		}
		if res.Status == OffsetOverflowOne {
			if off != n || res.NextOffset != n || len(res.Messages) != 0 {
				t.Fatalf("at the head: %+v", res)
			}
			break
		}
		if res.Status != Found || len(res.Messages) != min(7, n-int(off)) || res.NextOffset != off+int64(len(res.Messages)) {
			t.Fatalf("get %d: %v, %d messages, next %d", off, res.Status, len(res.Messages), res.NextOffset)
		}
		got = append(got, res.Messages...)
		off = res.NextOffset
	}
	for i := range want {
		checkMessage(t, got[i], want[i])
	}
	if got[3].Properties["color"] != "3" || got[3].Properties["nats-subject"] != "a.b" {
		t.Fatalf("properties %v", got[3].Properties)
	}

	// Without the map, the fields taken from properties are still there.
	res := get(t, s.r, GetRequest{Topic: "T", Offset: 4, Max: 1, NoPropertyMap: true})
	if m := res.Messages[0]; m.Properties != nil || m.Tags != want[4].tags || m.Keys != want[4].keys ||
		m.UniqKey != want[4].uniq || fmt.Sprint(commitlog.Properties(m.RawProperties).Map()) != fmt.Sprint(got[4].Properties) {
		t.Fatalf("NoPropertyMap: %+v", m)
	}

	// Defaults and bounds.
	res = get(t, s.r, GetRequest{Topic: "T", QueueID: 1})
	if len(res.Messages) != DefaultGetMax {
		t.Fatalf("default batch: %d messages", len(res.Messages))
	}
	res = get(t, s.r, GetRequest{Topic: "T", QueueID: 1, Max: 1 << 20})
	if len(res.Messages) != n || res.NextOffset != n {
		t.Fatalf("big batch: %d messages, next %d", len(res.Messages), res.NextOffset)
	}
	size := int(got[0].Size)
	res = get(t, s.r, GetRequest{Topic: "T", QueueID: 0, MaxBytes: 2*size + 1})
	if len(res.Messages) != 2 || res.NextOffset != 2 {
		t.Fatalf("MaxBytes of two records: %d messages, next %d", len(res.Messages), res.NextOffset)
	}
	res = get(t, s.r, GetRequest{Topic: "T", QueueID: 0, MaxBytes: 1})
	if len(res.Messages) != 1 {
		t.Fatalf("MaxBytes 1: %d messages, want the first whatever its size", len(res.Messages))
	}
}

func TestGetStatuses(t *testing.T) {
	s := newTestStore(t, vfs.NewMem(), "/store", tiny)
	for i := range 5 {
		s.put(msg{topic: "Old", body: body(i)})
	}
	mixed(s, 20)
	if _, err := s.cq.FindOrCreate("Empty", 0); err != nil {
		t.Fatal(err)
	}
	for _, req := range []GetRequest{{Topic: "Nope"}, {Topic: "T", QueueID: 7}} {
		if _, err := s.r.Get(t.Context(), req); !errors.Is(err, ErrUnknownQueue) {
			t.Fatalf("%+v: %v, want ErrUnknownQueue", req, err)
		}
	}
	for _, c := range []struct {
		req    GetRequest
		status Status
		next   int64
	}{
		{GetRequest{Topic: "Empty"}, NoMessageInQueue, 0},
		{GetRequest{Topic: "Empty", Offset: 3}, NoMessageInQueue, 0},
		{GetRequest{Topic: "T", Offset: 20}, OffsetOverflowOne, 20},
		{GetRequest{Topic: "T", Offset: 25}, OffsetOverflowBadly, 20},
		{GetRequest{Topic: "T", Offset: -1}, OffsetTooSmall, 0},
	} {
		res := get(t, s.r, c.req)
		if res.Status != c.status || res.NextOffset != c.next || len(res.Messages) != 0 {
			t.Fatalf("%+v: %v next %d, want %v next %d", c.req, res.Status, res.NextOffset, c.status, c.next)
		}
		if c.status.String() == "" || strings.HasPrefix(c.status.String(), "Status(") {
			t.Fatalf("status %d has no name", c.status)
		}
	}

	// Retention deletes the first segments, which hold all of Old and the start of T/0.
	deleted := s.log.Queue().Files()[:4]
	minPhys := deleted[len(deleted)-1].End()
	if _, err := s.log.Queue().DeleteFirst(len(deleted), func(*segment.File) bool { return true }); err != nil {
		t.Fatal(err)
	}
	// Before the ConsumeQueues are corrected, their units point at deleted records.
	res := get(t, s.r, GetRequest{Topic: "Old"})
	if res.Status != OffsetFoundNull || res.NextOffset != 5 {
		t.Fatalf("units of deleted records: %v next %d", res.Status, res.NextOffset)
	}
	res = get(t, s.r, GetRequest{Topic: "T", Max: 100})
	if res.Status != Found || len(res.Messages) == 0 || len(res.Messages) >= 20 || res.Messages[0].PhysicalOffset < minPhys {
		t.Fatalf("after retention: %v, %d messages", res.Status, len(res.Messages))
	}
	first := res.Messages[0].QueueOffset
	// Corrected, the queue starts at its first record still stored.
	noErr(t, s.cq.CorrectMinOffsetAll(s.log.MinOffset()))
	res = get(t, s.r, GetRequest{Topic: "T", Offset: 0})
	if res.Status != OffsetTooSmall || res.NextOffset != first || res.MinOffset != first {
		t.Fatalf("below the corrected min: %v next %d min %d, want next %d", res.Status, res.NextOffset, res.MinOffset, first)
	}
	res = get(t, s.r, GetRequest{Topic: "Old", Offset: 0})
	if res.Status != OffsetTooSmall || res.NextOffset != 5 {
		t.Fatalf("a queue whose records are all gone: %v next %d", res.Status, res.NextOffset)
	}
}

func TestGetTagFilter(t *testing.T) {
	s := newTestStore(t, vfs.NewMem(), "/store", small)
	// "Aa" and "BB" have the same Java hashCode (2112), so the same tags code.
	tags := []string{"Aa", "BB", "Aa", "", "C", "BB", "Aa", "Cc", "BB", ""}
	for i, tg := range tags {
		s.put(msg{tags: tg, body: body(i)})
	}
	u := s.cq.Find("T", 0)
	a, _ := u.Unit(0)
	b, _ := u.Unit(1)
	if a.TagsCode != b.TagsCode || a.TagsCode != 2112 {
		t.Fatalf("tags codes %d and %d, want both 2112", a.TagsCode, b.TagsCode)
	}
	pick := func(want ...string) (offs []int64) {
		for i, tg := range tags {
			for _, w := range want {
				if tg == w {
					offs = append(offs, int64(i))
					break
				}
			}
		}
		return offs
	}
	for _, c := range []struct {
		filter []string
		want   []int64
	}{
		{[]string{"Aa"}, pick("Aa")},
		{[]string{"BB"}, pick("BB")},
		{[]string{"BB", "C"}, pick("BB", "C")},
		{[]string{"", "Aa"}, pick("Aa")},
		{[]string{"Aa", "*"}, pick(tags...)},
		{[]string{""}, pick(tags...)},
		{nil, pick(tags...)},
	} {
		res := get(t, s.r, GetRequest{Topic: "T", Tags: c.filter})
		var offs []int64
		for _, m := range res.Messages {
			offs = append(offs, m.QueueOffset)
		}
		if fmt.Sprint(offs) != fmt.Sprint(c.want) || res.Status != Found || res.NextOffset != int64(len(tags)) {
			t.Fatalf("filter %q: offsets %v next %d, want %v next %d", c.filter, offs, res.NextOffset, c.want, len(tags))
		}
	}
	// A batch full after two matches stops before the third; the units it passed over count.
	res := get(t, s.r, GetRequest{Topic: "T", Tags: []string{"BB"}, Max: 2})
	if len(res.Messages) != 2 || res.Messages[1].QueueOffset != 5 || res.NextOffset != 6 {
		t.Fatalf("Max 2: %d messages, next %d", len(res.Messages), res.NextOffset)
	}
	// Nothing matches: every unit is consumed.
	res = get(t, s.r, GetRequest{Topic: "T", Tags: []string{"X"}, Offset: 2})
	if res.Status != NoMatchedMessage || res.NextOffset != int64(len(tags)) || len(res.Messages) != 0 {
		t.Fatalf("no match: %v next %d", res.Status, res.NextOffset)
	}
	// "Bb" is not "BB", whatever the codes say.
	res = get(t, s.r, GetRequest{Topic: "T", Tags: []string{"Cc"}, Offset: 8})
	if res.Status != NoMatchedMessage || res.NextOffset != 10 {
		t.Fatalf("Cc from 8: %v next %d", res.Status, res.NextOffset)
	}
}

// TestGetScanLimit: a filter that matches nothing reads at most minScanUnits units per Get, and
// says when that limit, not the head of the queue, ended it (ScanStopped), so that a reader
// does not take NO_MATCHED_MESSAGE for "nothing further matches".
func TestGetScanLimit(t *testing.T) {
	s := newTestStore(t, vfs.NewMem(), "/store", geometry{segment: 1 << 20, units: 300})
	for i := range minScanUnits + 50 {
		s.put(msg{tags: "A", body: body(i)})
	}
	s.put(msg{tags: "B", body: body(minScanUnits + 50)})
	res := get(t, s.r, GetRequest{Topic: "T", Tags: []string{"B"}})
	if res.Status != NoMatchedMessage || res.NextOffset != minScanUnits || !res.ScanStopped {
		t.Fatalf("%v next %d stopped %v, want NO_MATCHED_MESSAGE next %d stopped", res.Status, res.NextOffset,
			res.ScanStopped, minScanUnits)
	}
	res = get(t, s.r, GetRequest{Topic: "T", Tags: []string{"B"}, Offset: res.NextOffset})
	if res.NextOffset != minScanUnits+51 || len(res.Messages) != 1 || res.ScanStopped {
		t.Fatalf("second Get: next %d, %d messages, stopped %v", res.NextOffset, len(res.Messages), res.ScanStopped)
	}
	// A scan that reaches the head did not stop early.
	if res = get(t, s.r, GetRequest{Topic: "T", Tags: []string{"C"}, Offset: 100}); res.ScanStopped {
		t.Fatalf("at the head: next %d, stopped", res.NextOffset)
	}
	// Nor one that filled its batch.
	if res = get(t, s.r, GetRequest{Topic: "T", Max: 1}); res.ScanStopped || len(res.Messages) != 1 {
		t.Fatalf("a full batch: stopped %v", res.ScanStopped)
	}
}

// poll starts a long-polling Get and returns a channel with its result; each time the Get is
// about to block, waits gets a value (unbuffered: the Get blocks until the test takes it).
func poll(t *testing.T, ctx context.Context, r *Reader, req GetRequest) (result <-chan GetResult, errc <-chan error, waits <-chan struct{}) {
	t.Helper()
	w := make(chan struct{})
	r.waiting = func() { w <- struct{}{} }
	res, ec := make(chan GetResult, 1), make(chan error, 1)
	go func() {
		got, err := r.Get(ctx, req)
		res <- got
		ec <- err
	}()
	return res, ec, w
}

func TestLongPoll(t *testing.T) {
	s := newTestStore(t, vfs.NewMem(), "/store", small)
	for i := range 3 {
		s.put(msg{body: body(i)})
	}
	long := 10 * time.Minute // never reached: every case ends on an event

	t.Run("woken by its message", func(t *testing.T) {
		res, errc, waits := poll(t, t.Context(), s.r, GetRequest{Topic: "T", Offset: 3, Wait: long})
		<-waits
		s.put(msg{queue: 1, body: body(100)}) // another queue: wakes, reads, waits again
		<-waits
		s.put(msg{body: body(3)})
		got := <-res
		noErr(t, <-errc)
		if got.Status != Found || len(got.Messages) != 1 || !bytes.Equal(got.Messages[0].Body, body(3)) || got.NextOffset != 4 {
			t.Fatalf("%v, %d messages, next %d", got.Status, len(got.Messages), got.NextOffset)
		}
	})
	t.Run("filtered to the head", func(t *testing.T) {
		res, errc, waits := poll(t, t.Context(), s.r, GetRequest{Topic: "T", Offset: 4, Tags: []string{"Aa"}, Wait: long})
		<-waits
		s.put(msg{tags: "BB", body: body(4)}) // same tags code, other tag: read, skipped, waits on
		<-waits
		s.put(msg{tags: "Aa", body: body(5)})
		got := <-res
		noErr(t, <-errc)
		if got.Status != Found || len(got.Messages) != 1 || got.Messages[0].QueueOffset != 5 || got.NextOffset != 6 {
			t.Fatalf("%v, %d messages, next %d", got.Status, len(got.Messages), got.NextOffset)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		s.r.waiting = nil
		got, err := s.r.Get(t.Context(), GetRequest{Topic: "T", Offset: 6, Wait: time.Millisecond})
		noErr(t, err)
		if got.Status != OffsetOverflowOne || got.NextOffset != 6 {
			t.Fatalf("%v next %d", got.Status, got.NextOffset)
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		res, errc, waits := poll(t, ctx, s.r, GetRequest{Topic: "T", Offset: 6, Wait: long})
		<-waits
		cancel()
		if got, err := <-res, <-errc; !errors.Is(err, context.Canceled) || got.Status != OffsetOverflowOne {
			t.Fatalf("%v, %v", got.Status, err)
		}
	})
	t.Run("no wait elsewhere", func(t *testing.T) {
		s.r.waiting = func() { t.Error("waited") }
		for _, off := range []int64{0, 7} { // found, overflow badly
			if _, err := s.r.Get(t.Context(), GetRequest{Topic: "T", Offset: off, Wait: long}); err != nil {
				t.Fatal(err)
			}
		}
		noWatermark := New(s.log, s.cq, s.index, nil, storeHost)
		got, err := noWatermark.Get(t.Context(), GetRequest{Topic: "T", Offset: 6, Wait: long})
		if err != nil || got.Status != OffsetOverflowOne {
			t.Fatalf("without a watermark: %v, %v", got.Status, err)
		}
	})
	t.Run("engine stops", func(t *testing.T) {
		res, errc, waits := poll(t, t.Context(), s.r, GetRequest{Topic: "T", Offset: 6, Wait: long})
		<-waits
		s.dispatched.Fail(nil)
		if got, err := <-res, <-errc; err != nil || got.Status != OffsetOverflowOne {
			t.Fatalf("%v, %v", got.Status, err)
		}
	})
}

func TestLongPollEmptyQueue(t *testing.T) {
	s := newTestStore(t, vfs.NewMem(), "/store", small)
	if _, err := s.cq.FindOrCreate("T", 0); err != nil { // known, never written
		t.Fatal(err)
	}
	res, errc, waits := poll(t, t.Context(), s.r, GetRequest{Topic: "T", Wait: time.Hour})
	<-waits
	s.put(msg{body: body(0)})
	got := <-res
	noErr(t, <-errc)
	if got.Status != Found || len(got.Messages) != 1 {
		t.Fatalf("%v, %d messages", got.Status, len(got.Messages))
	}
}

// TestGetCorrupt: a unit whose record does not match it, or bytes that are no record, are
// ErrCorrupt, never a wrong message.
func TestGetCorrupt(t *testing.T) {
	s := newTestStore(t, vfs.NewMem(), "/store", small)
	var phys []int64
	for i := range 3 {
		phys = append(phys, s.put(msg{body: body(i)}))
	}
	data := s.log.Queue().Files()[0].Data()
	// Record 1 claims another queue offset.
	data[phys[1]+commitlog.PosQueueOffset+7]++
	if _, err := s.r.Get(t.Context(), GetRequest{Topic: "T", Offset: 1}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("wrong queue offset: %v", err)
	}
	data[phys[1]+commitlog.PosQueueOffset+7]--
	// Record 2 has a bad magic code.
	data[phys[2]+commitlog.PosMagic]++
	res, err := s.r.Get(t.Context(), GetRequest{Topic: "T", Offset: 1})
	if !errors.Is(err, ErrCorrupt) || !errors.Is(err, commitlog.ErrCorrupt) {
		t.Fatalf("bad magic: %v", err)
	}
	if len(res.Messages) != 1 || res.NextOffset != 2 {
		t.Fatalf("the record before the damage: %d messages, next %d", len(res.Messages), res.NextOffset)
	}
	if _, err := s.r.Lookup(commitlog.OffsetMsgID(storeHost, phys[2])); !errors.Is(err, ErrNotFound) {
		t.Fatalf("lookup of the damaged record: %v", err)
	}
	if _, err := s.r.OffsetForTime("T", 0, s.clock); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("OffsetForTime over the damaged record: %v", err)
	}
}

// TestGetSubjectFilter: a subject filter returns exactly the messages whose NATS_SUBJECT it
// matches, literal or with wildcards, with the tag filter when both are given; a record without
// the property matches no subject filter, and a filter that matches nothing consumes every unit.
func TestGetSubjectFilter(t *testing.T) {
	s := newTestStore(t, vfs.NewMem(), "/store", small)
	subjects := []string{"device.1.temp", "device.2.temp", "device.1.hum", "", "device.10.temp", "device.1.temp.raw", "device.1.temp"}
	for i, subj := range subjects {
		m := msg{body: body(i)}
		if subj != "" {
			m.props = [][2]string{{natssubject.Property, subj}}
		}
		if i%2 == 0 {
			m.tags = "even"
		}
		s.put(m)
	}
	for _, c := range []struct {
		subject string
		tags    []string
		want    []int64
	}{
		{"device.1.temp", nil, []int64{0, 6}},
		{"device.*.temp", nil, []int64{0, 1, 4, 6}},
		{"device.1.>", nil, []int64{0, 2, 5, 6}},
		{"device.>", nil, []int64{0, 1, 2, 4, 5, 6}},
		{">", nil, []int64{0, 1, 2, 4, 5, 6}},
		{"device.*.temp", []string{"even"}, []int64{0, 4, 6}},
		{"", nil, []int64{0, 1, 2, 3, 4, 5, 6}},
	} {
		res := get(t, s.r, GetRequest{Topic: "T", Subject: c.subject, Tags: c.tags})
		var offs []int64
		for _, m := range res.Messages {
			offs = append(offs, m.QueueOffset)
		}
		if fmt.Sprint(offs) != fmt.Sprint(c.want) || res.NextOffset != int64(len(subjects)) {
			t.Errorf("subject %q tags %q: offsets %v next %d, want %v next %d", c.subject, c.tags, offs, res.NextOffset, c.want, len(subjects))
		}
	}
	res := get(t, s.r, GetRequest{Topic: "T", Subject: "other.>"})
	if res.Status != NoMatchedMessage || res.NextOffset != int64(len(subjects)) || len(res.Messages) != 0 {
		t.Fatalf("no match: %v next %d, %d messages", res.Status, res.NextOffset, len(res.Messages))
	}
}
