package main

import (
	"encoding/json"
	"fmt"
	"syscall"
	"testing"

	"github.com/nats-io/nats.go"
)

// wireBatchAck is a batched ack as docs/BATCHED-ACKS.md documents it.
type wireBatchAck struct {
	Stream string `json:"stream"`
	Stored []struct {
		Seq, Count, Step uint64
	} `json:"stored"`
	Refused []struct {
		Seq, Count uint64
		Code       int
	} `json:"refused"`
	Through uint64 `json:"through"`
}

// TestSIGTERMAnswersBatchedInFlight: a SIGTERM under batched load (a client of its own
// speaking the documented protocol: Rs-Seq and the ack subject) stops the engine cleanly, and
// every message the engine received is answered before it exits: its tracker's last count
// (logged) covers them all, and the client has every one of those answers that reached it, none
// twice; what was published once the engine had stopped taking messages gets NATS's
// no-responders status instead. The embedded server stops with the engine, so the last acks
// can be cut off on their way to the client (the server flushes a closing connection within
// 100 ms only): the client then resends and is answered from the store. With an external
// server nothing is cut off: cmd/engine/e2e TestBatchedAnswersAtSIGTERM. Every record stored
// is one the engine acked as stored.
func TestSIGTERMAnswersBatchedInFlight(t *testing.T) {
	dir := t.TempDir()
	c, url, _ := runEmbedded(t, dir)
	closed := make(chan struct{})
	nc, err := nats.Connect(url, nats.MaxReconnects(0), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}),
		nats.ClosedHandler(func(*nats.Conn) { close(closed) }))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	inbox := nc.NewInbox()
	// A channel subscription: nats.go's read loop puts every message received in it, so none is
	// lost when the connection closes with the embedded server (an asynchronous subscription's
	// pending messages would be dropped then, undelivered).
	acksIn := make(chan *nats.Msg, 1<<20)
	sub, err := nc.ChanSubscribe(inbox, acksIn)
	if err != nil {
		t.Fatal(err)
	}
	_ = sub
	stored, refused := map[uint64]int{}, map[uint64]int{}
	acks, noResponders := 0, 0
	var through uint64
	take := func(m *nats.Msg) {
		if len(m.Data) == 0 && m.Header.Get("Status") == "503" {
			noResponders++ // published while no engine subscribed: NATS answers for it
			return
		}
		var a wireBatchAck
		if err := json.Unmarshal(m.Data, &a); err != nil || a.Stream != "S" {
			t.Errorf("not a batched ack of stream S: %q", m.Data)
			return
		}
		acks++
		for _, r := range a.Stored {
			for k := range r.Count {
				stored[r.Seq+k*r.Step]++
			}
		}
		for _, r := range a.Refused {
			for k := range r.Count {
				refused[r.Seq+k]++
			}
		}
		through = max(through, a.Through)
	}
	// drain takes what has arrived, without waiting.
	drain := func() {
		for {
			select {
			case m := <-acksIn:
				take(m)
			default:
				return
			}
		}
	}
	const most = 1_000_000 // bounded: the engine stops long before
	signalled := false
	var sent uint64
	for seq := uint64(1); seq <= most; seq++ {
		drain()
		floor, n := through, acks
		m := nats.NewMsg(fmt.Sprintf("sigterm.s%d", seq%4))
		m.Header.Set("Rs-Seq", fmt.Sprintf("S %d %d", seq, floor))
		m.Reply, m.Data = inbox, []byte("a message of the batched stream S")
		if nc.PublishMsg(m) != nil || !nc.IsConnected() {
			break // the embedded server is gone with the engine
		}
		sent = seq
		if !signalled && n >= 10 {
			c.signal(syscall.SIGTERM)
			signalled = true
		}
	}
	if code := c.wait(); code != 0 {
		t.Fatalf("exit %d after SIGTERM", code)
	}
	stop, _ := c.waitLog(0, "ingress stopped")
	received := int64(stop["received"].(float64))
	tracked, _ := c.waitLog(0, "batched acks stopped")
	engineAnswered := int64(tracked["acked"].(float64) + tracked["refused"].(float64))
	// The connection closed with the server, after its read loop had put in the channel every
	// message it received.
	<-closed
	drain()
	answered := int64(0)
	for seq := uint64(1); seq <= sent; seq++ {
		switch k := stored[seq] + refused[seq]; {
		case k > 1 && refused[seq] > 0:
			t.Fatalf("seq %d answered %d times", seq, k)
		case k > 0:
			answered++
		}
	}
	t.Logf("sent %d, the engine received %d and answered %d; %d answers reached the client in %d acks, %d no-responders",
		sent, received, engineAnswered, answered, acks, noResponders)
	if !signalled || received == 0 || engineAnswered != received || answered > received {
		t.Fatalf("the engine received %d messages and answered %d (%d reached the client)", received, engineAnswered, answered)
	}

	// Every record stored is a sequence acked as stored.
	c, _, _ = runEmbedded(t, dir)
	c.signal(syscall.SIGTERM)
	if code := c.wait(); code != 0 {
		t.Fatalf("restart: exit %d", code)
	}
	var total int64
	for q := range 4 {
		topic := fmt.Sprintf("sigterm_s%d", q)
		out := runCLI(t, "offsets", "--store", dir, "--topic", topic, "--json", "--commit-log-size", fmt.Sprint(commitLogSize),
			"--cq-units", fmt.Sprint(cqUnits), "--index-slots", "1024", "--index-entries", "8192")
		for _, line := range splitLines(out) {
			var b struct{ MinOffset, MaxOffset int64 }
			if err := json.Unmarshal([]byte(line), &b); err != nil {
				t.Fatal(err)
			}
			total += b.MaxOffset - b.MinOffset
		}
	}
	if engineAcked := int64(tracked["acked"].(float64)); total != engineAcked || int64(len(stored)) > total {
		t.Fatalf("%d records stored; the engine acked %d as stored, %d of those acks reached the client", total, engineAcked, len(stored))
	}
}
