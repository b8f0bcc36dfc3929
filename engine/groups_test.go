package engine

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/rocketstore/engine/engine/api"
)

// publishAcked publishes n messages on subject with bodies prefix-i and waits for every ack.
func publishAcked(t testing.TB, nc *nats.Conn, subject, prefix string, n int) {
	t.Helper()
	for i := range n {
		m, err := nc.Request(subject, []byte(prefix+strconv.Itoa(i)), serveTimeout)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := api.ParseReply(m.Data); err != nil {
			t.Fatal(err)
		}
	}
}

// consumed collects what members were handed, by body.
type consumed struct {
	mu  sync.Mutex
	got map[string][]string // body -> members
}

func (c *consumed) add(member string, body []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.got[string(body)] = append(c.got[string(body)], member)
}

func (c *consumed) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.got)
}

// consume hands out messages of m until ctx ends, recording them.
func consume(ctx context.Context, name string, m *api.Member, c *consumed) error {
	for {
		rec, err := m.Next(ctx)
		if err != nil {
			return err
		}
		c.add(name, rec.Body())
	}
}

// TestGroupJoinLeaveExactlyOnce: a group's first member reads the topic; a second joins while it
// reads and takes half the queues; the first leaves; the second reads the rest and what comes
// after. Every message is handed out once, to one member: no duplicate on a clean join or leave.
func TestGroupJoinLeaveExactlyOnce(t *testing.T) {
	s := serve(t, testOptions(t, t.TempDir()), NATSOptions{})
	nc := connect(t, s, "publisher")
	publishAcked(t, nc, "orders", "a-", 2000)
	mc := connect(t, s, "members")
	cl := api.NewClient(mc)
	ctx, cancel := context.WithTimeout(context.Background(), serveTimeout)
	defer cancel()
	got := &consumed{got: map[string][]string{}}

	a, err := cl.Join(ctx, api.MemberConfig{Group: "billing", Topic: "orders", MaxBatch: 64, ClientID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if q := a.Queues(); len(q) != 4 {
		t.Fatalf("the first member holds %v, want the 4 queues", q)
	}
	for range 300 {
		rec, err := a.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got.add("a", rec.Body())
	}
	aCtx, aStop := context.WithCancel(ctx)
	aDone := make(chan error, 1)
	go func() { aDone <- consume(aCtx, "a", a, got) }()

	b, err := cl.Join(ctx, api.MemberConfig{Group: "billing", Topic: "orders", MaxBatch: 64, ClientID: "b"})
	if err != nil {
		t.Fatal(err)
	}
	bCtx, bStop := context.WithCancel(ctx)
	bDone := make(chan error, 1)
	go func() { bDone <- consume(bCtx, "b", b, got) }()
	// The join moves two queues, once a released them.
	for len(a.Queues()) != 2 || len(b.Queues()) != 2 {
		select {
		case <-ctx.Done():
			t.Fatalf("after b's join: a holds %v, b %v", a.Queues(), b.Queues())
		case <-time.After(10 * time.Millisecond):
		}
	}
	aStop()
	<-aDone
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for len(b.Queues()) != 4 {
		select {
		case <-ctx.Done():
			t.Fatalf("after a left: b holds %v", b.Queues())
		case <-time.After(10 * time.Millisecond):
		}
	}
	publishAcked(t, nc, "orders", "b-", 500)
	for got.len() < 2500 {
		select {
		case <-ctx.Done():
			t.Fatalf("%d of 2,500 messages handed out", got.len())
		case <-time.After(10 * time.Millisecond):
		}
	}
	bStop()
	<-bDone
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for body, members := range got.got {
		if len(members) != 1 {
			t.Errorf("%s handed out %d times: %v", body, len(members), members)
		}
	}
	// The group's offsets are at the queues' ends.
	for q := range int32(4) {
		off, ok := s.Engine.FetchOffset("billing", "orders", q)
		qs, _ := s.Engine.QueueOffsets("orders")
		if !ok || off != qs[q].Max {
			t.Errorf("queue %d committed at %d (%v), its end is %d", q, off, ok, qs[q].Max)
		}
	}
	if st := s.api.Groups().Stats(); st.Joins != 2 || st.Leaves != 2 || st.Redelivered != 0 {
		t.Errorf("coordinator stats %+v", st)
	}

}
