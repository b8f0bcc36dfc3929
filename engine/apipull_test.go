package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/rocketstore/engine/engine/api"
	"github.com/rocketstore/engine/engine/replay"
	"github.com/rocketstore/engine/internal/wire"
	"github.com/rocketstore/engine/stages/ingress"
	"github.com/rocketstore/engine/stages/ingress/route"
)

// Tests of the pull endpoint, as the read API's tests: a served engine on an embedded
// nats-server, messages stored through NATS (or Put), read back with api.Client.Pull and
// api.Consumer. No sleeps: every wait is for a reply or a channel, bounded by serveTimeout.

// replayHeader is the header a replay would send for the message msgID, without the replay's
// own and position headers (replay.Headers): what a pulled message's header must be.
func replayHeader(t *testing.T, e *Engine, msgID string) nats.Header {
	t.Helper()
	m, err := e.Lookup(msgID)
	if err != nil {
		t.Fatal(err)
	}
	h := replay.Headers(&m, ingress.DefaultKeysHeader, ingress.DefaultTagsHeader)
	for _, vs := range h {
		for i, v := range vs {
			vs[i] = strings.TrimSpace(v) // as NATS carries them
		}
	}
	return h
}

func sameHeader(a, b nats.Header) bool {
	return maps.EqualFunc(a, b, func(x, y []string) bool { return slices.Equal(x, y) })
}

// checkPulled checks a pulled message against its ack and what was sent.
func checkPulled(t *testing.T, e *Engine, m api.PulledMessage, ack wire.Ack, sent *nats.Msg) {
	t.Helper()
	if m.Topic != ack.Topic || m.QueueID != ack.QueueID || m.QueueOffset != ack.QueueOffset ||
		m.CommitLogOffset != ack.CommitLogOffset || m.MsgID != ack.MsgID || m.StoreTimestamp != ack.StoreTimestamp {
		t.Fatalf("pulled %+v does not match its ack %+v", m, ack)
	}
	if !bytes.Equal(m.Body, sent.Data) || m.BodySize != len(sent.Data) || m.Partial {
		t.Fatalf("pulled at %d: body %q (size %d, partial %v), want %q", m.QueueOffset, m.Body, m.BodySize, m.Partial, sent.Data)
	}
	h := m.Header
	if m.Subject() != sent.Subject || h.Get(ingress.DefaultKeysHeader) != sent.Header.Get(ingress.DefaultKeysHeader) ||
		h.Get(ingress.DefaultTagsHeader) != sent.Header.Get(ingress.DefaultTagsHeader) ||
		!slices.Equal(h["X-Multi"], sent.Header["X-Multi"]) {
		t.Fatalf("pulled at %d: headers %v, sent on %s with %v", m.QueueOffset, h, sent.Subject, sent.Header)
	}
	if id := sent.Header.Get(nats.MsgIdHdr); id != "" {
		if h.Get(nats.MsgIdHdr) != id || h.Get(api.HeaderUniqKey) != "" {
			t.Fatalf("pulled at %d: Nats-Msg-Id %q, Rs-Uniq-Key %q; sent with the id %q", m.QueueOffset,
				h.Get(nats.MsgIdHdr), h.Get(api.HeaderUniqKey), id)
		}
	} else if h.Get(nats.MsgIdHdr) != "" || len(h.Get(api.HeaderUniqKey)) != 32 {
		t.Fatalf("pulled at %d: Nats-Msg-Id %q, Rs-Uniq-Key %q; sent without an id", m.QueueOffset,
			h.Get(nats.MsgIdHdr), h.Get(api.HeaderUniqKey))
	}
	if want := replayHeader(t, e, m.MsgID); !sameHeader(h, want) {
		t.Fatalf("pulled at %d: headers %v, a replay's %v", m.QueueOffset, h, want)
	}
}

// TestPullRoundTrip: messages stored through NATS (several header values, ids or not, a binary
// body) come back by pulls of 5 in order, each with its body, its headers as a replay rebuilds
// them and its position; the next offsets chain the pulls; at the head a pull says so.
func TestPullRoundTrip(t *testing.T) {
	a := serveAPI(t, testOptions(t, t.TempDir()), NATSOptions{QueuesPerTopic: 1})
	const n = 13
	var sent []*nats.Msg
	var acks []wire.Ack
	for i := range n {
		m := apiMsg("orders.eu", i)
		if i == 7 {
			m.Data = make([]byte, 600) // binary: every byte value, CR LF and NUL included
			for j := range m.Data {
				m.Data[j] = byte(j * 7)
			}
		}
		sent = append(sent, m)
		acks = append(acks, a.store(t, m))
	}
	topic := acks[0].Topic
	var got []api.PulledMessage
	for off, want := int64(0), []int{5, 5, 3}; len(want) > 0; want = want[1:] {
		res, err := a.client.Pull(a.ctx, api.PullRequest{Topic: topic, Offset: off, Max: 5})
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != api.StatusFound || len(res.Messages) != want[0] || res.NextOffset != off+int64(want[0]) ||
			res.MinOffset != 0 || res.MaxOffset != n || res.WaitSkipped {
			t.Fatalf("pull at %d: status %s, %d messages, next %d, bounds [%d, %d)", off, res.Status,
				len(res.Messages), res.NextOffset, res.MinOffset, res.MaxOffset)
		}
		got = append(got, res.Messages...)
		off = res.NextOffset
	}
	for i, m := range got {
		checkPulled(t, a.Engine, m, acks[i], sent[i])
	}

	head, err := a.client.Pull(a.ctx, api.PullRequest{Topic: topic, Offset: n})
	if err != nil {
		t.Fatal(err)
	}
	if head.Status != api.StatusOffsetOverflowOne || len(head.Messages) != 0 || head.NextOffset != n || head.MaxOffset != n {
		t.Fatalf("pull at the head: %+v", head)
	}
	past, err := a.client.Pull(a.ctx, api.PullRequest{Topic: topic, Offset: n + 5})
	if err != nil || past.Status != api.StatusOffsetOverflowBadly || past.NextOffset != n {
		t.Fatalf("pull past the head: %+v, %v", past, err)
	}

	// Tags: only b (odd offsets), 2 a pull; the next offsets skip what the filter took out.
	var tagged []int64
	for off, rounds := int64(0), 0; off < n; rounds++ {
		if rounds > n {
			t.Fatalf("no progress at %d", off)
		}
		res, err := a.client.Pull(a.ctx, api.PullRequest{Topic: topic, Offset: off, Max: 2, Tags: []string{"b"}})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range res.Messages {
			if m.Header.Get(ingress.DefaultTagsHeader) != "b" {
				t.Fatalf("tags b: got %q at %d", m.Header.Get(ingress.DefaultTagsHeader), m.QueueOffset)
			}
			tagged = append(tagged, m.QueueOffset)
		}
		if len(res.Messages) == 2 && res.NextOffset != res.Messages[1].QueueOffset+1 {
			t.Fatalf("tags b: next %d after %d", res.NextOffset, res.Messages[1].QueueOffset)
		}
		off = res.NextOffset
	}
	if !slices.Equal(tagged, []int64{1, 3, 5, 7, 9, 11}) {
		t.Fatalf("tags b: offsets %v", tagged)
	}
}

// TestPullHeadersMatchReplay: a pull rebuilds the same headers as a replay for records of every
// kind Put can store: repeated values, store properties, names NATS cannot carry, an original
// header that a rebuilt one overrides, UNIQ_KEY with and without a NATS subject. One header map
// serves every message of a pull, so each message is checked after others of other shapes.
func TestPullHeadersMatchReplay(t *testing.T) {
	a := serveAPI(t, testOptions(t, t.TempDir()), NATSOptions{QueuesPerTopic: 1})
	msgs := []Message{
		{Topic: "hdrs", Body: []byte("plain")},
		{Topic: "hdrs", Body: []byte("many"), MsgID: "id-1", Tags: "t1", Keys: []string{"k1", "k2"},
			Properties: map[string]string{"X-A": "1", "X-A#2": "2", "X-A#3": "3", "X-B": " padded ",
				"bad name": "v", "CLUSTER": "c", ingress.PropNatsSubject: "orders.eu", api.HeaderSubject: "overridden"}},
		{Topic: "hdrs", Body: nil, MsgID: "id-2", Properties: map[string]string{"X-A": "only"}},
		{Topic: "hdrs", Body: []byte("plain again")},
		{Topic: "hdrs", Body: []byte("nats id"), MsgID: "id-3", Properties: map[string]string{ingress.PropNatsSubject: "a.b"}},
	}
	res, err := a.Engine.Put(a.ctx, msgs...)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Engine.WaitDispatched(a.ctx, a.Engine.Offsets().Written); err != nil {
		t.Fatal(err)
	}
	pulled, err := a.client.Pull(a.ctx, api.PullRequest{Topic: "hdrs"})
	if err != nil {
		t.Fatal(err)
	}
	if len(pulled.Messages) != len(msgs) {
		t.Fatalf("%d messages pulled, %d stored", len(pulled.Messages), len(msgs))
	}
	for i, m := range pulled.Messages {
		if m.MsgID != res[i].MsgID || !bytes.Equal(m.Body, msgs[i].Body) {
			t.Fatalf("message %d: %s %q, stored %s %q", i, m.MsgID, m.Body, res[i].MsgID, msgs[i].Body)
		}
		want := replayHeader(t, a.Engine, m.MsgID)
		if len(want) == 0 {
			want = nil // no header block at all
		}
		if !sameHeader(m.Header, want) || (len(want) == 0) != (m.Header == nil) {
			t.Fatalf("message %d: headers %v, a replay's %v", i, m.Header, want)
		}
	}
	if h := pulled.Messages[1].Header; !slices.Equal(h["X-A"], []string{"1", "2", "3"}) ||
		h.Get(api.HeaderSubject) != "orders.eu" || h.Get(nats.MsgIdHdr) != "id-1" || h.Get("CLUSTER") != "" {
		t.Fatalf("message 1: headers %v", h)
	}
	if h := pulled.Messages[2].Header; h.Get(api.HeaderUniqKey) != "id-2" || h.Get(nats.MsgIdHdr) != "" {
		t.Fatalf("message 2 (a UNIQ_KEY not from NATS): headers %v", h)
	}
}

// TestPullBounds: max above Get's 1024 takes several reads; maxBytes cuts a pull at a record;
// the defaults apply; a Consumer reads everything in order and then reports the head.
func TestPullBounds(t *testing.T) {
	a := serveAPI(t, testOptions(t, t.TempDir()), NATSOptions{QueuesPerTopic: 1})
	const n = 2500
	batch := make([]Message, 250)
	for i := 0; i < n; i += len(batch) {
		for j := range batch {
			batch[j] = Message{Topic: "bulk", Body: []byte(strconv.Itoa(i + j))}
		}
		if _, err := a.Engine.Put(a.ctx, batch...); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Engine.WaitDispatched(a.ctx, a.Engine.Offsets().Written); err != nil {
		t.Fatal(err)
	}
	inOrder := func(res *api.PullResult, from int64) {
		t.Helper()
		for i, m := range res.Messages {
			if off := from + int64(i); m.QueueOffset != off || string(m.Body) != strconv.FormatInt(off, 10) {
				t.Fatalf("message %d of a pull from %d: offset %d, body %q", i, from, m.QueueOffset, m.Body)
			}
		}
	}
	for _, tc := range []struct {
		from       int64
		max, count int
	}{{0, api.MaxPullMax, n}, {100, 2000, 2000}, {0, 0, api.DefaultPullMax}, {2400, 1 << 20, 100}} {
		res, err := a.client.Pull(a.ctx, api.PullRequest{Topic: "bulk", Offset: tc.from, Max: tc.max})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Messages) != tc.count || res.NextOffset != tc.from+int64(tc.count) || res.Status != api.StatusFound {
			t.Fatalf("pull of %d from %d: %d messages, next %d, %s", tc.max, tc.from, len(res.Messages), res.NextOffset, res.Status)
		}
		inOrder(res, tc.from)
	}
	one, err := a.Engine.Get(a.ctx, GetRequest{Topic: "bulk", Offset: 1000, Max: 1})
	if err != nil {
		t.Fatal(err)
	}
	size := int(one.Messages[0].Size) // every record from 1000 to 9999 has this size
	res, err := a.client.Pull(a.ctx, api.PullRequest{Topic: "bulk", Offset: 1000, Max: 100, MaxBytes: 10*size + size/2})
	if err != nil || len(res.Messages) != 10 || res.NextOffset != 1010 {
		t.Fatalf("pull of 10.5 records' bytes: %v, %+v", err, res)
	}
	inOrder(res, 1000)

	k := a.client.NewConsumer(api.ConsumerConfig{Topic: "bulk", Offset: 5, Max: 700})
	defer k.Close()
	for off := int64(5); off < n; {
		b, err := k.Next(a.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(b.Messages) == 0 || b.Messages[0].QueueOffset != off || k.Offset() != b.NextOffset {
			t.Fatalf("consumer at %d: %d messages, next %d, offset %d", off, len(b.Messages), b.NextOffset, k.Offset())
		}
		inOrder(b, off)
		off = b.NextOffset
	}
	b, err := k.Next(a.ctx)
	if err != nil || len(b.Messages) != 0 || b.Status != api.StatusOffsetOverflowOne || b.NextOffset != n {
		t.Fatalf("consumer at the head: %+v, %v", b, err)
	}
}

// TestPullLongPoll: a pull waiting at the head of a queue holds a long-poll slot shared with
// get (another pull or get that asks to wait is answered at once, WaitSkipped), does not hold
// up other gets or pulls, and is answered with the message stored while it waits.
func TestPullLongPoll(t *testing.T) {
	a := serveAPI(t, testOptions(t, t.TempDir()), NATSOptions{QueuesPerTopic: 1, MaxLongPolls: 1})
	first := a.store(t, apiMsg("poll.me", 0))
	polling := make(chan struct{}, 1)
	a.api.OnPoll(func() { polling <- struct{}{} })
	type result struct {
		r   *api.PullResult
		err error
	}
	waited := make(chan result, 1)
	go func() {
		r, err := a.client.Pull(a.ctx, api.PullRequest{Topic: first.Topic, Offset: 1, WaitMs: api.MaxWaitMs})
		waited <- result{r, err}
	}()
	select {
	case <-polling:
	case <-a.ctx.Done():
		t.Fatal("the long poll never started")
	}
	skipped, err := a.client.Pull(a.ctx, api.PullRequest{Topic: first.Topic, Offset: 1, WaitMs: api.MaxWaitMs})
	if err != nil || !skipped.WaitSkipped || skipped.Status != api.StatusOffsetOverflowOne {
		t.Fatalf("a pull over the long-poll bound: %+v, %v", skipped, err)
	}
	g, err := a.client.Get(a.ctx, api.GetRequest{Topic: first.Topic, Offset: 1, WaitMs: api.MaxWaitMs})
	if err != nil || !g.WaitSkipped {
		t.Fatalf("a get over the long-poll bound: %+v, %v", g, err)
	}
	g, err = a.client.Get(a.ctx, api.GetRequest{Topic: first.Topic, Offset: 0})
	if err != nil || len(g.Messages) != 1 || g.Messages[0].MsgID != first.MsgID {
		t.Fatalf("a get while a pull waits: %+v, %v", g, err)
	}
	p, err := a.client.Pull(a.ctx, api.PullRequest{Topic: first.Topic, Offset: 0})
	if err != nil || len(p.Messages) != 1 || p.Messages[0].MsgID != first.MsgID || p.WaitSkipped {
		t.Fatalf("a pull while a pull waits: %+v, %v", p, err)
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
			res.r.Messages[0].MsgID != second.MsgID || res.r.NextOffset != 2 || res.r.WaitSkipped {
			t.Fatalf("long poll: %+v, %v", res.r, res.err)
		}
	case <-a.ctx.Done():
		t.Fatal("the long poll was not answered")
	}

}

// TestPullConsumerFollowsHead: a Consumer that waits has its next pull waiting at the head of
// the queue while the caller handles a batch, and that pull brings the next message.
func TestPullConsumerFollowsHead(t *testing.T) {
	a := serveAPI(t, testOptions(t, t.TempDir()), NATSOptions{QueuesPerTopic: 1})
	first := a.store(t, apiMsg("poll.me", 0))
	polls := make(chan struct{}, 8)
	a.api.OnPoll(func() { polls <- struct{}{} })
	k := a.client.NewConsumer(api.ConsumerConfig{Topic: first.Topic, WaitMs: api.MaxWaitMs})
	defer k.Close()
	b, err := k.Next(a.ctx)
	if err != nil || len(b.Messages) != 1 || b.Messages[0].MsgID != first.MsgID || k.Offset() != 1 {
		t.Fatalf("consumer: %+v, %v", b, err)
	}
	for range 2 { // the first pull's long poll, then the one of the pull in flight ahead
		select {
		case <-polls:
		case <-a.ctx.Done():
			t.Fatal("the consumer's pull ahead never waited")
		}
	}
	second := a.store(t, apiMsg("poll.me", 1))
	b, err = k.Next(a.ctx)
	if err != nil || len(b.Messages) != 1 || b.Messages[0].MsgID != second.MsgID || k.Offset() != 2 || b.WaitSkipped {
		t.Fatalf("consumer at the head: %+v, %v", b, err)
	}
}

// TestPullShutdownAnswersLongPolls: Shutdown ends a waiting pull with a 503 end message.
func TestPullShutdownAnswersLongPolls(t *testing.T) {
	a := serveAPI(t, testOptions(t, t.TempDir()), NATSOptions{QueuesPerTopic: 1})
	ack := a.store(t, apiMsg("poll.me", 0))
	polling := make(chan struct{}, 1)
	a.api.OnPoll(func() { polling <- struct{}{} })
	waited := make(chan error, 1)
	go func() {
		_, err := a.client.Pull(a.ctx, api.PullRequest{Topic: ack.Topic, Offset: 1, WaitMs: api.MaxWaitMs})
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
		t.Fatalf("pull at shutdown: %v, want 503", err)
	}
}

// TestPullPartial: a message too large for the max payload (stored by an engine with a larger
// body limit) comes without its body, marked; Client.Body reads it and a Consumer does it
// itself.
func TestPullPartial(t *testing.T) {
	dir := t.TempDir()
	opts := testOptions(t, dir)
	opts.MaxBodySize = 1 << 20
	first := serve(t, opts, NATSOptions{QueuesPerTopic: 1})
	big := bytes.Repeat([]byte("0123456789abcdef"), 600<<10/16)
	msgs := []Message{
		{Topic: "big", Body: []byte("small-0")},
		{Topic: "big", Body: big, Properties: map[string]string{"X-Big": "yes"}},
		{Topic: "big", Body: []byte("small-2")},
	}
	ctx, cancel := context.WithTimeout(context.Background(), serveTimeout)
	defer cancel()
	if _, err := first.Engine.Put(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
	if err := first.shutdown(); err != nil {
		t.Fatal(err)
	}

	opts.MaxBodySize = 128 << 10 // the embedded server's max payload: 192 KiB
	a := serveAPI(t, opts, NATSOptions{QueuesPerTopic: 1})
	if mp := a.nc.MaxPayload(); mp >= int64(len(big)) {
		t.Fatalf("max payload %d", mp)
	}
	res, err := a.client.Pull(a.ctx, api.PullRequest{Topic: "big"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Messages) != 3 || res.NextOffset != 3 {
		t.Fatalf("pull: %d messages, next %d", len(res.Messages), res.NextOffset)
	}
	for i, m := range res.Messages {
		if partial := i == 1; m.Partial != partial || (!partial && !bytes.Equal(m.Body, msgs[i].Body)) {
			t.Fatalf("message %d: partial %v, body %q", i, m.Partial, m.Body[:min(len(m.Body), 20)])
		}
	}
	m := res.Messages[1]
	if len(m.Body) != 0 || m.BodySize != len(big) || m.Header.Get("X-Big") != "yes" ||
		m.Header.Get(api.HeaderPartial) != strconv.Itoa(len(big)) {
		t.Fatalf("partial message: %d body bytes, size %d, headers %v", len(m.Body), m.BodySize, m.Header)
	}
	body, err := a.client.Body(a.ctx, m.MsgID)
	if err != nil || !bytes.Equal(body, big) {
		t.Fatalf("body of the partial message: %d bytes, %v", len(body), err)
	}

	k := a.client.NewConsumer(api.ConsumerConfig{Topic: "big"})
	defer k.Close()
	b, err := k.Next(a.ctx)
	if err != nil || len(b.Messages) != 3 {
		t.Fatalf("consumer: %+v, %v", b, err)
	}
	if m := b.Messages[1]; m.Partial || !bytes.Equal(m.Body, big) || m.BodySize != len(big) {
		t.Fatalf("consumer: the large message is partial %v, %d bytes", m.Partial, len(m.Body))
	}
}

// TestPullErrors: refused and failed pulls end with an ERROR end message carrying the code
// (and micro's error headers); with no engine, the client says so.
func TestPullErrors(t *testing.T) {
	a := serveAPI(t, testOptions(t, t.TempDir()), NATSOptions{QueuesPerTopic: 1, Subjects: []string{"orders.>"}})
	ack := a.store(t, apiMsg("orders.eu", 0))
	for _, tc := range []struct {
		what string
		req  api.PullRequest
		code int
	}{
		{"unknown topic", api.PullRequest{Topic: "nope"}, api.CodeNotFound},
		{"unknown queue", api.PullRequest{Topic: ack.Topic, QueueID: 3}, api.CodeNotFound},
		{"unknown topic, waiting", api.PullRequest{Topic: "nope", WaitMs: 10}, api.CodeNotFound},
		{"no topic", api.PullRequest{}, api.CodeBadRequest},
		{"negative offset", api.PullRequest{Topic: ack.Topic, Offset: -1}, api.CodeBadRequest},
		{"negative max", api.PullRequest{Topic: ack.Topic, Max: -1}, api.CodeBadRequest},
	} {
		res, err := a.client.Pull(a.ctx, tc.req)
		if e, ok := errors.AsType[*api.Error](err); !ok || e.Code != tc.code || e.Description == "" {
			t.Errorf("%s: %v, want an *api.Error with code %d", tc.what, err, tc.code)
		} else if res == nil || res.Status != api.StatusError || len(res.Messages) != 0 {
			t.Errorf("%s: result %+v", tc.what, res)
		}
	}

	// Raw: malformed JSON gets an end message with the code, and micro's headers.
	sub, err := a.nc.SubscribeSync(a.nc.NewInbox())
	if err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{`{"topic":`, `{"topic":"x","queue":1}`} {
		if err := a.nc.PublishRequest(api.Subject("", api.EndpointPull), sub.Subject, []byte(body)); err != nil {
			t.Fatal(err)
		}
		m, err := sub.NextMsgWithContext(a.ctx)
		if err != nil {
			t.Fatal(err)
		}
		h := m.Header
		if h.Get(api.HeaderPullStatus) != api.StatusError || h.Get(api.HeaderPullErrorCode) != "400" ||
			h.Get(micro.ErrorCodeHeader) != "400" || h.Get(api.HeaderPullCount) != "0" || len(m.Data) != 0 || m.Reply != "" {
			t.Errorf("pull %s: end message %v %q", body, h, m.Data)
		}
	}

	// A reply subject under the API's prefix gets nothing; the next pull is answered as usual.
	if err := a.nc.PublishRequest(api.Subject("", api.EndpointPull), api.DefaultPrefix+".get",
		[]byte(`{"topic":"`+ack.Topic+`"}`)); err != nil {
		t.Fatal(err)
	}
	if res, err := a.client.Pull(a.ctx, api.PullRequest{Topic: ack.Topic}); err != nil || len(res.Messages) != 1 {
		t.Fatalf("pull: %+v, %v", res, err)
	}

	none := api.NewClient(a.nc, api.WithPrefix("$NOBODY"))
	if _, err := none.Pull(a.ctx, api.PullRequest{Topic: ack.Topic}); !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("pull with no engine: %v", err)
	}
	// The JSON API's error reply, if a pull ever reaches something else, is reported as such.
	none = api.NewClient(a.nc, api.WithPrefix("t.api"))
	fakeSub, err := a.nc.Subscribe(api.Subject("t.api", api.EndpointPull), func(m *nats.Msg) {
		out, _ := json.Marshal(api.ErrorReply{Error: &api.Error{Code: 501, Description: "no pulls here"}})
		_ = m.Respond(out)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer fakeSub.Unsubscribe()
	if _, err := none.Pull(a.ctx, api.PullRequest{Topic: ack.Topic}); api.CodeOf(err) != 501 {
		t.Fatalf("pull answered by a JSON error: %v", err)
	}
}

// TestConsumerSubjectFilter: the Go consumer with a subject pattern reads exactly the messages
// of a declared topic whose subjects match it, across pulls.
func TestConsumerSubjectFilter(t *testing.T) {
	a := serveAPI(t, testOptions(t, t.TempDir()), NATSOptions{QueuesPerTopic: 1,
		Topics: []route.TopicPattern{{Subjects: "device.*.temp", Topic: "device"}}})
	var want []int
	for i := range 40 {
		subject := fmt.Sprintf("device.%d.temp", i%4)
		if ack := a.store(t, apiMsg(subject, i)); ack.Topic != "device" {
			t.Fatalf("%s stored in %s", subject, ack.Topic)
		}
		if i%4 == 1 {
			want = append(want, i)
		}
	}
	k := a.client.NewConsumer(api.ConsumerConfig{Topic: "device", Max: 3, Subject: "device.1.temp"})
	defer k.Close()
	var got []int
	for range 40 {
		b, err := k.Next(a.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(b.Messages) == 0 {
			break
		}
		for _, m := range b.Messages {
			if s := m.Header.Get("Rs-Subject"); s != "device.1.temp" {
				t.Fatalf("message on %q", s)
			}
			n, _ := strconv.Atoi(string(m.Body[len("body-") : len("body-")+3]))
			got = append(got, n)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("consumer on device.1.temp read %v, want %v", got, want)
	}
}

// TestPullScansPastFilterMisses: one pull with a subject filter reads past the 800 units a Get
// looks at, so a message after thousands that miss comes in the first pull, not after a round
// trip per 800 units; a pull that its own window stops before the head says so
// (Rs-Pull-Scan-Stopped).
func TestPullScansPastFilterMisses(t *testing.T) {
	a := serveAPI(t, testOptions(t, t.TempDir()), NATSOptions{QueuesPerTopic: 1,
		Topics: []route.TopicPattern{{Subjects: "device.*.temp", Topic: "device"}}})
	const misses = 3000
	msgs := make([]Message, misses)
	for i := range msgs {
		msgs[i] = Message{Topic: "device", Body: []byte("x"), Properties: map[string]string{"NATS_SUBJECT": "device.0.temp"}}
	}
	if _, err := a.Engine.Put(a.ctx, msgs...); err != nil {
		t.Fatal(err)
	}
	last := a.store(t, apiMsg("device.1.temp", 1))
	res, err := a.client.Pull(a.ctx, api.PullRequest{Topic: "device", Subject: "device.1.temp"})
	if err != nil || len(res.Messages) != 1 || res.Messages[0].QueueOffset != last.QueueOffset || res.NextOffset != misses+1 ||
		res.ScanStopped {
		t.Fatalf("one pull: %v, %d messages, next %d, scan stopped %v; want the message at %d", err, len(res.Messages),
			res.NextOffset, res.ScanStopped, last.QueueOffset)
	}
	// Past its own window (65,536 units) a pull stops and says so: later offsets may match.
	const more = 66_000
	for n := 0; n < more; n += len(msgs) {
		if _, err := a.Engine.Put(a.ctx, msgs[:min(len(msgs), more-n)]...); err != nil {
			t.Fatal(err)
		}
	}
	match := a.store(t, apiMsg("device.1.temp", 2))
	const window = 64 << 10 // the read API's pullScanUnits
	from := last.QueueOffset + 1
	res, err = a.client.Pull(a.ctx, api.PullRequest{Topic: "device", Subject: "device.1.temp", Offset: from})
	if err != nil || len(res.Messages) != 0 || res.Status != api.StatusNoMatchedMessage || !res.ScanStopped ||
		res.NextOffset < from+window || res.NextOffset >= match.QueueOffset {
		t.Fatalf("a pull past its window: %v, %d messages, %s, next %d, scan stopped %v; want none, next in [%d, %d), stopped",
			err, len(res.Messages), res.Status, res.NextOffset, res.ScanStopped, from+window, match.QueueOffset)
	}
	res, err = a.client.Pull(a.ctx, api.PullRequest{Topic: "device", Subject: "device.1.temp", Offset: res.NextOffset})
	if err != nil || len(res.Messages) != 1 || res.Messages[0].QueueOffset != match.QueueOffset || res.ScanStopped {
		t.Fatalf("the next pull: %v, %d messages, scan stopped %v", err, len(res.Messages), res.ScanStopped)
	}
}
