package reader

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rocketstore/engine/internal/vfs"
)

// TestConcurrentReaders runs consumers of every queue, with and without tag filters, plus
// key and id lookups, while one writer goroutine appends and dispatches across tiny segments,
// ConsumeQueue files and index files. Consumers long-poll: they only ever wait for the
// Dispatched watermark, and each stops once it has every message it expects, so the test
// ends on events, never on time. Run with -race.
func TestConcurrentReaders(t *testing.T) {
	s := newTestStore(t, vfs.NewMem(), "/store", tiny)
	const queues, perQueue = 3, 150
	tag := func(i int) string { return []string{"Aa", "BB", "C"}[i%3] } // Aa and BB share a hash
	for q := range int32(queues) {
		if _, err := s.cq.FindOrCreate("T", q); err != nil { // consumers may start first
			t.Fatal(err)
		}
	}

	type seen struct {
		queue int32
		m     Message
	}
	found := make(chan seen, queues*perQueue)
	// A failure cancels ctx, so that no goroutine is left waiting for what will not come.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	fail := func(format string, args ...any) {
		t.Errorf(format, args...)
		cancel()
	}
	var wg sync.WaitGroup
	consume := func(q int32, tags []string, want func(i int) bool) {
		wg.Go(func() {
			var next int64
			expect := 0
			for i := range perQueue {
				if want(i) {
					expect++
				}
			}
			for got := 0; got < expect; {
				res, err := s.r.Get(ctx, GetRequest{Topic: "T", QueueID: q, Offset: next, Max: 7, Tags: tags, Wait: time.Hour})
				if err != nil {
					fail("queue %d: %v", q, err)
					return
				}
				for _, m := range res.Messages {
					i := int(m.QueueOffset)
					if !want(i) || string(m.Body) != fmt.Sprintf("%d/%d", q, i) || m.Tags != tag(i) || m.QueueID != q {
						fail("queue %d filter %v: unexpected message %d %q tags %q", q, tags, i, m.Body, m.Tags)
						return
					}
					if tags == nil {
						found <- seen{q, m}
					}
					got++
				}
				if res.NextOffset < next {
					fail("queue %d: next offset went back from %d to %d", q, next, res.NextOffset)
					return
				}
				next = res.NextOffset
			}
		})
	}
	for q := range int32(queues) {
		consume(q, nil, func(int) bool { return true })
		consume(q, []string{"BB"}, func(i int) bool { return tag(i) == "BB" })
		consume(q, []string{"Aa", "C"}, func(i int) bool { return tag(i) != "BB" })
	}
	// Lookups by id and key of messages the consumers have seen.
	wg.Go(func() {
		for range queues * perQueue {
			var sn seen
			select {
			case sn = <-found:
			case <-ctx.Done():
				return
			}
			m, err := s.r.Lookup(sn.m.MsgID)
			if err != nil || m.PhysicalOffset != sn.m.PhysicalOffset {
				fail("lookup %s: %v", sn.m.MsgID, err)
				return
			}
			// A unit is in its ConsumeQueue before its record's keys are in the index
			// (dispatch builds them in that order); once Dispatched passes the record,
			// both are there.
			if err := s.dispatched.Wait(ctx, sn.m.PhysicalOffset+int64(sn.m.Size)); err != nil {
				return
			}
			key := fmt.Sprintf("k%d-%d", sn.queue, sn.m.QueueOffset)
			msgs, err := s.r.Query(t.Context(), QueryRequest{Topic: "T", Key: key})
			if err != nil || !slices.Equal(physOf(msgs), []int64{sn.m.PhysicalOffset}) {
				fail("query %s: %v %v", key, physOf(msgs), err)
				return
			}
		}
	})

	for i := range perQueue { // the writer: this goroutine
		for q := range int32(queues) {
			s.put(msg{queue: q, tags: tag(i), keys: fmt.Sprintf("k%d-%d", q, i), body: fmt.Appendf(nil, "%d/%d", q, i)})
		}
	}
	wg.Wait()
	for q := range int32(queues) {
		offs, err := s.r.OffsetForTime("T", q, 0)
		if err != nil || offs != 0 {
			t.Fatalf("OffsetForTime: %d %v", offs, err)
		}
	}
}
