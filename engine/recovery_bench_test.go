package engine

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketstore/engine/internal/store/meta"
	"github.com/rocketstore/engine/internal/vfs"
)

// BenchmarkRecovery builds a store of ENGINE_BENCH_STORE_GB GiB (2 by default) of 1 KiB
// messages on the real file system, then measures:
//   - restart-s: Open after a clean Close (the checkpoint says where the log ends: no scan);
//   - scan-GB/s: Open after a crash whose checkpoint is at the start of the log, so recovery
//     scans and re-dispatches every record with every CRC checked.
//
// Run: ENGINE_BENCH_STORE_GB=2 go test -run '^$' -bench Recovery -benchtime 1x ./engine
func BenchmarkRecovery(b *testing.B) {
	gib := 2
	if v, err := strconv.Atoi(os.Getenv("ENGINE_BENCH_STORE_GB")); err == nil && v > 0 {
		gib = v
	}
	dir := filepath.Join(b.TempDir(), "store")
	opts := Options{Dir: dir, Logger: zerolog.Nop(), FlushMode: FlushAsync}
	e, err := Open(opts)
	if err != nil {
		b.Fatal(err)
	}
	body := make([]byte, 1024)
	batch := make([]Message, 256)
	for i := range batch {
		batch[i] = Message{Topic: "bench", QueueID: int32(i % 4), Body: body}
	}
	for e.Offsets().Written < int64(gib)<<30 {
		res, err := e.Put(context.Background(), batch...)
		if err != nil || res[0].Err != nil {
			b.Fatal(err, res[0].Err)
		}
	}
	size := e.Offsets().Written
	if err := e.Close(); err != nil {
		b.Fatal(err)
	}

	for b.Loop() {
		start := time.Now()
		e, err := Open(opts)
		if err != nil {
			b.Fatal(err)
		}
		restart := time.Since(start)
		if r := e.Recovery(); !r.CleanExit || r.Records != 0 {
			b.Fatalf("clean restart rescanned: %+v", r)
		}
		if err := e.Abort(); err != nil {
			b.Fatal(err)
		}
		// A crash with the last checkpoint at the start of the log: everything is rescanned.
		setCheckpoint(b, dir, 0, 0)
		if err := meta.CreateAbort(vfs.Default, dir, os.Getpid()); err != nil {
			b.Fatal(err)
		}
		start = time.Now()
		e, err = Open(opts)
		if err != nil {
			b.Fatal(err)
		}
		scan := time.Since(start)
		r := e.Recovery()
		if r.Start != 0 || r.End != size {
			b.Fatalf("recovery scanned [%d, %d) of %d bytes", r.Start, r.End, size)
		}
		if err := e.Close(); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(size)/(1<<30), "store-GiB")
		b.ReportMetric(restart.Seconds(), "restart-s")
		b.ReportMetric(float64(r.End-r.Start)/scan.Seconds()/1e9, "scan-GB/s")
		b.ReportMetric(scan.Seconds(), "scan-s")
	}
}
