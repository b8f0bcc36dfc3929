package reader

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/internal/vfs"
)

// splitRecords cuts back-to-back records.
func splitRecords(t *testing.T, b []byte, count int) []commitlog.View {
	t.Helper()
	var out []commitlog.View
	for range count {
		v, err := commitlog.Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
		b = b[v.TotalSize():]
	}
	if len(b) != 0 {
		t.Fatalf("%d bytes after %d records", len(b), count)
	}
	return out
}

// TestRecordsSeveralQueues: one read of four queues returns each queue's records, byte for
// byte as the CommitLog holds them and in queue order, with each queue's next offset and bounds;
// the budget is shared, and reading on from the next offsets gets every record exactly once.
func TestRecordsSeveralQueues(t *testing.T) {
	s := newTestStore(t, vfs.NewMem(), "/store", small)
	want := map[int32][][]byte{}
	for i := range 200 {
		q := int32(i % 4)
		phys := s.put(msg{queue: q, body: body(i)})
		v, release, err := s.log.Read(phys)
		noErr(t, err)
		want[q] = append(want[q], bytes.Clone(v.Bytes()))
		release()
	}
	from := []QueueFrom{{0, 0}, {1, 0}, {2, 0}, {3, 10}}
	got := map[int32][][]byte{}
	for round := 0; round < 100; round++ {
		out, buf, err := s.r.Records(context.Background(), RecordsRequest{Topic: "T", Queues: from, Max: 20}, nil)
		noErr(t, err)
		total := 0
		for i, q := range out {
			if q.QueueID != from[i].QueueID || q.MinOffset != 0 || q.MaxOffset != 50 {
				t.Fatalf("queue %d: %+v", from[i].QueueID, q)
			}
			for k, v := range splitRecords(t, q.Records, q.Count) {
				if v.QueueID() != q.QueueID || v.QueueOffset() != from[i].Offset+int64(k) {
					t.Fatalf("queue %d: record %d of the read is %d/%d", q.QueueID, k, v.QueueID(), v.QueueOffset())
				}
				got[q.QueueID] = append(got[q.QueueID], bytes.Clone(v.Bytes()))
			}
			total += q.Count
			from[i].Offset = q.NextOffset
		}
		if total > 20 {
			t.Fatalf("round %d: %d records, more than Max 20", round, total)
		}
		if len(buf) == 0 {
			break
		}
	}
	for q := range int32(4) {
		start := 0
		if q == 3 {
			start = 10
		}
		if len(got[q]) != 50-start {
			t.Fatalf("queue %d: %d records, want %d", q, len(got[q]), 50-start)
		}
		for i, b := range got[q] {
			if !bytes.Equal(b, want[q][start+i]) {
				t.Fatalf("queue %d record %d differs from the CommitLog's", q, start+i)
			}
		}
	}
}

// TestRecordsBudgetHard: MaxBytes bounds the records of every queue together, and a record
// that no reply of MaxBytes can carry is TooLarge, with nothing of its queue read.
func TestRecordsBudgetHard(t *testing.T) {
	s := newTestStore(t, vfs.NewMem(), "/store", small)
	big := bytes.Repeat([]byte("x"), 2000)
	for i := range 8 {
		s.put(msg{queue: int32(i % 2), body: big})
	}
	out, buf, err := s.r.Records(context.Background(), RecordsRequest{Topic: "T", Queues: []QueueFrom{{0, 0}, {1, 0}}, MaxBytes: 5000}, nil)
	noErr(t, err)
	if len(buf) > 5000 || out[0].Count+out[1].Count != 2 {
		t.Fatalf("%d bytes, %d+%d records for MaxBytes 5000 and records of about 2,100", len(buf), out[0].Count, out[1].Count)
	}
	out, buf, err = s.r.Records(context.Background(), RecordsRequest{Topic: "T", Queues: []QueueFrom{{0, 0}}, MaxBytes: 1000}, nil)
	noErr(t, err)
	if len(buf) != 0 || !out[0].TooLarge || out[0].NextOffset != 0 {
		t.Fatalf("a record larger than the read: %+v, %d bytes", out[0], len(buf))
	}
}

// TestRecordsFilterAndStatus: a subject filter passes over other subjects, an empty queue and
// one read at its end say so, and an unknown queue is an error unless asked to read it empty.
func TestRecordsFilterAndStatus(t *testing.T) {
	s := newTestStore(t, vfs.NewMem(), "/store", small)
	for i := range 10 {
		s.put(msg{props: [][2]string{{"NATS_SUBJECT", fmt.Sprintf("orders.%d", i%2)}}, body: body(i)})
	}
	out, _, err := s.r.Records(context.Background(), RecordsRequest{Topic: "T", Subject: "orders.1",
		Queues: []QueueFrom{{0, 0}, {1, 0}}, UnknownIsEmpty: true}, nil)
	noErr(t, err)
	if out[0].Count != 5 || out[0].NextOffset != 10 || out[1].Status != NoMessageInQueue {
		t.Fatalf("filtered read: %+v %+v", out[0], out[1])
	}
	if _, _, err := s.r.Records(context.Background(), RecordsRequest{Topic: "T", Queues: []QueueFrom{{7, 0}}}, nil); err == nil {
		t.Fatal("an unknown queue read without UnknownIsEmpty")
	}
	out, _, err = s.r.Records(context.Background(), RecordsRequest{Topic: "T", Queues: []QueueFrom{{0, 10}}}, nil)
	noErr(t, err)
	if out[0].Status != OffsetOverflowOne {
		t.Fatalf("at the end: %v", out[0].Status)
	}
}

// TestRecordsLongPoll: a read of queues all at their end waits for a message in any of them.
func TestRecordsLongPoll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newTestStore(t, vfs.NewMem(), "/store", small)
		s.put(msg{queue: 0, body: body(0)})
		s.put(msg{queue: 1, body: body(1)})
		done := make(chan []QueueRecords)
		go func() {
			out, _, err := s.r.Records(context.Background(), RecordsRequest{Topic: "T", Queues: []QueueFrom{{0, 1}, {1, 1}},
				Wait: time.Minute}, nil)
			noErr(t, err)
			done <- out
		}()
		synctest.Wait() // blocked on Dispatched
		s.put(msg{queue: 1, body: body(2)})
		out := <-done
		if out[1].Count != 1 || out[0].Count != 0 {
			t.Fatalf("after a message in queue 1: %+v", out)
		}
	})
}

// TestRecordsGap: with a Gap, each queue's records follow that many zero bytes of the buffer,
// after what the buffer held: the layout [prefix][gap][queue 0][gap][queue 1]..., each
// QueueRecords.Records exactly its queue's records, as without the gap.
func TestRecordsGap(t *testing.T) {
	s := newTestStore(t, vfs.NewMem(), "/store", small)
	for i := range 40 {
		s.put(msg{queue: int32(i % 4), body: body(i)})
	}
	from := []QueueFrom{{0, 0}, {1, 3}, {2, 0}, {3, 9}}
	plain, _, err := s.r.Records(context.Background(), RecordsRequest{Topic: "T", Queues: from, Max: 24}, nil)
	noErr(t, err)
	const gap = 37
	prefix := []byte("RSR1")
	out, buf, err := s.r.Records(context.Background(), RecordsRequest{Topic: "T", Queues: from, Max: 24, Gap: gap},
		bytes.Clone(prefix))
	noErr(t, err)
	want := bytes.Clone(prefix)
	for i, q := range out {
		if q.Count != plain[i].Count || !bytes.Equal(q.Records, plain[i].Records) {
			t.Fatalf("queue %d: %d records (%d bytes) with the gap, %d (%d bytes) without", q.QueueID, q.Count,
				len(q.Records), plain[i].Count, len(plain[i].Records))
		}
		want = append(append(want, make([]byte, gap)...), plain[i].Records...)
	}
	if !bytes.Equal(buf, want) {
		t.Fatalf("the buffer is not [prefix][gap][records]...: %d bytes, want %d", len(buf), len(want))
	}
}
