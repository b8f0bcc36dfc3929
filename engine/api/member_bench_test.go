package api

import (
	"context"
	"testing"

	"github.com/rocketstore/engine/internal/store/commitlog"
)

// BenchmarkMemberHandOut: a member taking a batched read's reply of 1,024 records (128 B bodies)
// into its buffer and handing each out with Next, without NATS or an engine: the member's own
// CPU per message, which `engine bench --preset issue28` sees only mixed with NATS's.
func BenchmarkMemberHandOut(b *testing.B) {
	const n = 1024
	var data []byte
	for range n {
		var err error
		data, err = commitlog.AppendRecord(data, &commitlog.Message{Topic: "bench", Body: make([]byte, 128),
			Properties: []byte("NATS_SUBJECT\x01bench.x\x02UNIQ_KEY\x010123456789ABCDEF0123456789ABCDEF\x02")},
			commitlog.EncodeOptions{})
		if err != nil {
			b.Fatal(err)
		}
	}
	s := &session{kick: make(chan struct{}, 1)}
	q := &heldQueue{s: s, id: 0, epoch: 1}
	m := &Member{cfg: MemberConfig{MaxBatch: n, Buffer: 2 * n}, queues: map[int32]*heldQueue{0: q},
		ready: make(chan struct{}, 1), control: make(chan struct{}, 1)}
	ctx := context.Background()
	for b.Loop() {
		req := ReadRequest{Queues: []ReadQueue{{QueueID: 0, Offset: q.next, Epoch: 1}}}
		sec := []ReadSection{{QueueID: 0, Status: ReadFound, NextOffset: q.next + n, MaxOffset: q.next + n, Count: n, Data: data}}
		if got := m.take(s, req, sec); got != n {
			b.Fatalf("took %d, want %d", got, n)
		}
		for range n {
			if _, err := m.Next(ctx); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/msg")
}

// TestMemberBufferedFollowsTheBuffer: Buffered (read without the member's lock) says what Next
// can hand out after each change of the buffer: a reply taken, a message handed out, the
// buffer handed out whole, a queue's messages discarded (a revocation, a fence, a drop).
func TestMemberBufferedFollowsTheBuffer(t *testing.T) {
	var data []byte
	for range 3 {
		var err error
		if data, err = commitlog.AppendRecord(data, &commitlog.Message{Topic: "t", Body: []byte("x")}, commitlog.EncodeOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	s := &session{kick: make(chan struct{}, 1)}
	q0, q1 := &heldQueue{s: s, id: 0, epoch: 1}, &heldQueue{s: s, id: 1, epoch: 1}
	m := &Member{cfg: MemberConfig{MaxBatch: 3, Buffer: 6}, queues: map[int32]*heldQueue{0: q0, 1: q1},
		ready: make(chan struct{}, 1), control: make(chan struct{}, 1)}
	take := func() {
		req := ReadRequest{Queues: []ReadQueue{{QueueID: 0, Offset: q0.next, Epoch: 1}, {QueueID: 1, Offset: q1.next, Epoch: 1}}}
		m.take(s, req, []ReadSection{
			{QueueID: 0, Status: ReadFound, NextOffset: q0.next + 3, MaxOffset: 100, Count: 3, Data: data},
			{QueueID: 1, Status: ReadFound, NextOffset: q1.next + 3, MaxOffset: 100, Count: 3, Data: data}})
	}
	want := func(n int, after string) {
		t.Helper()
		if got := m.Buffered(); got != n {
			t.Fatalf("after %s: Buffered %d, want %d", after, got, n)
		}
	}
	want(0, "nothing")
	take()
	want(6, "a reply of 6 messages")
	for i := range 6 {
		if _, err := m.Next(t.Context()); err != nil {
			t.Fatal(err)
		}
		want(5-i, "a message handed out")
	}
	take()
	want(6, "another reply")
	m.mu.Lock()
	m.discardLocked(q1)
	m.mu.Unlock()
	want(3, "queue 1's messages discarded")
}
