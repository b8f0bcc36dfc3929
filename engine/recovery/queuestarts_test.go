package recovery

import (
	"testing"

	appender "github.com/rocketstore/engine/append"
	"github.com/rocketstore/engine/internal/vfs"
)

// TestQueueStarts: a store without the file has no start; a start set is persisted before Set
// returns, so that a reload has it; Apply raises only the queues recovered below their start.
func TestQueueStarts(t *testing.T) {
	fsys, dir := vfs.Default, t.TempDir()
	s, err := LoadQueueStarts(fsys, dir)
	if err != nil {
		t.Fatal(err)
	}
	k, other := appender.QueueKey{Topic: "orders", QueueID: 2}, appender.QueueKey{Topic: "orders", QueueID: 3}
	if _, ok := s.Start(k); ok {
		t.Fatal("a start in a new store")
	}
	if err := s.Set(k, 20); err != nil {
		t.Fatal(err)
	}
	if err := s.Set(other, 5); err != nil {
		t.Fatal(err)
	}
	s, err = LoadQueueStarts(fsys, dir)
	if err != nil {
		t.Fatal(err)
	}
	if off, ok := s.Start(k); !ok || off != 20 {
		t.Fatalf("reloaded start %d %v, want 20", off, ok)
	}
	next := map[appender.QueueKey]int64{k: 3, other: 9}
	s.Apply(next)
	if next[k] != 20 || next[other] != 9 {
		t.Fatalf("applied: %v", next)
	}
}
