package consumequeue

import (
	"path/filepath"
	"testing"

	"github.com/rocketstore/engine/internal/rmqfixture"
	"github.com/rocketstore/engine/internal/vfs"
)

// TestDetectUnitsPerFile: the units per file of a store's ConsumeQueues are read from their
// files, those the engine writes and those RocketMQ wrote.
func TestDetectUnitsPerFile(t *testing.T) {
	fsys := vfs.NewMem()
	check := func(what string, want int, wantOK bool) {
		t.Helper()
		units, ok, err := DetectUnitsPerFile(fsys, "/s")
		if err != nil || units != want || ok != wantOK {
			t.Fatalf("%s: %d %v %v, want %d %v", what, units, ok, err, want, wantOK)
		}
	}
	check("no store", 0, false)
	s := openStore(t, fsys, "/s", 7)
	queue(t, s, "a", 0) // known, never written: no file
	check("no file", 0, false)
	putRange(t, queue(t, s, "b", 3), 0, 20)
	check("one queue of three files", 7, true)
	noErr(t, s.Close())

	fixture := filepath.Join(rmqfixture.Dir(t), "store-5000")
	if units, ok, err := DetectUnitsPerFile(vfs.Default, fixture); err != nil || !ok || units != 500 {
		t.Fatalf("RocketMQ's store: %d %v %v, want 500", units, ok, err)
	}
}
