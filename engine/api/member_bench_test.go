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
