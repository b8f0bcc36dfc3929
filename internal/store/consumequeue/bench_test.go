package consumequeue

import (
	"strconv"
	"testing"

	"github.com/rocketstore/engine/internal/vfs"
)

// BenchmarkPut measures the dispatcher's Put with the default geometry (6,000,000-byte files,
// 20 KiB reservation steps) on the real file system, rolls and reservations included.
func BenchmarkPut(b *testing.B) {
	s, err := Open(Options{FS: vfs.Default, Root: b.TempDir()})
	noErr(b, err)
	defer s.Close()
	cq := queue(b, s, "T", 0)
	b.ReportAllocs()
	b.SetBytes(UnitSize)
	n := int64(0)
	for b.Loop() {
		if err := cq.Put(n, unitFor(n)); err != nil {
			b.Fatal(err)
		}
		n++
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "units/s")
}

// BenchmarkReadSequential reads a queue of 1,000,000 units front to back in batches of 256,
// as a consumer's pull does.
func BenchmarkReadSequential(b *testing.B) {
	const total = 1_000_000
	s, err := Open(Options{FS: vfs.Default, Root: b.TempDir()})
	noErr(b, err)
	defer s.Close()
	cq := queue(b, s, "T", 0)
	putRange(b, cq, 0, total)
	buf := make([]Unit, 256)
	b.ReportAllocs()
	read := int64(0)
	off := int64(0)
	for b.Loop() {
		if off == total {
			off = 0
		}
		k, err := cq.Read(off, buf[:min(int64(len(buf)), total-off)])
		if err != nil {
			b.Fatal(err)
		}
		off += int64(k)
		read += int64(k)
	}
	b.ReportMetric(float64(read)/b.Elapsed().Seconds(), "units/s") // ns/op is per batch of 256
}

// BenchmarkUnit reads single units spread over the queue.
func BenchmarkUnit(b *testing.B) {
	const total = 1_000_000
	s, err := Open(Options{FS: vfs.Default, Root: b.TempDir()})
	noErr(b, err)
	defer s.Close()
	cq := queue(b, s, "T", 0)
	putRange(b, cq, 0, total)
	b.ReportAllocs()
	n := int64(0)
	for b.Loop() {
		n = (n + 7919) % total
		if _, err := cq.Unit(n); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkNewTopic measures what a topic seen for the first time costs the dispatcher: the
// first Put on each of its 4 queues creates the topic's directory, the queue's directory and
// its first file. The syncs that make them durable are counted too: every 64 topics a FlushAll,
// as the checkpointer runs one a second.
func BenchmarkNewTopic(b *testing.B) {
	s, err := Open(Options{FS: vfs.Default, Root: b.TempDir()})
	noErr(b, err)
	defer s.Close()
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		topic := "T" + strconv.Itoa(n)
		for id := range int32(4) {
			if err := queue(b, s, topic, id).Put(0, unitFor(0)); err != nil {
				b.Fatal(err)
			}
		}
		if n++; n%64 == 0 {
			noErr(b, s.FlushAll(0))
		}
	}
	noErr(b, s.FlushAll(0))
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "topics/s")
}
