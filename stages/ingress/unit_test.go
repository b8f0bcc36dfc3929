package ingress

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/internal/store/subjecttags"
	"github.com/rocketstore/engine/internal/vfs"
	"github.com/rocketstore/engine/internal/wire"
	"github.com/rocketstore/engine/stages"
	"github.com/rocketstore/engine/stages/ingress/route"
)

func testRouter(tokens int) *route.Router {
	return route.NewRouter(route.Mapping{TopicTokens: tokens}, 4, "Rmq-Keys", 64, nil)
}

func testBuilder() *propBuilder {
	gen := commitlog.NewUniqKeyGen(netip.MustParseAddr("10.0.0.1"), 1, 2, func() time.Time { return time.Unix(1700000000, 0) })
	return &propBuilder{keysHdr: "Rmq-Keys", tagsHdr: "Rmq-Tags", gen: gen}
}

func msgWith(subject string, hdr nats.Header) *nats.Msg {
	return &nats.Msg{Subject: subject, Header: hdr}
}

func TestHeadersToProperties(t *testing.T) {
	b := testBuilder()
	r := testRouter(0)
	m := msgWith("orders.eu", nats.Header{
		"Nats-Msg-Id":  {"id-1"},
		"Rmq-Keys":     {"k1 k2", "k3"},
		"Rmq-Tags":     {"paid"},
		"Trace":        {"a", "b", "c"},
		"content-type": {"json"},
	})
	props, id, err := b.build(m, r.Route(m.Subject))
	if err != nil {
		t.Fatal(err)
	}
	if id != "id-1" {
		t.Fatalf("msgID %q", id)
	}
	got := commitlog.Properties(props).Map()
	want := map[string]string{
		PropNatsSubject: "orders.eu", "UNIQ_KEY": "id-1", "KEYS": "k1 k2 k3", "TAGS": "paid",
		"Trace": "a", "Trace#2": "b", "Trace#3": "c", "content-type": "json",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("properties\n got %v\nwant %v", got, want)
	}
	// Deterministic bytes: the same headers give the same properties whatever the map order.
	again, _, _ := b.build(m, r.Route(m.Subject))
	for range 20 {
		next, _, _ := b.build(m, r.Route(m.Subject))
		if string(next) != string(again) {
			t.Fatal("properties depend on map order")
		}
	}
}

func TestGeneratedUniqKeyAndTokenTags(t *testing.T) {
	b := testBuilder()
	r := testRouter(1)
	m := msgWith("orders.eu.paid", nil)
	props, id, err := b.build(m, r.Route(m.Subject))
	if err != nil {
		t.Fatal(err)
	}
	p := commitlog.Properties(props)
	uk, _ := p.Get("UNIQ_KEY")
	if id != "" || len(uk) != 32 {
		t.Fatalf("generated UNIQ_KEY %q, msgID %q", uk, id)
	}
	if tags, _ := p.Get("TAGS"); string(tags) != "eu.paid" {
		t.Fatalf("token TAGS %q", tags)
	}
	// A tags header wins over the token rule.
	m.Header = nats.Header{"Rmq-Tags": {"override"}}
	props, _, _ = b.build(m, r.Route(m.Subject))
	if tags, _ := commitlog.Properties(props).Get("TAGS"); string(tags) != "override" {
		t.Fatalf("TAGS %q", tags)
	}
}

func TestHeaderRejects(t *testing.T) {
	b := testBuilder()
	r := testRouter(0)
	for name, hdr := range map[string]nats.Header{
		"0x01 in value":     {"X": {"a\x01b"}},
		"0x02 in value":     {"X": {"a\x02b"}},
		"0x01 in name":      {"X\x01": {"v"}},
		"empty value":       {"X": {""}},
		"invalid UTF-8":     {"X": {"\xff"}},
		"reserved UNIQ_KEY": {"UNIQ_KEY": {"v"}},
		"reserved KEYS":     {"KEYS": {"v"}},
		"reserved TAGS":     {"TAGS": {"v"}},
		"reserved subject":  {PropNatsSubject: {"v"}},
		"reserved crc":      {"__CRC32#": {"v"}},
		"reserved CLUSTER":  {"CLUSTER": {"v"}},
		"reserved WAIT":     {"WAIT": {"v"}},
		"reserved DELAY":    {"DELAY": {"3"}},
		"transient":         {"__RMQ.TRANSIENT.X": {"v"}},
		"value suffix":      {"Trace#2": {"v"}},
		"two msg ids":       {"Nats-Msg-Id": {"a", "b"}},
		"empty msg id":      {"Nats-Msg-Id": {""}},
		"two tags":          {"Rmq-Tags": {"a", "b"}},
		"bad key":           {"Rmq-Keys": {"a", "b\x02"}},
	} {
		_, _, err := b.build(msgWith("s", hdr), r.Route("s"))
		if !errors.Is(err, ErrInvalidHeader) || ReplyCode(err) != wire.CodeInvalid {
			t.Errorf("%s: err = %v, want ErrInvalidHeader (400)", name, err)
		}
	}
	// Allowed: '#' not followed by digits only, and a lone '#'.
	for _, name := range []string{"A#", "#", "A#2b", "A#b2"} {
		if _, _, err := b.build(msgWith("s", nats.Header{name: {"v"}}), r.Route("s")); err != nil {
			t.Errorf("header %q refused: %v", name, err)
		}
	}
}

func TestReplyCode(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int
	}{
		{fmt.Errorf("x: %w", commitlog.ErrInvalidTopic), wire.CodeInvalid},
		{fmt.Errorf("x: %w", commitlog.ErrInvalidProperty), wire.CodeInvalid},
		{fmt.Errorf("x: %w", commitlog.ErrPropertiesTooLarge), wire.CodeInvalid},
		{fmt.Errorf("x: %w", route.ErrInvalidSubject), wire.CodeInvalid},
		{fmt.Errorf("x: %w", ErrInvalidHeader), wire.CodeInvalid},
		{fmt.Errorf("x: %w", commitlog.ErrBodyTooLarge), wire.CodeTooLarge},
		{fmt.Errorf("x: %w", commitlog.ErrRecordTooLarge), wire.CodeTooLarge},
		{fmt.Errorf("x: %w", commitlog.ErrTooLarge), wire.CodeTooLarge},
		{&fs.PathError{Op: "fallocate", Path: "/x", Err: syscall.ENOSPC}, wire.CodeDiskFull},
		{errors.Join(stages.ErrClosed, syscall.ENOSPC), wire.CodeDiskFull},
		{stages.ErrClosed, wire.CodeUnavailable},
		{fmt.Errorf("x: %w", ErrUnavailable), wire.CodeUnavailable},
		{ErrStopped, wire.CodeUnavailable},
		{context.Canceled, wire.CodeUnavailable},
		{context.DeadlineExceeded, wire.CodeUnavailable},
		{codedErr(429), 429},
		{fmt.Errorf("wrapped: %w", codedErr(503)), 503},
		{errors.New("boom"), wire.CodeInternal},
		{syscall.EIO, wire.CodeInternal},
		{nil, wire.CodeInternal},
	} {
		if got := ReplyCode(tc.err); got != tc.want {
			t.Errorf("ReplyCode(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}

type codedErr int

func (e codedErr) Error() string  { return fmt.Sprint("code ", int(e)) }
func (e codedErr) ReplyCode() int { return int(e) }

// TestRecordAckJSON: the hot path's ack (the message id written straight into the JSON) is the
// wire's Ack, byte for byte.
func TestRecordAckJSON(t *testing.T) {
	a := wire.Ack{Topic: "orders_eu", QueueID: 3, QueueOffset: 1 << 40, CommitLogOffset: 8000,
		StoreTimestamp: 1700000000123, Duplicate: true}
	r := stages.Record{Topic: a.Topic, QueueID: a.QueueID, QueueOffset: a.QueueOffset,
		PhysOffset: a.CommitLogOffset, StoreTimestamp: a.StoreTimestamp, Duplicate: true}
	host := netip.MustParseAddrPort("127.0.0.1:10000")
	a.MsgID = commitlog.OffsetMsgID(host, a.CommitLogOffset)
	if hot, want := appendRecordAck(nil, &r, host), wire.AppendAck(nil, &a); string(hot) != string(want) {
		t.Fatalf("appendRecordAck %s\nwant %s", hot, want)
	}
}

func TestEncodeRejects(t *testing.T) {
	in, err := New(Config{Conn: &nats.Conn{}, Out: make(chan *stages.Batch), Workers: 1, Mapping: route.Mapping{TopicTokens: 1}})
	if err != nil {
		t.Fatal(err)
	}
	w := in.workers[0]
	encode := func(m *nats.Msg) error {
		rt := in.router.Route(m.Subject)
		_, err := w.encode(&job{msg: m, route: rt, queue: in.router.Queue(m, rt)}, 1)
		return err
	}
	big := &nats.Msg{Subject: "s", Data: make([]byte, commitlog.DefaultMaxBodySize+1)}
	for _, tc := range []struct {
		name string
		m    *nats.Msg
		is   error
		code int
	}{
		{"properties over 32767", &nats.Msg{Subject: "s", Header: nats.Header{"Big": {strings.Repeat("v", 40000)}}},
			commitlog.ErrPropertiesTooLarge, wire.CodeInvalid},
		{"body over 4 MiB", big, commitlog.ErrBodyTooLarge, wire.CodeTooLarge},
		{"subject not UTF-8", &nats.Msg{Subject: "a.\xff"}, route.ErrInvalidSubject, wire.CodeInvalid},
		{"topic too long", &nats.Msg{Subject: strings.Repeat("%", 43) + ".x"}, route.ErrInvalidSubject, wire.CodeInvalid},
	} {
		if err := encode(tc.m); !errors.Is(err, tc.is) || ReplyCode(err) != tc.code {
			t.Errorf("%s: %v, want %v (%d)", tc.name, err, tc.is, tc.code)
		}
	}
	// The oversized body is refused before a buffer is made for it.
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 10 {
		_ = encode(big)
	}
	runtime.ReadMemStats(&after)
	if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
		t.Errorf("refusing 10 oversized bodies allocated %d bytes", n)
	}
}

// TestCallbackAllocatesNothing: a plain message's way through the callback to its worker's inbox
// allocates nothing (the route is cached; a job that the abort path could answer must not be put
// on the heap for every message because a source answers it through an interface).
func TestCallbackAllocatesNothing(t *testing.T) {
	in, err := New(Config{Conn: &nats.Conn{}, Out: make(chan *stages.Batch), Workers: 1, WorkerQueue: 4})
	if err != nil {
		t.Fatal(err)
	}
	in.abort = make(chan struct{})
	m := &nats.Msg{Subject: "orders.eu", Data: []byte("x")}
	box := in.workers[0].box
	var spare []job
	if n := testing.AllocsPerRun(100, func() {
		in.onMsg(m)
		jobs := box.Take(spare)
		if len(jobs) != 1 {
			t.Fatalf("the inbox holds %d jobs", len(jobs))
		}
		box.Done(jobs)
		spare = jobs[:0]
	}); n != 0 {
		t.Fatalf("%v allocations per message", n)
	}
}

// TestSubjectTagsKeepTheTagsHeader: under the subject-tag rule TAGS is the subject and the tags
// header is stored as an ordinary header; the tag code handed to dispatch is the subject's.
func TestSubjectTagsKeepTheTagsHeader(t *testing.T) {
	set, err := subjecttags.Adopt(vfs.NewMem(), "/store", nil, []string{"device"}, nil, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	r := route.NewRouter(route.Mapping{SubjectTags: set, Patterns: []route.TopicPattern{{Subjects: "device.*.temp", Topic: "device"}}},
		4, "Rmq-Keys", 64, nil)
	b := testBuilder()
	m := msgWith("device.7.temp", nats.Header{"Rmq-Tags": {"hot"}, "Nats-Msg-Id": {"id-1"}})
	props, _, err := b.build(m, r.Route(m.Subject))
	if err != nil {
		t.Fatal(err)
	}
	got := commitlog.Properties(props).Map()
	want := map[string]string{PropNatsSubject: "device.7.temp", "UNIQ_KEY": "id-1", "TAGS": "device.7.temp", "Rmq-Tags": "hot"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("properties\n got %v\nwant %v", got, want)
	}
	if !b.index.Known || b.index.TagsCode != subjecttags.Code("device.7.temp") {
		t.Fatalf("tag code %d, want the subject's %d", b.index.TagsCode, subjecttags.Code("device.7.temp"))
	}
}
