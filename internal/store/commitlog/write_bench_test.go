package commitlog

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/rocketstore/engine/internal/vfs"
)

// BenchmarkLogWrite is the whole cost of putting records into fresh page cache, with
// everything on the timer: copies into the mapping with the segments prefaulted (the page
// faults the allocator takes off the writer in the engine, but on the same CPUs), against
// records gathered and written with one pwrite per round of 200 (Pwrite, the engine's
// default). Both flush every 2,400 records, the engine's sync cadence under load, so the
// writeback each leaves behind is counted too. The record is 303 bytes: a 128-byte body with
// the batched publisher's properties.
func BenchmarkLogWrite(b *testing.B) {
	for _, pwrite := range []bool{false, true} {
		b.Run(fmt.Sprintf("pwrite=%v", pwrite), func(b *testing.B) {
			m := &Message{Topic: "bench_t1", BornHost: testBorn, StoreHost: testStore, Body: make([]byte, 128)}
			m.Properties = AppendProperty(nil, "NATS_SUBJECT", "bench.t1")
			m.Properties = AppendProperty(m.Properties, PropUniqKey, "PO9lvY2rSXfn6KXa24tsGg:12345")
			rec, err := AppendRecord(nil, m, EncodeOptions{PropCRC: true})
			if err != nil {
				b.Fatal(err)
			}
			l := openTestLogWrites(b, vfs.Default, b.TempDir(), 64<<20, pwrite)
			defer l.Close()
			if err := l.Start(); err != nil {
				b.Fatal(err)
			}
			if !pwrite {
				if err := l.WarmActive(); err != nil {
					b.Fatal(err)
				}
			}
			b.SetBytes(int64(len(rec)))
			cpu0 := processCPU(b)
			qo := int64(0)
			for b.Loop() {
				if _, err := l.Append(rec, qo, 1700000000000, true); err != nil {
					b.Fatal(err)
				}
				qo++
				if qo%200 == 0 {
					if err := l.Commit(); err != nil {
						b.Fatal(err)
					}
					if l.NeedsNext() {
						if err := l.PrepareNext(); err != nil { // prefaults, unless pwrite
							b.Fatal(err)
						}
					}
				}
				if qo%2400 == 0 {
					if err := l.Flush(l.MaxOffset()); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/rec")
		})
	}
}

// processCPU is the user + system CPU time of the process so far: the kernel's share (page
// faults, page cache, writeback) is most of what the two ways differ by.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
