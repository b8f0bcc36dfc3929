package meta

import (
	"reflect"
	"sync"
	"testing"
)

func TestConsumerOffsets(t *testing.T) {
	o := NewConsumerOffsets(ConsumerOffsetFile{})
	if _, ok := o.Offset("g", "t", 0); ok {
		t.Fatal("offset in an empty table")
	}
	o.SetOffset("g", "t", 0, 10)
	o.SetOffset("g", "t", 3, 30)
	o.SetOffset("h", "t", 0, 5)
	o.SetOffset("g", "t", 0, 11)
	if off, ok := o.Offset("g", "t", 0); off != 11 || !ok {
		t.Fatalf("%d, %v", off, ok)
	}
	if _, ok := o.Offset("g", "t", 1); ok {
		t.Fatal("offset for a queue never set")
	}
	snap := o.Snapshot()
	want := map[string]map[int32]int64{"t@g": {0: 11, 3: 30}, "t@h": {0: 5}}
	if !reflect.DeepEqual(snap.OffsetTable, want) {
		t.Fatalf("snapshot %+v", snap.OffsetTable)
	}
	// The snapshot and the table share nothing.
	o.SetOffset("g", "t", 0, 99)
	snap.OffsetTable["t@h"][0] = -1
	if snap.OffsetTable["t@g"][0] != 11 {
		t.Fatal("snapshot changed with the table")
	}
	if off, _ := o.Offset("h", "t", 0); off != 5 {
		t.Fatal("table changed with the snapshot")
	}
	// So do a table and the file it was made from.
	f := ConsumerOffsetFile{OffsetTable: map[string]map[int32]int64{"t@g": {0: 1}}}
	o2 := NewConsumerOffsets(f)
	o2.SetOffset("g", "t", 0, 2)
	if f.OffsetTable["t@g"][0] != 1 {
		t.Fatal("table shares maps with its file")
	}
	var zero ConsumerOffsets
	zero.SetOffset("g", "t", 0, 1)
	if off, ok := zero.Offset("g", "t", 0); off != 1 || !ok {
		t.Fatal("zero ConsumerOffsets unusable")
	}
}

// TestConsumerOffsetsConcurrent commits from many goroutines while snapshots are taken; run it
// with -race. Each goroutine owns one queue, so the final table is known.
func TestConsumerOffsetsConcurrent(t *testing.T) {
	o := NewConsumerOffsets(ConsumerOffsetFile{})
	var wg sync.WaitGroup
	for q := range int32(8) {
		wg.Go(func() {
			for off := range int64(200) {
				o.SetOffset("g", "t", q, off)
				if got, _ := o.Offset("g", "t", q); got != off {
					t.Errorf("queue %d: read %d after writing %d", q, got, off)
					return
				}
			}
		})
	}
	wg.Go(func() {
		for range 50 {
			_ = o.Snapshot()
		}
	})
	wg.Wait()
	for q := range int32(8) {
		if got, _ := o.Offset("g", "t", q); got != 199 {
			t.Fatalf("queue %d: %d", q, got)
		}
	}
}
