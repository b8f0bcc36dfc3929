package consumequeue

import (
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/rocketstore/engine/internal/vfs"
)

// allocated sums the disk blocks of every file and directory under dir, as du does.
func allocated(t *testing.T, dir string) (bytes int64, files int) {
	t.Helper()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		bytes += info.Sys().(*syscall.Stat_t).Blocks * 512
		if !d.IsDir() {
			files++
		}
		return nil
	})
	noErr(t, err)
	return bytes, files
}

// TestManyQueuesDiskUsage writes one message to each of topics x 4 queues with the default
// 6,000,000-byte files and checks that the disk holds what the queues hold, not 6 MB a queue.
// CQ_MANY_TOPICS sets the number of topics (default 2,000; the design target is 10,000).
func TestManyQueuesDiskUsage(t *testing.T) {
	topics := 2000
	if v := os.Getenv("CQ_MANY_TOPICS"); v != "" {
		n, err := strconv.Atoi(v)
		noErr(t, err)
		topics = n
	} else if testing.Short() {
		topics = 200
	}
	const perTopic = 4
	root := t.TempDir()
	s, err := Open(Options{FS: vfs.Default, Root: root}) // defaults: 300,000 units per file, 1024-unit steps, DefaultMaxMapped()
	noErr(t, err)
	start := time.Now()
	for i := range topics {
		topic := "topic-" + strconv.Itoa(i)
		for q := range int32(perTopic) {
			cq, err := s.FindOrCreate(topic, q)
			noErr(t, err)
			noErr(t, cq.Put(0, Unit{Phys: int64(i*perTopic+int(q)) * 200, Size: 200, TagsCode: int64(q)}))
		}
		if i%500 == 499 { // the periodic flusher: lets the bound unmap idle queues
			noErr(t, s.FlushAll(0))
		}
	}
	noErr(t, s.FlushAll(0))
	elapsed := time.Since(start)
	mapped := s.MappedQueues()
	noErr(t, s.Close())

	n := int64(topics * perTopic)
	used, files := allocated(t, filepath.Join(root, "consumequeue"))
	t.Logf("%d queues: %d files, %d bytes allocated (%.1f KiB a queue; one whole file each would be %d MB); %d mapped at the end; %v",
		n, files, used, float64(used)/float64(n)/1024, n*DefaultUnitsPerFile*UnitSize>>20, mapped, elapsed)
	if files != int(n) {
		t.Fatalf("%d files for %d queues", files, n)
	}
	if limit := n * 64 << 10; used >= limit {
		t.Fatalf("%d bytes allocated for %d queues, want < %d", used, n, limit)
	}
	if mapped > DefaultMaxMapped() {
		t.Fatalf("%d queues still mapped, bound %d", mapped, DefaultMaxMapped())
	}

	// Loading them back maps nothing until they are used.
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	s, err = Open(Options{FS: vfs.Default, Root: root})
	noErr(t, err)
	defer s.Close()
	skipped, err := s.Load()
	runtime.GC()
	runtime.ReadMemStats(&after)
	if err != nil || len(skipped) > 0 || len(s.Queues()) != int(n) || s.MappedQueues() != 0 {
		t.Fatalf("load: %v, skipped %d, %d queues, %d mapped", err, len(skipped), len(s.Queues()), s.MappedQueues())
	}
	t.Logf("loaded, unmapped: %d heap bytes a queue", int64(after.HeapAlloc-before.HeapAlloc)/n)
	start = time.Now()
	maxPhys, err := s.RecoverAll()
	noErr(t, err)
	t.Logf("RecoverAll over %d queues: %v, %d mapped after", n, time.Since(start), s.MappedQueues())
	if maxPhys != (n-1)*200+200 || s.MappedQueues() > DefaultMaxMapped() {
		t.Fatalf("max physical offset %d, %d mapped", maxPhys, s.MappedQueues())
	}
}
