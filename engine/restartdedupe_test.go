package engine

import (
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/rocketstore/engine/internal/wire"
)

// TestRestartDedupeWindowBounds: after a restart, an id stored before it is found while the
// first copy is within the dedupe window, and only then: past the window the same id is
// stored again, and no lookup is made at all (the start sees that none can be a first copy).
func TestRestartDedupeWindowBounds(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	set := func(t time.Time) { mu.Lock(); now = t; mu.Unlock() }
	opts := testOptions(t, t.TempDir())
	opts.Now, opts.DedupeWindow = clock, 2*time.Minute
	request := func(s *served, id string) wire.Ack {
		t.Helper()
		nc := connect(t, s, "publisher")
		m := nats.NewMsg("orders.eu")
		m.Header.Set(nats.MsgIdHdr, id)
		reply, err := nc.RequestMsg(m, serveTimeout)
		if err != nil {
			t.Fatal(err)
		}
		a, err := wire.ParseReply(reply.Data)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	s := serve(t, opts, NATSOptions{})
	first := request(s, "order-1")
	if err := s.shutdown(); err != nil {
		t.Fatal(err)
	}

	set(now.Add(90 * time.Second)) // within the window of order-1
	s = serve(t, opts, NATSOptions{})
	if a := request(s, "order-1"); !a.Duplicate || a.QueueOffset != first.QueueOffset || a.QueueID != first.QueueID {
		t.Fatalf("within the window: %+v, want a duplicate of %+v", a, first)
	}
	if st := s.Ingress().Stats(); st.StoreLookups != 1 || st.StoreDuplicates != 1 {
		t.Fatalf("stats %+v", st)
	}
	if err := s.shutdown(); err != nil {
		t.Fatal(err)
	}

	set(now.Add(time.Minute + 1)) // 2 min 30 s after order-1: past its window
	s = serve(t, opts, NATSOptions{})
	if a := request(s, "order-1"); a.Duplicate {
		t.Fatalf("past the window: %+v, a duplicate", a)
	}
	if st := s.Ingress().Stats(); st.StoreLookups != 0 {
		t.Fatalf("%d lookups past the window", st.StoreLookups)
	}
}
