package publisher_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/rocketstore/engine/engine"
	"github.com/rocketstore/engine/engine/publisher"
)

// TestLingerOnPublish: a Publish after the linger sends the open packs before its own message,
// whatever packLoop's timer does (here it is an hour of real time away): while publishing goes
// on, packs go when their linger is over, not when a busy machine gets round to the timer. The
// publisher's clock is moved by hand.
func TestLingerOnPublish(t *testing.T) {
	s := serve(t, testOptions(t, t.TempDir(), engine.FlushSync), engine.NATSOptions{})
	nc := connect(t, s.ClientURL())
	var (
		clock atomic.Int64
		mu    sync.Mutex
		out   []*nats.Msg
	)
	sentNow := func() []*nats.Msg {
		mu.Lock()
		defer mu.Unlock()
		return out
	}
	opts := publisher.Options{Linger: time.Hour, PublishMsg: func(m *nats.Msg) error {
		mu.Lock()
		out = append(out, copyMsg(m))
		mu.Unlock()
		return nc.PublishMsg(m)
	}}
	p := newPublisher(t, nc, publisher.WithClock(opts, func() time.Duration { return time.Duration(clock.Load()) }))
	ctx := context.Background()
	var msgs []sent
	publish := func(subject, body string) {
		t.Helper()
		f, err := p.Publish(ctx, subject, []byte(body), nil)
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, sent{subject: subject, body: []byte(body), future: f})
	}

	publish("linger.a", "a1") // opens the packs: the linger starts at 0
	publish("linger.a", "a2")
	clock.Store(int64(time.Hour - time.Nanosecond))
	publish("linger.b", "b1") // not over yet
	if got := sentNow(); len(got) != 0 {
		t.Fatalf("%d messages sent before the linger was over", len(got))
	}
	clock.Store(int64(time.Hour))
	publish("linger.b", "b2") // over: the open packs go first, b2 opens a new one
	got := sentNow()
	if len(got) != 2 || got[0].Subject != "linger.a" || entries(got[0]) != 2 || got[1].Subject != "linger.b" || entries(got[1]) != 1 {
		t.Fatalf("sent %d messages, want the pack of linger.a (2) then linger.b's (1): %v", len(got), got)
	}
	if s0, _ := seqOf(got[0]); s0 != 1 {
		t.Fatalf("the first pack starts at seq %d, want 1", s0)
	}
	if s1, _ := seqOf(got[1]); s1 != 3 {
		t.Fatalf("the second starts at seq %d, want 3", s1)
	}

	flush(t, p) // b2 goes now; everything is acked
	if got := sentNow(); len(got) != 3 || got[2].Subject != "linger.b" {
		t.Fatalf("after Flush, %d messages sent, want 3", len(got))
	}
	checkExactlyOnce(t, s.Engine, msgs)
}
