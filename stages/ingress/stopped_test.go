package ingress

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/rocketstore/engine/internal/wire"
	"github.com/rocketstore/engine/stages/ingress/batched"
)

// TestAbortRefusesBatchedInAcks: messages of a batched-ack stream that ingress holds when it
// aborts (packs whose runs wait in a worker's channel or a callback, plain batched messages)
// are refused to their stream in its acks, 503 per sequence, each counted once; none gets a
// plain reply on the ack subject, which would mean the engine refused the protocol itself.
func TestAbortRefusesBatchedInAcks(t *testing.T) {
	h := newHarness(t, harnessOpts{gated: true, outCap: 1, cfg: func(c *Config) {
		c.Workers, c.WorkerQueue, c.MaxBatch = 1, 2, 4
		c.Batched = &batched.Config{}
	}})
	inbox := h.pub.NewInbox()
	acks, err := h.pub.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	if err := acks.SetPendingLimits(-1, -1); err != nil {
		t.Fatal(err)
	}
	const packs, perPack = 40, 10
	seq := uint64(1)
	for p := range packs {
		var entries []packEntry
		for i := range perPack {
			entries = append(entries, packEntry{data: fmt.Sprintf("p%d-%d", p, i)})
		}
		m := packMsg("abort.packs", fmt.Sprintf("S %d 0", seq), fmt.Sprint(perPack), appendPack(nil, entries...))
		m.Reply = inbox
		if err := h.pub.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
		seq += perPack
		one := nats.NewMsg("abort.packs")
		one.Header.Set(wire.HeaderSeq, fmt.Sprintf("S %d 0", seq))
		one.Reply, one.Data = inbox, []byte("single")
		if err := h.pub.PublishMsg(one); err != nil {
			t.Fatal(err)
		}
		seq++
	}
	total := seq - 1
	if err := h.pub.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := h.nc.Flush(); err != nil { // every message has reached ingress's client
		t.Fatal(err)
	}
	h.cancel()
	select {
	case err := <-h.runErr:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Run = %v", err)
		}
		h.runErr <- err
	case <-time.After(waitTimeout):
		t.Fatal("Run did not return on abort")
	}
	h.openGate()
	<-h.app.done
	h.closeAcks() // the tracker answers everything it was handed, then stops

	if err := h.nc.Flush(); err != nil { // the acks are at the server
		t.Fatal(err)
	}
	if err := h.pub.Flush(); err != nil { // and read by the publisher's connection
		t.Fatal(err)
	}
	answered := make(map[uint64]int)
	refused := 0
	for {
		m, err := acks.NextMsg(time.Millisecond)
		if errors.Is(err, nats.ErrTimeout) {
			break // every ack the tracker sent is in (the flushes above)
		} else if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(m.Data), `"stream"`) {
			t.Fatalf("a plain reply on the ack subject: %s", m.Data)
		}
		a, err := wire.ParseBatchAck(m.Data)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range storedSeqs(a) {
			answered[s]++
		}
		for _, r := range a.Refused {
			if r.Code != wire.CodeUnavailable {
				t.Fatalf("refused %+v, want 503", r)
			}
			for s := r.Seq; s < r.Seq+r.Count; s++ {
				answered[s]++
				refused++
			}
		}
	}
	stored := len(h.app.snapshot())
	for s := uint64(1); s <= total; s++ {
		if answered[s] != 1 {
			t.Fatalf("seq %d answered %d times (%d stored, %d refused of %d)", s, answered[s], stored, refused, total)
		}
	}
	st := h.in.Stats()
	if refused == 0 || st.Aborted != int64(refused) {
		t.Fatalf("%d refused, %d stored, stats %+v", refused, stored, st)
	}
}
