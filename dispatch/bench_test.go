package dispatch

import (
	"context"
	"strconv"
	"testing"

	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/internal/store/indexfile"
	"github.com/rocketstore/engine/internal/vfs"
)

// BenchmarkDispatch measures the dispatcher over a backlog of b.N records of exactly 128 bytes
// (each with a UNIQ_KEY, as the broker always sets, over 4 queues) in a real commitlog.Log on a
// temporary directory, building real ConsumeQueues and an IndexFile of the default geometry: an
// op is one record dispatched, a ConsumeQueue unit and an index entry.
func BenchmarkDispatch(b *testing.B) {
	const size = 128
	s := openStore(b, vfs.Default, b.TempDir(), 64<<20, 0, indexfile.Geometry{})
	m := commitlog.Message{Topic: "T", BornTimestamp: t0, BornHost: bornHost, StoreHost: storeHost}
	var rec []byte
	for i := range b.N {
		m.QueueID = int32(i % 4)
		m.Properties = commitlog.AppendProperty(m.Properties[:0], commitlog.PropUniqKey, strconv.FormatInt(int64(i), 36))
		m.Body = m.Body[:0]
		var err error
		if rec, err = commitlog.AppendRecord(rec[:0], &m, commitlog.EncodeOptions{PropCRC: true}); err != nil {
			b.Fatal(err)
		}
		m.Body = append(m.Body, make([]byte, size-len(rec))...)
		if rec, err = commitlog.AppendRecord(rec[:0], &m, commitlog.EncodeOptions{PropCRC: true}); err != nil {
			b.Fatal(err)
		}
		if len(rec) != size {
			b.Fatalf("record is %d bytes, want %d", len(rec), size)
		}
		if _, err := s.log.Append(rec, int64(i/4), t0+int64(i), true); err != nil {
			b.Fatal(err)
		}
	}
	end := s.log.MaxOffset()
	b.SetBytes(size)
	b.ReportAllocs()
	b.ResetTimer()
	r := startDispatcher(b, s, s.log, 0, 0)
	r.limit.Advance(end)
	if err := r.d.Dispatched.Wait(context.Background(), end); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
}
