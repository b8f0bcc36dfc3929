package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/rocketstore/engine/engine/api"
)

// rdReceiver subscribes to a replay's subject, keeps what comes and, in acked mode, acks it.
type rdReceiver struct {
	mu   sync.Mutex
	msgs map[string]*nats.Msg // by Rs-Replay-Seq: a message sent again is kept once
	end  chan api.ReplayEnd   // the end message
}

func receiveReplay(t *testing.T, nc *nats.Conn, subject string, ack bool) *rdReceiver {
	t.Helper()
	r := &rdReceiver{msgs: map[string]*nats.Msg{}, end: make(chan api.ReplayEnd, 1)}
	sub, err := nc.Subscribe(subject, func(m *nats.Msg) {
		if ack && m.Reply != "" {
			_ = m.Respond(nil)
		}
		if end, ok := api.ParseReplayEnd(m); ok {
			select {
			case r.end <- end:
			default:
			}
			return
		}
		r.mu.Lock()
		r.msgs[m.Header.Get(api.HeaderReplaySeq)] = m
		r.mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	return r
}

// waitEnd waits for the end message and returns what came before it, by message id.
func (r *rdReceiver) waitEnd(t *testing.T) (api.ReplayEnd, map[string]*nats.Msg) {
	t.Helper()
	select {
	case end := <-r.end:
		r.mu.Lock()
		defer r.mu.Unlock()
		byID := map[string]*nats.Msg{}
		for _, m := range r.msgs {
			byID[m.Header.Get(api.HeaderMsgID)] = m
		}
		return end, byID
	case <-time.After(rdTimeout):
		t.Fatal("no end message")
	}
	return api.ReplayEnd{}, nil
}

func TestReplayCommand(t *testing.T) {
	f := startReadEngine(t)
	topic := f.acks[0].Topic

	// Acked: the receiver acks, the command follows the replay to its end.
	rcv := receiveReplay(t, f.nc, "replay.acked", true)
	out := mustRead(t, with(f.natsArgs(), "replay", "--topic", topic, "--offset", "0", "--to", "replay.acked",
		"--max-in-flight", "4", "--json")...)
	var res replayOutcome
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if res.Sent == nil || *res.Sent != rdOrders || res.MaxCount != rdOrders || res.Error != "" || res.Mode != api.ReplayAcked ||
		len(res.Queues) != 2 || res.Topic != topic || res.Subject != "replay.acked" || res.ReplayID == "" {
		t.Fatalf("replay outcome %s", out)
	}
	end, got := rcv.waitEnd(t)
	if end.Count != rdOrders || end.Error != "" || end.ReplayID != res.ReplayID || len(got) != rdOrders {
		t.Fatalf("end %+v, %d messages", end, len(got))
	}
	for i, a := range f.acks {
		m := got[a.MsgID]
		if m == nil || !bytes.Equal(m.Data, f.msgs[i].Data) || m.Header.Get("X-Note") != f.msgs[i].Header.Get("X-Note") ||
			m.Header.Get(nats.MsgIdHdr) != f.msgs[i].Header.Get(nats.MsgIdHdr) ||
			m.Header.Get(api.HeaderQueueOffset) != strconv.FormatInt(a.QueueOffset, 10) {
			t.Fatalf("order %d replayed as %+v", i, m)
		}
	}

	// Paced, one queue, from a time, as text.
	rcv = receiveReplay(t, f.nc, "replay.paced", false)
	in1 := f.ordersIn(1)
	from := f.acks[in1[3]]
	out = mustRead(t, with(f.natsArgs(), "replay", "--topic", topic, "--queue-id", "1", "--time", fmt.Sprint(from.StoreTimestamp),
		"--to", "replay.paced", "--rate", "100000")...)
	end, got = rcv.waitEnd(t)
	want := 0
	for _, i := range in1 {
		if f.acks[i].StoreTimestamp >= from.StoreTimestamp {
			want++
		}
	}
	if int(end.Count) != want || len(got) != want || got[from.MsgID] == nil {
		t.Fatalf("paced replay from %d: end %+v, %d messages, want %d\n%s", from.StoreTimestamp, end, len(got), want, out)
	}
	for _, s := range []string{"replay " + end.ReplayID + ": topic orders_eu onto replay.paced, paced",
		"QUEUE", fmt.Sprintf("replay %s done: %d messages sent onto replay.paced", end.ReplayID, want)} {
		if !strings.Contains(out, s) {
			t.Fatalf("replay output: no %q in\n%s", s, out)
		}
	}

	// --no-wait: the plan only.
	rcv = receiveReplay(t, f.nc, "replay.nowait", true)
	out = mustRead(t, with(f.natsArgs(), "replay", "--topic", topic, "--offset", "5", "--to", "replay.nowait", "--no-wait", "--json")...)
	res = replayOutcome{}
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.Sent != nil || res.MaxCount != rdOrders-10 {
		t.Fatalf("replay --no-wait: %v %s", err, out)
	}
	if end, _ := rcv.waitEnd(t); end.ReplayID != res.ReplayID || end.Count != rdOrders-10 {
		t.Fatalf("replay --no-wait: end %+v", end)
	}

	// Errors.
	failRead(t, 1, `topic "nope" has no queues in this store`, with(f.natsArgs(), "replay", "--topic", "nope", "--offset", "0", "--to", "x")...)
	failRead(t, 1, `topic "orders_eu" has no queue 7`, with(f.natsArgs(), "replay", "--topic", topic, "-q", "7", "--offset", "0", "--to", "x")...)
	failRead(t, 2, "replay is online only", "replay", "--store", f.dir, "--topic", topic, "--offset", "0", "--to", "x")
	failRead(t, 2, "--offset and --time can't be used together", with(f.natsArgs(), "replay", "--topic", topic, "--offset", "0", "--time", "now", "--to", "x")...)
	failRead(t, 2, "missing flags: --offset", with(f.natsArgs(), "replay", "--topic", topic, "--to", "x")...)
	failRead(t, 2, "--acked and --rate can't be used together", with(f.natsArgs(), "replay", "--topic", topic, "--offset", "0", "--to", "x", "--acked", "--rate", "5")...)
	failRead(t, 2, "without wildcards", with(f.natsArgs(), "replay", "--topic", topic, "--offset", "0", "--to", "x.>")...)
	failRead(t, 2, "replay needs a running engine", "replay", "--topic", topic, "--offset", "0", "--to", "x")
}
