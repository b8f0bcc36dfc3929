package indexfile

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/rocketstore/engine/internal/vfs"
)

func benchKeys(n int, prefix string) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("%s%08X", prefix, i*2654435761)
	}
	return keys
}

// BenchmarkPutKey puts prebuilt "topic#key" strings into one default-geometry file on the real
// file system, reservation steps included.
func BenchmarkPutKey(b *testing.B) {
	keys := benchKeys(1<<16, "TopicTest#K")
	dir := b.TempDir()
	newFile := func(i int) *File {
		f, err := CreateFile(vfs.Default, filepath.Join(dir, fmt.Sprint(i)), DefaultGeometry, DefaultReserveStep, 0, 0)
		if err != nil {
			b.Fatal(err)
		}
		return f
	}
	files := 0
	f := newFile(files)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		err := f.PutKey(keys[i&(len(keys)-1)], int64(i)*200, t0+int64(i))
		if errors.Is(err, ErrFull) {
			b.StopTimer()
			f.Close()
			files++
			f = newFile(files)
			b.StartTimer()
			err = f.PutKey(keys[i&(len(keys)-1)], int64(i)*200, t0+int64(i))
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "keys/s")
	f.Close()
}

// BenchmarkBuildIndex indexes messages shaped like TV1 (a uniq key and two KEYS, 3 entries per
// message) through the Service, with "topic#key" hashed incrementally.
func BenchmarkBuildIndex(b *testing.B) {
	uniq := benchKeys(1<<16, "7F00000112340A0B0C0D0000")
	s, err := Open(Options{FS: vfs.Default, Dir: filepath.Join(b.TempDir(), "index"), Now: (&clock{t: time.UnixMilli(t0), step: time.Millisecond}).now})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	var h [3]int32
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		prefix := TopicPrefixHash("TopicTest")
		h[0] = KeyHashFrom(prefix, uniq[i&(len(uniq)-1)])
		h[1], h[2] = KeyHashFrom(prefix, "OrderID188"), KeyHashFrom(prefix, "OrderID189")
		if _, err := s.BuildHashes(int64(i)*226, t0+int64(i), h[:]); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(3*b.N)/b.Elapsed().Seconds(), "keys/s")
}

// BenchmarkQuery looks up keys in a file of 1,000,000 messages where each key occurs 10 times,
// reusing the result slice. A few keys collide with others' hashes and return more.
func BenchmarkQuery(b *testing.B) {
	const msgs, distinct = 1_000_000, 100_000
	keys := benchKeys(distinct, "Order")
	s, err := Open(Options{FS: vfs.Default, Dir: filepath.Join(b.TempDir(), "index"), Now: (&clock{t: time.UnixMilli(t0), step: time.Millisecond}).now})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	for i := range msgs {
		if _, err := s.BuildHashes(int64(i)*226, t0+int64(i), []int32{KeyHash("TopicTest", keys[i%distinct])}); err != nil {
			b.Fatal(err)
		}
	}
	dst := make([]int64, 0, DefaultMaxQueryNum)
	found := 0
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res, err := s.Query(dst, "TopicTest", keys[(i*7919)%distinct], 64, 0, 1<<62)
		if err != nil {
			b.Fatal(err)
		}
		found += len(res.PhyOffsets)
	}
	b.StopTimer()
	if found < 10*b.N { // more is possible: distinct keys can share a hash
		b.Fatalf("found %d offsets in %d queries, want >= 10 each", found, b.N)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "queries/s")
}
