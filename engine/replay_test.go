package engine

import (
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/rocketstore/engine/engine/api"
	"github.com/rocketstore/engine/engine/replay"
	"github.com/rocketstore/engine/internal/wire"
	"github.com/rocketstore/engine/stages/ingress"
)

// replayed is a message a test subscriber received, with what its headers say.
type replayed struct {
	msg    *nats.Msg
	seq    int64
	queue  int32
	offset int64
}

// next receives the next message of sub, bounded by the test's context.
func (a *apiTest) next(t *testing.T, sub *nats.Subscription) replayed {
	t.Helper()
	m, err := sub.NextMsgWithContext(a.ctx)
	if err != nil {
		t.Fatal(err)
	}
	r := replayed{msg: m}
	r.seq, _ = strconv.ParseInt(m.Header.Get(api.HeaderReplaySeq), 10, 64)
	q, _ := strconv.Atoi(m.Header.Get(api.HeaderQueueID))
	r.queue = int32(q)
	r.offset, _ = strconv.ParseInt(m.Header.Get(api.HeaderQueueOffset), 10, 64)
	return r
}

// storeSpread stores n apiMsgs on subject (spread over the topic's queues round-robin) and
// returns their acks by message id.
func (a *apiTest) storeSpread(t *testing.T, subject string, n int) (map[string]wire.Ack, []*nats.Msg) {
	t.Helper()
	acks := map[string]wire.Ack{}
	var sent []*nats.Msg
	for i := range n {
		m := apiMsg(subject, i)
		sent = append(sent, m)
		ack := a.store(t, m)
		acks[ack.MsgID] = ack
	}
	return acks, sent
}

// checkReplayed checks a replayed message against what was stored: the body, the original
// headers rebuilt, the position headers, and CommitLog order after the previous message.
func checkReplayed(t *testing.T, r replayed, acks map[string]wire.Ack, sent []*nats.Msg, prevPhys int64) int64 {
	t.Helper()
	h := r.msg.Header
	ack, ok := acks[h.Get(api.HeaderMsgID)]
	if !ok {
		t.Fatalf("replayed message %d names %q, which was not stored", r.seq, h.Get(api.HeaderMsgID))
	}
	if ack.Topic != h.Get(api.HeaderTopic) || ack.QueueID != r.queue || ack.QueueOffset != r.offset ||
		strconv.FormatInt(ack.StoreTimestamp, 10) != h.Get(api.HeaderStoreTimestamp) {
		t.Fatalf("replayed message %d: headers %v, ack %+v", r.seq, h, ack)
	}
	if ack.CommitLogOffset <= prevPhys {
		t.Fatalf("replayed message %d at CommitLog offset %d after one at %d: not in store order", r.seq,
			ack.CommitLogOffset, prevPhys)
	}
	i := slices.IndexFunc(sent, func(m *nats.Msg) bool { return string(m.Data) == string(r.msg.Data) })
	if i < 0 {
		t.Fatalf("replayed message %d: body %q was not sent", r.seq, r.msg.Data)
	}
	s := sent[i]
	if h.Get(api.HeaderSubject) != s.Subject || h.Get(ingress.DefaultKeysHeader) != s.Header.Get(ingress.DefaultKeysHeader) ||
		h.Get(ingress.DefaultTagsHeader) != s.Header.Get(ingress.DefaultTagsHeader) || !slices.Equal(h["X-Multi"], s.Header["X-Multi"]) {
		t.Fatalf("replayed message %d: headers %v, sent %v", r.seq, h, s.Header)
	}
	if id := s.Header.Get(nats.MsgIdHdr); id != "" {
		if h.Get(nats.MsgIdHdr) != id || h.Get(api.HeaderUniqKey) != "" {
			t.Fatalf("replayed message %d: Nats-Msg-Id %q, Rs-Uniq-Key %q; sent with the id %q", r.seq,
				h.Get(nats.MsgIdHdr), h.Get(api.HeaderUniqKey), id)
		}
	} else if h.Get(nats.MsgIdHdr) != "" || len(h.Get(api.HeaderUniqKey)) != 32 {
		t.Fatalf("replayed message %d: Nats-Msg-Id %q, Rs-Uniq-Key %q; sent without an id (a generated UNIQ_KEY)",
			r.seq, h.Get(nats.MsgIdHdr), h.Get(api.HeaderUniqKey))
	}
	return ack.CommitLogOffset
}

// TestReplayAckedFlowControl: an acked replay of a topic's four queues stops at MaxInFlight
// unacked messages until the receiver acks, sends every message of each queue in queue order
// (and the queues merged in store order), only up to the end the topic had when it started,
// then the end message; a second replay beyond MaxReplays is refused with 429.
func TestReplayAckedFlowControl(t *testing.T) {
	a := serveAPI(t, testOptions(t, t.TempDir()), NATSOptions{QueuesPerTopic: 4, MaxReplays: 1})
	const n, window = 40, 8
	acks, sent := a.storeSpread(t, "orders.eu", n)
	full := make(chan struct{}, 1)
	a.api.OnReplayWindowFull(func() {
		select {
		case full <- struct{}{}:
		default:
		}
	})
	sub, err := a.nc.SubscribeSync("replay.orders")
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		t.Fatal(err)
	}
	if err := a.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	plan, err := a.client.Replay(a.ctx, api.ReplayRequest{Topic: "orders_eu", Subject: "replay.orders", MaxInFlight: window})
	if err != nil {
		t.Fatal(err)
	}
	if plan.Mode != api.ReplayAcked || plan.MaxCount != n || len(plan.Queues) != 4 || plan.ReplayID == "" {
		t.Fatalf("plan %+v", plan)
	}
	// Stored after the start: not replayed.
	late := a.store(t, apiMsg("orders.eu", 999))

	var held []replayed
	for range window {
		held = append(held, a.next(t, sub))
	}
	select {
	case <-full:
	case <-a.ctx.Done():
		t.Fatal("the replay never found its window full")
	}
	// The replay is waiting: everything it sent has reached us, and it sent no more.
	if err := a.conn.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := a.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if k, _, _ := sub.Pending(); k != 0 {
		t.Fatalf("%d messages past a window of %d unacked", k, window)
	}
	_, err = a.client.Replay(a.ctx, api.ReplayRequest{Topic: "orders_eu", Subject: "replay.other"})
	if api.CodeOf(err) != api.CodeTooManyReplays {
		t.Fatalf("a second replay with MaxReplays 1: %v, want 429", err)
	}

	lastOffset := map[int32]int64{0: -1, 1: -1, 2: -1, 3: -1}
	prevPhys := int64(-1)
	count := int64(0)
	check := func(r replayed) {
		count++
		if r.seq != count {
			t.Fatalf("replay seq %d, want %d", r.seq, count)
		}
		if r.offset != lastOffset[r.queue]+1 {
			t.Fatalf("queue %d: offset %d after %d", r.queue, r.offset, lastOffset[r.queue])
		}
		lastOffset[r.queue] = r.offset
		prevPhys = checkReplayed(t, r, acks, sent, prevPhys)
		if r.msg.Header.Get(api.HeaderMsgID) == late.MsgID {
			t.Fatal("a message stored after the replay started was replayed")
		}
		if err := r.msg.Respond([]byte("ok")); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range held {
		check(r)
	}
	for range 2 * n { // bounded: n messages and the end
		r := a.next(t, sub)
		if end, ok := api.ParseReplayEnd(r.msg); ok {
			if end.Count != n || end.Error != "" || end.ReplayID != plan.ReplayID || r.seq != n+1 {
				t.Fatalf("end %+v at seq %d", end, r.seq)
			}
			if err := r.msg.Respond(nil); err != nil {
				t.Fatal(err)
			}
			if count != n {
				t.Fatalf("%d messages before the end, want %d", count, n)
			}
			return
		}
		check(r)
	}
	t.Fatal("no end message")
}

// TestReplayPaced: a paced replay of one queue from an offset sends that queue's messages in
// order, with no acks, then the end message.
func TestReplayPaced(t *testing.T) {
	a := serveAPI(t, testOptions(t, t.TempDir()), NATSOptions{QueuesPerTopic: 2})
	acks, sent := a.storeSpread(t, "orders.us", 20)
	sub, err := a.nc.SubscribeSync("paced.out")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	plan, err := a.client.Replay(a.ctx, api.ReplayRequest{Topic: "orders_us", Queues: []int32{1}, StartOffset: 3,
		Subject: "paced.out", Mode: api.ReplayPaced, Rate: 5000})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Queues) != 1 || plan.Queues[0] != (api.ReplayQueue{QueueID: 1, StartOffset: 3, StopOffset: 10}) || plan.MaxCount != 7 {
		t.Fatalf("plan %+v", plan)
	}
	prevPhys := int64(-1)
	for want := int64(3); ; want++ {
		r := a.next(t, sub)
		if end, ok := api.ParseReplayEnd(r.msg); ok {
			if end.Count != 7 || end.Error != "" || want != 10 {
				t.Fatalf("end %+v after offset %d", end, want-1)
			}
			return
		}
		if r.queue != 1 || r.offset != want || r.msg.Reply != "" {
			t.Fatalf("paced: queue %d offset %d (reply %q), want queue 1 offset %d, no reply", r.queue, r.offset, r.msg.Reply, want)
		}
		prevPhys = checkReplayed(t, r, acks, sent, prevPhys)
	}
}

// TestReplayRedeliversThenFails: an acked replay sends a message again when its ack does not come
// within AckWait, and fails once it was sent MaxDeliver times; the end message says why.
func TestReplayRedeliversThenFails(t *testing.T) {
	a := serveAPI(t, testOptions(t, t.TempDir()), NATSOptions{QueuesPerTopic: 1})
	a.storeSpread(t, "orders.eu", 3)
	sub, err := a.nc.SubscribeSync("redeliver.out")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	type outcome struct {
		res replay.Result
		err error
	}
	start := func(maxDeliver int) <-chan outcome {
		done := make(chan outcome, 1)
		go func() {
			res, err := replay.Run(a.ctx, a.Engine, replay.Request{Conn: a.conn, Topic: "orders_eu", Subject: "redeliver.out",
				AckWait: 20 * time.Millisecond, MaxDeliver: maxDeliver})
			done <- outcome{res, err}
		}()
		return done
	}

	// Seq 1's first send is not acked: it comes again, marked, and the replay completes.
	done := start(3)
	seen := map[int64]int{}
	for range 20 {
		r := a.next(t, sub)
		seen[r.seq]++
		if r.seq == 1 && seen[1] == 1 {
			continue // no ack
		}
		if r.seq == 1 && r.msg.Header.Get(api.HeaderReplayRedelivered) != "1" {
			t.Fatalf("second send of seq 1: headers %v", r.msg.Header)
		}
		if err := r.msg.Respond(nil); err != nil {
			t.Fatal(err)
		}
		if _, ok := api.ParseReplayEnd(r.msg); ok {
			break
		}
	}
	res := <-done
	if res.err != nil || res.res.Sent != 3 || res.res.Redelivered < 1 || seen[1] < 2 {
		t.Fatalf("replay: %+v, %v; seq 1 seen %d times", res.res, res.err, seen[1])
	}

	// Nothing is acked: each message goes out MaxDeliver times, then the replay fails.
	done = start(2)
	for range 20 {
		r := a.next(t, sub)
		if end, ok := api.ParseReplayEnd(r.msg); ok && end.Error != "" {
			break
		}
	}
	res = <-done
	if !errors.Is(res.err, replay.ErrAckTimeout) {
		t.Fatalf("a replay nobody acks: %+v, %v", res.res, res.err)
	}
}

// TestReplayNoReceiver: an acked replay to a subject nobody listens on fails at once (given that
// the engine's connection does not subscribe to ">": see runAcked).
func TestReplayNoReceiver(t *testing.T) {
	a := serveAPI(t, testOptions(t, t.TempDir()), NATSOptions{QueuesPerTopic: 1, Subjects: []string{"orders.>"}})
	a.storeSpread(t, "orders.eu", 2)
	_, err := replay.Run(a.ctx, a.Engine, replay.Request{Conn: a.conn, Topic: "orders_eu", Subject: "nobody.here"})
	if !errors.Is(err, replay.ErrNoReceiver) {
		t.Fatalf("replay to nobody: %v", err)
	}
}
