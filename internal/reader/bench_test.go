package reader

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/rocketstore/engine/internal/store/indexfile"
	"github.com/rocketstore/engine/internal/vfs"
)

// BenchmarkGet reads a queue sequentially in batches of 32 through the ConsumeQueue and the
// CommitLog (real files, mapped), wrapping around at the end. One op is one Get of 32
// messages; msgs/s counts messages. The no-crc-check cases skip the CRC check every served
// record gets, to show its cost in the same run.
func BenchmarkGet(b *testing.B) {
	const msgs, batch = 100_000, 32
	for _, c := range []struct {
		size  int
		noMap bool
		noCRC bool
	}{{128, false, false}, {1024, false, false}, {128, true, false}, {1024, true, false},
		{128, true, true}, {1024, true, true}} {
		size := c.size
		name := fmt.Sprintf("body=%d", size)
		if c.noMap {
			name += "/no-property-map"
		}
		if c.noCRC {
			name += "/no-crc-check" // what the CRC check costs: compare with the line above
		}
		b.Run(name, func(b *testing.B) {
			s := newTestStore(b, vfs.Default, b.TempDir(), geometry{segment: 256 << 20, units: 300_000})
			payload := bytes.Repeat([]byte{'x'}, size)
			for i := range msgs {
				s.put(msg{tags: "TagA", uniq: fmt.Sprintf("U%08d", i), body: payload})
			}
			s.r.noCRC = c.noCRC
			req := GetRequest{Topic: "T", Max: batch, MaxBytes: MaxGetMaxBytes, NoPropertyMap: c.noMap}
			b.SetBytes(int64(batch * size))
			b.ReportAllocs()
			for b.Loop() {
				res, err := s.r.Get(b.Context(), req)
				if err != nil || len(res.Messages) != batch {
					b.Fatalf("%v, %d messages", err, len(res.Messages))
				}
				req.Offset = res.NextOffset
				if req.Offset+batch > msgs {
					req.Offset = 0
				}
			}
			b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}

// BenchmarkQuery looks up random keys in an index of 1,000,000 keys (200,000 messages with a
// UNIQ_KEY and four KEYS each, RocketMQ's default index geometry, real files) and reports the
// latency percentiles of single-key queries that each find one message.
func BenchmarkQuery(b *testing.B) {
	const msgs, keysPer = 200_000, 4
	geo := geometry{segment: 256 << 20, units: 300_000, index: &indexfile.DefaultGeometry}
	s := newTestStore(b, vfs.Default, b.TempDir(), geo)
	start := time.Now()
	for i := range msgs {
		s.put(msg{
			uniq: fmt.Sprintf("UNIQ%08d", i),
			keys: fmt.Sprintf("a%d b%d c%d d%d", i, i, i, i),
			body: []byte("payload of a queried message"),
		})
	}
	var keys int64
	for _, f := range s.index.Files() {
		keys += int64(f.Header().IndexCount - 1)
	}
	if keys < msgs*(keysPer+1) {
		b.Fatalf("%d keys indexed", keys)
	}
	b.Logf("built %d messages, %d index keys in %v", msgs, keys, time.Since(start).Round(time.Millisecond))
	rng := rand.New(rand.NewPCG(1, 2))
	var lat []time.Duration
	b.ReportAllocs()
	for b.Loop() {
		i := rng.IntN(msgs)
		key := fmt.Sprintf("%c%d", "abcd"[i%4], i)
		t0 := time.Now()
		got, err := s.r.Query(b.Context(), QueryRequest{Topic: "T", Key: key, Max: 32})
		lat = append(lat, time.Since(t0))
		if err != nil || len(got) != 1 {
			b.Fatalf("query %s: %v, %d messages", key, err, len(got))
		}
	}
	slices.Sort(lat)
	pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Nanoseconds()) }
	b.ReportMetric(pct(0.50), "p50-ns")
	b.ReportMetric(pct(0.99), "p99-ns")
}
