package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/rocketstore/engine/engine/api"
	"github.com/rocketstore/engine/internal/wire"
	"github.com/rocketstore/engine/stages/ingress"
)

// Tests of the read API: a served engine (embedded nats-server on a random loopback port), messages
// stored through NATS requests with acks, read back with api.Client on a connection of its own.
// Nothing waits for time to pass; every wait is for a reply or a channel, bounded by serveTimeout.

// apiTest is a served engine with a publisher connection and a client.
type apiTest struct {
	*served
	nc     *nats.Conn
	client *api.Client
	ctx    context.Context
}

func serveAPI(t *testing.T, opts Options, nopts NATSOptions) *apiTest {
	t.Helper()
	s := serve(t, opts, nopts)
	nc := connect(t, s, t.Name())
	ctx, cancel := context.WithTimeout(context.Background(), serveTimeout)
	t.Cleanup(cancel)
	return &apiTest{served: s, nc: nc, client: api.NewClient(nc, api.WithPrefix(nopts.APIPrefix)), ctx: ctx}
}

// store publishes m as a request and returns the engine's ack.
func (a *apiTest) store(t *testing.T, m *nats.Msg) wire.Ack {
	t.Helper()
	reply, err := a.nc.RequestMsgWithContext(a.ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	ack, err := wire.ParseReply(reply.Data)
	if err != nil {
		t.Fatal(err)
	}
	// An ack means durable; readers see the message once it is dispatched, a moment later.
	if err := a.Engine.WaitDispatched(a.ctx, ack.CommitLogOffset+1); err != nil {
		t.Fatal(err)
	}
	return ack
}

// apiMsg is message i of the round-trip tests: every third one without a Nats-Msg-Id (its
// UNIQ_KEY is generated), keys, tags alternating a and b, a header with two values.
func apiMsg(subject string, i int) *nats.Msg {
	m := nats.NewMsg(subject)
	m.Data = fmt.Appendf(nil, "body-%03d|%s", i, strings.Repeat("z", i%50))
	if i%3 != 0 {
		m.Header.Set(nats.MsgIdHdr, fmt.Sprintf("id-%03d", i))
	}
	m.Header.Set(ingress.DefaultKeysHeader, fmt.Sprintf("k%03d common", i))
	m.Header.Set(ingress.DefaultTagsHeader, []string{"a", "b"}[i%2])
	m.Header["X-Multi"] = []string{"first", fmt.Sprintf("second-%d", i)}
	return m
}

func TestAPIRoundTrip(t *testing.T) {
	a := serveAPI(t, testOptions(t, t.TempDir()), NATSOptions{QueuesPerTopic: 1})
	const n = 12
	var acks []wire.Ack
	for i := range n {
		acks = append(acks, a.store(t, apiMsg("orders.eu", i)))
	}
	topic := acks[0].Topic
	c, ctx := a.client, a.ctx

	topics, err := c.AllTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(topics, func(ti api.TopicInfo) bool { return ti.Name == topic && slices.Equal(ti.Queues, []int32{0}) }) {
		t.Fatalf("topics %+v: no %s with queue 0", topics, topic)
	}
	offs, err := c.Offsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if len(offs.Queues) != 1 || offs.Queues[0].MinOffset != 0 || offs.Queues[0].MaxOffset != n ||
		offs.Queues[0].MinStoreTime != acks[0].StoreTimestamp || offs.Queues[0].MaxStoreTime != acks[n-1].StoreTimestamp {
		t.Fatalf("offsets %+v, acks from %+v to %+v", offs, acks[0], acks[n-1])
	}

	got, err := c.Get(ctx, api.GetRequest{Topic: topic, QueueID: 0, Offset: 0, Max: 100})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != api.StatusFound || len(got.Messages) != n || got.NextOffset != n || got.MaxOffset != n || got.Truncated {
		t.Fatalf("get: status %s, %d messages, next %d, max %d, truncated %v", got.Status, len(got.Messages),
			got.NextOffset, got.MaxOffset, got.Truncated)
	}
	for i, m := range got.Messages {
		checkWireMessage(t, m, acks[i], apiMsg("orders.eu", i))
	}

	tagged, err := c.Get(ctx, api.GetRequest{Topic: topic, QueueID: 0, Offset: 0, Max: 100, Tags: []string{"b"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(tagged.Messages) != n/2 || tagged.NextOffset != n {
		t.Fatalf("get tags b: %d messages, next %d", len(tagged.Messages), tagged.NextOffset)
	}
	for _, m := range tagged.Messages {
		if m.Tags != "b" || m.QueueOffset%2 != 1 {
			t.Fatalf("get tags b returned %s at %d", m.Tags, m.QueueOffset)
		}
	}
	head, err := c.Get(ctx, api.GetRequest{Topic: topic, QueueID: 0, Offset: n})
	if err != nil {
		t.Fatal(err)
	}
	if head.Status != api.StatusOffsetOverflowOne || len(head.Messages) != 0 || head.NextOffset != n {
		t.Fatalf("get at the head: %+v", head)
	}

	m, err := c.Msg(ctx, api.MsgRequest{MsgID: acks[5].MsgID})
	if err != nil {
		t.Fatal(err)
	}
	checkWireMessage(t, *m, acks[5], apiMsg("orders.eu", 5))

	q, err := c.Query(ctx, api.QueryRequest{Topic: topic, Key: "k007"})
	if err != nil {
		t.Fatal(err)
	}
	if len(q.Messages) != 1 || q.Messages[0].MsgID != acks[7].MsgID {
		t.Fatalf("query k007: %+v", q)
	}
	q, err = c.Query(ctx, api.QueryRequest{Topic: topic, Key: "common", Max: 5})
	if err != nil {
		t.Fatal(err)
	}
	if len(q.Messages) != 5 || q.Messages[0].MsgID != acks[n-1].MsgID {
		t.Fatalf("query common max 5: %d messages, first %s (want the newest, %s)", len(q.Messages),
			q.Messages[0].MsgID, acks[n-1].MsgID)
	}

	for _, tc := range []struct {
		ts   int64
		want int64
	}{{0, 0}, {acks[n-1].StoreTimestamp + 1, n}} {
		off, err := c.OffsetForTime(ctx, api.OffsetForTimeRequest{Topic: topic, QueueID: 0, Timestamp: tc.ts})
		if err != nil {
			t.Fatal(err)
		}
		if off != tc.want {
			t.Fatalf("offset for time %d: %d, want %d", tc.ts, off, tc.want)
		}
	}
	ts := acks[6].StoreTimestamp
	want := int64(slices.IndexFunc(acks, func(a wire.Ack) bool { return a.StoreTimestamp >= ts }))
	if off, err := c.OffsetForTime(ctx, api.OffsetForTimeRequest{Topic: topic, QueueID: 0, Timestamp: ts}); err != nil || off != want {
		t.Fatalf("offset for time %d: %d, %v; want %d", ts, off, err, want)
	}

	if err := c.Commit(ctx, api.CommitRequest{Group: "billing", Topic: topic, QueueID: 0, Offset: 7}); err != nil {
		t.Fatal(err)
	}
	if off, ok, err := c.Fetch(ctx, api.FetchRequest{Group: "billing", Topic: topic, QueueID: 0}); err != nil || !ok || off != 7 {
		t.Fatalf("fetch billing: %d, %v, %v", off, ok, err)
	}
	if off, ok, err := c.Fetch(ctx, api.FetchRequest{Group: "audit", Topic: topic, QueueID: 0}); err != nil || ok || off != -1 {
		t.Fatalf("fetch of a group that never committed: %d, %v, %v", off, ok, err)
	}
}

// checkWireMessage compares a message read through the API with its ack and what was sent.
func checkWireMessage(t *testing.T, m api.Message, ack wire.Ack, sent *nats.Msg) {
	t.Helper()
	if m.Topic != ack.Topic || m.QueueID != ack.QueueID || m.QueueOffset != ack.QueueOffset ||
		m.CommitLogOffset != ack.CommitLogOffset || m.MsgID != ack.MsgID || m.StoreTimestamp != ack.StoreTimestamp {
		t.Fatalf("message %+v does not match its ack %+v", m, ack)
	}
	if !bytes.Equal(m.Body, sent.Data) || m.BodySize != len(sent.Data) || m.Partial || m.Size <= int32(len(sent.Data)) {
		t.Fatalf("message at %d: body %q (size %d, partial %v, record %d), want %q", m.QueueOffset, m.Body,
			m.BodySize, m.Partial, m.Size, sent.Data)
	}
	if m.StoreHost != "127.0.0.1:10911" || m.BornTimestamp == 0 || m.BornTimestamp > m.StoreTimestamp {
		t.Fatalf("message at %d: store host %q, born %d, stored %d", m.QueueOffset, m.StoreHost, m.BornTimestamp, m.StoreTimestamp)
	}
	p := m.Properties
	if p[ingress.PropNatsSubject] != sent.Subject || m.Keys != sent.Header.Get(ingress.DefaultKeysHeader) ||
		m.Tags != sent.Header.Get(ingress.DefaultTagsHeader) || p["X-Multi"] != "first" ||
		p["X-Multi#2"] != sent.Header["X-Multi"][1] || p["KEYS"] != m.Keys || p["TAGS"] != m.Tags {
		t.Fatalf("message at %d: keys %q, tags %q, properties %v; sent %v", m.QueueOffset, m.Keys, m.Tags, p, sent.Header)
	}
	if id := sent.Header.Get(nats.MsgIdHdr); (id != "" && m.UniqKey != id) || m.UniqKey == "" || p["UNIQ_KEY"] != m.UniqKey {
		t.Fatalf("message at %d: uniq key %q, sent id %q", m.QueueOffset, m.UniqKey, id)
	}
}

func TestAPIErrors(t *testing.T) {
	a := serveAPI(t, testOptions(t, t.TempDir()), NATSOptions{QueuesPerTopic: 1})
	ack := a.store(t, apiMsg("orders.eu", 1))
	c, ctx := a.client, a.ctx
	missing := "7F00000100002A9F00000000000FFFF0" // well formed, no record there
	checks := []struct {
		what string
		code int
		call func() error
	}{
		{"get of an unknown topic", api.CodeNotFound, func() error {
			_, err := c.Get(ctx, api.GetRequest{Topic: "nope", QueueID: 0})
			return err
		}},
		{"get of an unknown queue", api.CodeNotFound, func() error {
			_, err := c.Get(ctx, api.GetRequest{Topic: ack.Topic, QueueID: 9})
			return err
		}},
		{"offsets of an unknown topic", api.CodeNotFound, func() error {
			_, err := c.Offsets(ctx, "nope")
			return err
		}},
		{"offset for time of an unknown topic", api.CodeNotFound, func() error {
			_, err := c.OffsetForTime(ctx, api.OffsetForTimeRequest{Topic: "nope"})
			return err
		}},
		{"malformed msg id", api.CodeBadRequest, func() error {
			_, err := c.Msg(ctx, api.MsgRequest{MsgID: "not-an-id"})
			return err
		}},
		{"msg id naming no message", api.CodeNotFound, func() error {
			_, err := c.Msg(ctx, api.MsgRequest{MsgID: missing})
			return err
		}},
		{"body range past the body", api.CodeBadRequest, func() error {
			_, err := c.Msg(ctx, api.MsgRequest{MsgID: ack.MsgID, BodyOffset: 1 << 20})
			return err
		}},
		{"query without a key", api.CodeBadRequest, func() error {
			_, err := c.Query(ctx, api.QueryRequest{Topic: ack.Topic})
			return err
		}},
		{"commit with an invalid group", api.CodeBadRequest, func() error {
			return c.Commit(ctx, api.CommitRequest{Group: "a@b", Topic: ack.Topic, QueueID: 0, Offset: 1})
		}},
		{"commit with an empty group", api.CodeBadRequest, func() error {
			return c.Commit(ctx, api.CommitRequest{Group: "", Topic: ack.Topic, QueueID: 0, Offset: 1})
		}},
		{"commit of a negative offset", api.CodeBadRequest, func() error {
			return c.Commit(ctx, api.CommitRequest{Group: "g", Topic: ack.Topic, QueueID: 0, Offset: -1})
		}},
		{"commit to an unknown queue", api.CodeNotFound, func() error {
			return c.Commit(ctx, api.CommitRequest{Group: "g", Topic: ack.Topic, QueueID: 3, Offset: 1})
		}},
		{"fetch with an invalid group", api.CodeBadRequest, func() error {
			_, _, err := c.Fetch(ctx, api.FetchRequest{Group: "a@b", Topic: ack.Topic})
			return err
		}},
		{"replay of an unknown topic", api.CodeNotFound, func() error {
			_, err := c.Replay(ctx, api.ReplayRequest{Topic: "nope", Subject: "out"})
			return err
		}},
		{"replay onto a wildcard", api.CodeBadRequest, func() error {
			_, err := c.Replay(ctx, api.ReplayRequest{Topic: ack.Topic, Subject: "out.*"})
			return err
		}},
		{"replay onto the API", api.CodeBadRequest, func() error {
			_, err := c.Replay(ctx, api.ReplayRequest{Topic: ack.Topic, Subject: api.DefaultPrefix + ".get"})
			return err
		}},
		{"paced replay without a rate", api.CodeBadRequest, func() error {
			_, err := c.Replay(ctx, api.ReplayRequest{Topic: ack.Topic, Subject: "out", Mode: api.ReplayPaced})
			return err
		}},
	}
	for _, ck := range checks {
		err := ck.call()
		apiErr, ok := errors.AsType[*api.Error](err)
		if !ok || apiErr.Code != ck.code || apiErr.Description == "" {
			t.Errorf("%s: %v, want an *api.Error with code %d", ck.what, err, ck.code)
		}
	}

	// Raw requests: malformed JSON and unknown fields are 400, with micro's error headers too.
	for _, body := range []string{`{"topic":`, `{"topic":"x","queue":1}`, `{"topic":"x"} {}`} {
		reply, err := a.nc.RequestWithContext(a.ctx, api.Subject("", api.EndpointGet), []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		var er api.ErrorReply
		if err := json.Unmarshal(reply.Data, &er); err != nil || er.Error == nil || er.Error.Code != 400 ||
			reply.Header.Get(micro.ErrorCodeHeader) != "400" {
			t.Errorf("get %s: reply %s, headers %v", body, reply.Data, reply.Header)
		}
	}
}

// TestAPIBoundedReplies: with bodies near the body limit (and the embedded server's max payload a
// little above it), a get asking for everything never gets a reply over the max payload: it gets
// as many messages as fit, Truncated, and the offset to go on from; a body too large for any
// reply comes without it (Partial) and is read in ranges.
func TestAPIBoundedReplies(t *testing.T) {
	opts := testOptions(t, t.TempDir())
	opts.MaxBodySize = 256 << 10
	a := serveAPI(t, opts, NATSOptions{QueuesPerTopic: 1})
	maxPayload := int(a.nc.MaxPayload())
	if maxPayload != opts.MaxBodySize+payloadHeadroom {
		t.Fatalf("max payload %d", maxPayload)
	}
	sizes := []int{100 << 10, 100 << 10, 150 << 10, 250 << 10, 1 << 10, 200 << 10, 100 << 10, 5}
	var sent []*nats.Msg
	var acks []wire.Ack
	for i, size := range sizes {
		m := nats.NewMsg("big.data")
		m.Header.Set(ingress.DefaultKeysHeader, "bigkey")
		m.Data = bytes.Repeat([]byte{byte('a' + i)}, size)
		m.Data[0] = '<' // JSON escaping of HTML characters would grow the reply
		sent = append(sent, m)
		acks = append(acks, a.store(t, m))
	}
	topic := acks[0].Topic
	var got []api.Message
	for off, rounds := int64(0), 0; off < int64(len(sizes)); rounds++ {
		if rounds > 2*len(sizes) {
			t.Fatalf("no progress at offset %d", off)
		}
		req, _ := json.Marshal(api.GetRequest{Topic: topic, Offset: off, Max: 1000, MaxBytes: 64 << 20})
		reply, err := a.nc.RequestWithContext(a.ctx, api.Subject("", api.EndpointGet), req)
		if err != nil {
			t.Fatal(err)
		}
		if len(reply.Data) > maxPayload {
			t.Fatalf("a reply of %d bytes, max payload %d", len(reply.Data), maxPayload)
		}
		var r api.GetReply
		if err := json.Unmarshal(reply.Data, &r); err != nil || r.Status != api.StatusFound || len(r.Messages) == 0 {
			t.Fatalf("get at %d: %v, %s", off, err, reply.Data[:min(len(reply.Data), 300)])
		}
		if last := r.Messages[len(r.Messages)-1].QueueOffset; r.NextOffset != last+1 {
			t.Fatalf("get at %d: next %d after a last message at %d", off, r.NextOffset, last)
		}
		if r.NextOffset < int64(len(sizes)) && !r.Truncated {
			t.Fatalf("get at %d: stopped at %d of %d without saying it was truncated", off, r.NextOffset, len(sizes))
		}
		got = append(got, r.Messages...)
		off = r.NextOffset
	}
	if len(got) != len(sizes) {
		t.Fatalf("%d messages read back, want %d", len(got), len(sizes))
	}
	for i, m := range got {
		switch {
		case m.Partial:
			if len(m.Body) != 0 || m.BodySize != sizes[i] {
				t.Fatalf("message %d: partial with %d body bytes, size %d", i, len(m.Body), m.BodySize)
			}
			body, err := a.client.Body(a.ctx, m.MsgID)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(body, sent[i].Data) {
				t.Fatalf("message %d: body read in ranges differs", i)
			}
		case !bytes.Equal(m.Body, sent[i].Data):
			t.Fatalf("message %d: body of %d bytes, want %d", i, len(m.Body), sizes[i])
		}
	}
	if !got[3].Partial || got[0].Partial {
		t.Fatal("the 250 KiB body should be the only one too large for a reply")
	}

	// A range of the big body, and a query whose matches do not all fit.
	part, err := a.client.Msg(a.ctx, api.MsgRequest{MsgID: acks[3].MsgID, BodyOffset: 1000, BodyMax: 10})
	if err != nil {
		t.Fatal(err)
	}
	if !part.Partial || part.BodyOffset != 1000 || !bytes.Equal(part.Body, sent[3].Data[1000:1010]) {
		t.Fatalf("range 1000+10: partial %v, from %d, %q", part.Partial, part.BodyOffset, part.Body)
	}
	req, _ := json.Marshal(api.QueryRequest{Topic: topic, Key: "bigkey"})
	reply, err := a.nc.RequestWithContext(a.ctx, api.Subject("", api.EndpointQuery), req)
	if err != nil {
		t.Fatal(err)
	}
	var q api.QueryReply
	if err := json.Unmarshal(reply.Data, &q); err != nil || len(reply.Data) > maxPayload || !q.Truncated ||
		len(q.Messages) == 0 || q.Messages[0].MsgID != acks[len(acks)-1].MsgID {
		t.Fatalf("query: %v, %d bytes, truncated %v, %d messages", err, len(reply.Data), q.Truncated, len(q.Messages))
	}
}

// TestAPILongPoll: a get waiting at the head of a queue does not hold up other gets, is answered
// with the message published while it waits, and a get that asks to wait while every long-poll
// slot is taken is answered at once.
func TestAPILongPoll(t *testing.T) {
	a := serveAPI(t, testOptions(t, t.TempDir()), NATSOptions{QueuesPerTopic: 1, MaxLongPolls: 1})
	first := a.store(t, apiMsg("poll.me", 0))
	polling := make(chan struct{}, 1)
	a.api.OnPoll(func() { polling <- struct{}{} })

	type result struct {
		r   *api.GetReply
		err error
	}
	waited := make(chan result, 1)
	go func() {
		r, err := a.client.Get(a.ctx, api.GetRequest{Topic: first.Topic, Offset: 1, WaitMs: api.MaxWaitMs})
		waited <- result{r, err}
	}()
	select {
	case <-polling:
	case <-a.ctx.Done():
		t.Fatal("the long poll never started")
	}
	// The only slot is taken: another get that asks to wait is answered at once, and so is one
	// that does not ask.
	r, err := a.client.Get(a.ctx, api.GetRequest{Topic: first.Topic, Offset: 1, WaitMs: api.MaxWaitMs})
	if err != nil || !r.WaitSkipped || r.Status != api.StatusOffsetOverflowOne {
		t.Fatalf("a get over the long-poll bound: %+v, %v", r, err)
	}
	r, err = a.client.Get(a.ctx, api.GetRequest{Topic: first.Topic, Offset: 0})
	if err != nil || len(r.Messages) != 1 || r.WaitSkipped {
		t.Fatalf("a get while a long poll waits: %+v, %v", r, err)
	}
	select {
	case res := <-waited:
		t.Fatalf("the long poll returned before any message: %+v, %v", res.r, res.err)
	default:
	}
	second := a.store(t, apiMsg("poll.me", 1))
	select {
	case res := <-waited:
		if res.err != nil || res.r.Status != api.StatusFound || len(res.r.Messages) != 1 ||
			res.r.Messages[0].MsgID != second.MsgID || res.r.NextOffset != 2 {
			t.Fatalf("long poll: %+v, %v", res.r, res.err)
		}
	case <-a.ctx.Done():
		t.Fatal("the long poll was not answered")
	}
}

// TestAPIShutdownAnswersLongPolls: Shutdown does not wait for a long poll's time out: the poll is
// answered 503 before the engine closes.
func TestAPIShutdownAnswersLongPolls(t *testing.T) {
	a := serveAPI(t, testOptions(t, t.TempDir()), NATSOptions{QueuesPerTopic: 1})
	ack := a.store(t, apiMsg("poll.me", 0))
	polling := make(chan struct{}, 1)
	a.api.OnPoll(func() { polling <- struct{}{} })
	waited := make(chan error, 1)
	go func() {
		_, err := a.client.Get(a.ctx, api.GetRequest{Topic: ack.Topic, Offset: 1, WaitMs: api.MaxWaitMs})
		waited <- err
	}()
	select {
	case <-polling:
	case <-a.ctx.Done():
		t.Fatal("the long poll never started")
	}
	if err := a.shutdown(); err != nil {
		t.Fatal(err)
	}
	if err := <-waited; api.CodeOf(err) != api.CodeUnavailable {
		t.Fatalf("long poll at shutdown: %v, want 503", err)
	}
}

func TestAPIConsumerOffsetsSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	a := serveAPI(t, testOptions(t, dir), NATSOptions{QueuesPerTopic: 2})
	var topic string
	for i := range 4 {
		topic = a.store(t, apiMsg("orders.us", i)).Topic
	}
	for q := range int32(2) {
		if err := a.client.Commit(a.ctx, api.CommitRequest{Group: "billing", Topic: topic, QueueID: q, Offset: int64(q + 1)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.shutdown(); err != nil {
		t.Fatal(err)
	}
	b := serveAPI(t, testOptions(t, dir), NATSOptions{QueuesPerTopic: 2})
	for q := range int32(2) {
		off, ok, err := b.client.Fetch(b.ctx, api.FetchRequest{Group: "billing", Topic: topic, QueueID: q})
		if err != nil || !ok || off != int64(q+1) {
			t.Fatalf("queue %d after a restart: %d, %v, %v", q, off, ok, err)
		}
	}
}

func TestAPIServiceDiscovery(t *testing.T) {
	dir := t.TempDir()
	a := serveAPI(t, testOptions(t, dir), NATSOptions{Version: "dev"})
	reply, err := a.nc.RequestWithContext(a.ctx, "$SRV.INFO."+api.ServiceName, nil)
	if err != nil {
		t.Fatal(err)
	}
	var info micro.Info
	if err := json.Unmarshal(reply.Data, &info); err != nil {
		t.Fatal(err)
	}
	if info.Name != api.ServiceName || info.Version != "0.0.0-dev" || info.Metadata["store_dir"] != dir ||
		info.Metadata["flush_mode"] != "sync" || info.Metadata["version"] != "dev" || info.Description == "" {
		t.Fatalf("info %+v", info)
	}
	var subjects []string
	for _, ep := range info.Endpoints {
		subjects = append(subjects, ep.Subject)
	}
	for _, name := range api.Endpoints {
		if !slices.Contains(subjects, api.Subject("", name)) {
			t.Errorf("no endpoint on %s: %v", api.Subject("", name), subjects)
		}
	}
	reply, err = a.nc.RequestWithContext(a.ctx, "$SRV.PING."+api.ServiceName, nil)
	if err != nil {
		t.Fatal(err)
	}
	var ping micro.Ping
	if err := json.Unmarshal(reply.Data, &ping); err != nil || ping.Name != api.ServiceName || ping.ID != info.ID {
		t.Fatalf("ping %s: %v", reply.Data, err)
	}
}

// TestAPICustomPrefixAndOff: a prefix without '$' is served and not stored; NoReadAPI serves
// nothing.
func TestAPICustomPrefixAndOff(t *testing.T) {
	a := serveAPI(t, testOptions(t, t.TempDir()), NATSOptions{APIPrefix: "store.api"})
	if _, err := a.client.AllTopics(a.ctx); err != nil {
		t.Fatal(err)
	}
	a.store(t, apiMsg("orders.eu", 0))
	topics, err := a.client.AllTopics(a.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(topics) != 1 || topics[0].Name != "orders_eu" {
		t.Fatalf("topics %+v: the API's requests were stored", topics)
	}

	// Without the API nothing answers: ingress's ">" takes the requests and drops them (a
	// $-subject), so a client times out. No need to wait for that here.
	b := serve(t, testOptions(t, t.TempDir()), NATSOptions{Listen: "127.0.0.1:-1", NoReadAPI: true})
	if b.api != nil {
		t.Fatal("NoReadAPI started the read API")
	}
}
