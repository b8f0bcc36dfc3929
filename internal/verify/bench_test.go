package verify

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/rs/zerolog"

	"github.com/rocketstore/engine/engine"
	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/internal/vfs"
)

// benchSegment is the CommitLog segment size of the benchmark stores: several segments, so
// that the parallel scan has more than one to work on, but real-sized files.
const benchSegment = 128 << 20

// benchStoreMB is the size of each benchmark store (VERIFY_BENCH_MB overrides it).
func benchStoreMB() int64 {
	if n, err := strconv.ParseInt(os.Getenv("VERIFY_BENCH_MB"), 10, 64); err == nil && n > 0 {
		return n
	}
	return 384
}

// writeBenchStore writes about mb MiB of messages with bodies of body bytes, each with tags,
// a key and an id (3 topics x 4 queues), through the engine into dir on disk.
func writeBenchStore(b *testing.B, dir string, mb int64, body int) {
	e, err := engine.Open(engine.Options{
		Dir: dir, Logger: zerolog.Nop(), FlushMode: engine.FlushAsync, CommitLogFileSize: benchSegment,
	})
	if err != nil {
		b.Fatal(err)
	}
	payload := make([]byte, body)
	for i := range payload {
		payload[i] = byte(i)
	}
	var written int64
	for i := 0; written < mb<<20; {
		msgs := make([]engine.Message, 256)
		for j := range msgs {
			msgs[j] = engine.Message{
				Topic: fmt.Sprintf("bench-%d", i%3), QueueID: int32(i % 4), Body: payload, Tags: "TagA",
				Keys: []string{"order-" + strconv.Itoa(i)}, MsgID: fmt.Sprintf("7F0000011234%020d", i),
			}
			i++
		}
		res, err := e.Put(context.Background(), msgs...)
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range res {
			if r.Err != nil {
				b.Fatal(r.Err)
			}
			written += int64(r.Size)
		}
	}
	if err := e.Close(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkVerify measures Verify over stores of a few hundred MiB on disk (in the page
// cache, as right after they were written): the CommitLog scan alone (every record's
// structure, body CRC and whole-record CRC, PHYSICALOFFSET, the zero tail), and the whole
// verification (every unit and index entry checked against its record too). MB/s is of
// CommitLog record bytes.
//
//	go test -run XXX -bench Verify -benchtime 5x ./internal/verify/
//
// With VERIFY_BENCH_DIR set, the stores are written there (body=N subdirectories) and kept, to
// time the command on them: engine verify --store DIR/body=1024 --commit-log-size 128MiB.
func BenchmarkVerify(b *testing.B) {
	for _, body := range []int{1024, 256} {
		dir := b.TempDir()
		if keep := os.Getenv("VERIFY_BENCH_DIR"); keep != "" {
			dir = filepath.Join(keep, fmt.Sprintf("body=%d", body))
		}
		if _, err := os.Stat(filepath.Join(dir, "checkpoint")); err != nil {
			writeBenchStore(b, dir, benchStoreMB(), body)
		}
		opts := Options{FS: vfs.Default, Dir: dir, CommitLogFileSize: benchSegment}
		first, err := Verify(context.Background(), opts)
		if err != nil {
			b.Fatal(err)
		}
		if !first.Consistent() {
			b.Fatalf("benchmark store not consistent:\n%s", dump(first))
		}
		b.Run(fmt.Sprintf("body=%d/commitlog", body), func(b *testing.B) {
			b.SetBytes(first.CommitLog.Bytes)
			for b.Loop() {
				v, err := scanOnly(opts)
				if err != nil {
					b.Fatal(err)
				}
				if v.records != first.CommitLog.Records {
					b.Fatalf("%d records, want %d", v.records, first.CommitLog.Records)
				}
			}
			b.ReportMetric(float64(first.CommitLog.Records)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
		})
		b.Run(fmt.Sprintf("body=%d/all", body), func(b *testing.B) {
			b.SetBytes(first.CommitLog.Bytes)
			for b.Loop() {
				r, err := Verify(context.Background(), opts)
				if err != nil || !r.Consistent() {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(first.CommitLog.Records)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
		})
	}
}

// scanOnly runs Verify's CommitLog phase alone.
func scanOnly(opts Options) (*chain, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	v := &verifier{opts: opts, ro: roFS{ReadOnlyFS: vfs.ReadOnlyFS{FS: opts.FS, Err: errReadOnly}}, rep: &Report{}, problems: newCollector(10)}
	log, err := commitlog.OpenLog(commitlog.LogOptions{FS: v.ro, Dir: v.logDir(), FileSize: opts.CommitLogFileSize, ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer log.Close()
	return v.assemble(v.scanLog(context.Background(), log.Queue().Files(), -1)), nil
}
