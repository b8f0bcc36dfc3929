package appender

import (
	"errors"
	"math"
	"testing"

	"github.com/rocketstore/engine/internal/store/consumequeue"
	"github.com/rocketstore/engine/internal/vfs"
)

// TestAppenderQueueAtMaxOffset: a queue whose next offset is its ConsumeQueue's last (the seam:
// NextOffsets and StartOffset start it there) stores its last records and then refuses the next
// with ErrQueueFull, storing nothing of it (stored, its unit would be refused by dispatch, which
// stops the engine, and recovery would stop at it on every start); other queues go on. Without
// a bound the counter's own end, MaxInt64, is the limit.
func TestAppenderQueueAtMaxOffset(t *testing.T) {
	cq, err := consumequeue.Open(consumequeue.Options{FS: vfs.NewMem(), Root: "/cq"})
	if err != nil {
		t.Fatal(err)
	}
	defer cq.Close()
	last := cq.MaxQueueOffset()
	for _, tc := range []struct {
		name  string
		bound int64 // Config.MaxQueueOffset
		last  int64 // the offset the bound leaves last
	}{
		{"consumequeue bound", last, last},
		{"no bound", 0, math.MaxInt64 - 1},
	} {
		h := start(t, nil, Config{
			MaxLag: 1 << 30, MaxBatch: 4, MaxQueueOffset: tc.bound,
			NextOffsets: map[QueueKey]int64{{"A", 0}: tc.last - 1},
			StartOffset: func(k QueueKey) (int64, bool) {
				if k.Topic == "B" {
					return tc.last + 1, true // a partition taken over past the end
				}
				return 0, false
			},
		})
		b := h.round(encode(t, "A", 0, "a1", "", 0), encode(t, "A", 0, "a2", "", 0), encode(t, "A", 0, "a3", "", 0),
			encode(t, "B", 0, "b1", "", 0), encode(t, "C", 0, "c1", "", 0))
		for i, want := range []int64{tc.last - 1, tc.last, -1, -1, 0} {
			r := &b.Records[i]
			if want < 0 {
				if !errors.Is(r.Err, ErrQueueFull) {
					t.Fatalf("%s: record %d (%s/%d): %v, want ErrQueueFull", tc.name, i, r.Topic, r.QueueID, r.Err)
				}
				continue
			}
			if r.Err != nil || r.QueueOffset != want {
				t.Fatalf("%s: record %d (%s/%d): offset %d, %v; want %d", tc.name, i, r.Topic, r.QueueID, r.QueueOffset, r.Err, want)
			}
			h.check(r)
		}
		end := h.log.MaxOffset()
		if b := h.round(encode(t, "A", 0, "a4", "", 0)); !errors.Is(b.Records[0].Err, ErrQueueFull) || h.log.MaxOffset() != end {
			t.Fatalf("%s: the next round: %v, log end %d -> %d", tc.name, b.Records[0].Err, end, h.log.MaxOffset())
		}
		if st := h.app.Stats(); st.Records != 3 || st.Errors != 3 {
			t.Fatalf("%s: stats %+v", tc.name, st)
		}
		if err := h.stop(); err != nil {
			t.Fatal(err)
		}
	}
}
