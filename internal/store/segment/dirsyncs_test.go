package segment

import (
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"github.com/rocketstore/engine/internal/vfs"
)

// TestDirSyncsWaitsForSyncInFlight: a Sync that finds nothing pending because another Sync
// took it returns only once that one has synced it, so that a queue's Flush never claims a
// directory entry another goroutine is still syncing.
func TestDirSyncsWaitsForSyncInFlight(t *testing.T) {
	mem := vfs.NewMem()
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	fsys := vfs.NewFaulty(mem, func(op vfs.Op, _ string) error {
		if op == vfs.OpSyncDir {
			once.Do(func() { close(entered); <-release })
		}
		return nil
	})
	d := NewDirSyncs(fsys, "/store", -1)
	if err := d.mkdirAll(filepath.Join("/store", "T", "0")); err != nil {
		t.Fatal(err)
	}
	first := make(chan error, 1)
	go func() { first <- d.Sync() }()
	<-entered
	second := make(chan error, 1)
	go func() { second <- d.Sync() }()
	// Give the second Sync every chance to return early: without syncMu it finds the set
	// empty and returns at once. (A goroutine waiting on a mutex is not durably blocked, so
	// synctest.Wait cannot say when it got there.)
	for i := 0; i < 1000 && len(second) == 0; i++ {
		runtime.Gosched()
	}
	select {
	case err := <-second:
		t.Fatalf("second Sync returned (%v) while the first was still syncing", err)
	case <-first:
		t.Fatal("first Sync returned while held")
	default:
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := <-second; err != nil {
		t.Fatal(err)
	}
}
