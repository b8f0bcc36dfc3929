package inbox

import (
	"testing"
	"testing/synctest"
)

type item struct{ cost int64 }

func (i item) FFCost() int64 { return i.cost }

// TestFireAndForgetBounds: fire-and-forget items are taken up to the message and byte bounds,
// counted until Done, never waited for; an empty inbox takes even one over the byte bound; a
// negative bound is no limit.
func TestFireAndForgetBounds(t *testing.T) {
	b := New[item](4, 3, 100)
	if !b.PutFF(item{cost: 150}) {
		t.Fatal("an empty inbox refused an item over the byte bound")
	}
	if b.PutFF(item{cost: 1}) {
		t.Fatal("took an item past the byte bound")
	}
	got := b.Take(nil)
	if len(got) != 1 || b.PutFF(item{cost: 1}) {
		t.Fatalf("took %d; an item taken and not done still counts", len(got))
	}
	b.Done(got)
	for i := range 3 {
		if !b.PutFF(item{cost: 30}) {
			t.Fatalf("refused item %d within the bounds", i)
		}
	}
	if b.PutFF(item{cost: 1}) {
		t.Fatal("took a fourth item past the message bound")
	}
	if b.Depth() != 3 {
		t.Fatalf("depth %d", b.Depth())
	}
	unbounded := New[item](1, -1, -1)
	for i := range 10_000 {
		if !unbounded.PutFF(item{cost: 1 << 20}) {
			t.Fatalf("a negative bound refused item %d", i)
		}
	}
}

// TestPutWaitsForRoom: a job that may wait waits while maxWaiting are queued or taken and not
// done, and goes in once Done frees room; TryPut never waits; a closed abort ends the wait; the
// worker is woken by every put; fire-and-forget items do not take the waiting jobs' room.
func TestPutWaitsForRoom(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New[item](2, 10, 1000)
		if !b.PutFF(item{cost: 10}) || !b.Put(item{}, nil, nil) || !b.TryPut(item{}) {
			t.Fatal("refused within the bounds")
		}
		if b.TryPut(item{}) {
			t.Fatal("TryPut took a third waiting job")
		}
		<-b.Wake()
		put := make(chan bool)
		go func() { put <- b.Put(item{}, nil, nil) }()
		synctest.Wait()
		select {
		case <-put:
			t.Fatal("Put did not wait for room")
		default:
		}
		got := b.Take(nil)
		if len(got) != 3 {
			t.Fatalf("took %d", len(got))
		}
		b.Done(got)
		if !<-put {
			t.Fatal("Put gave up")
		}
		abort := make(chan struct{})
		if !b.Put(item{}, nil, abort) {
			t.Fatal("refused with room")
		}
		go func() { put <- b.Put(item{}, nil, abort) }()
		synctest.Wait()
		close(abort)
		if <-put {
			t.Fatal("Put went in after the abort without room")
		}
	})
}
