package benchmarks

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rocketstore/engine/internal/natstest"
	"github.com/rocketstore/engine/stages/ingress/route"
)

// The measured inputs of the scale-out projection (scaleout.go; RESULTS.md §6):
//
//	go test -run '^$' -bench 'ScaleOut(Mapping|Route)' -benchtime 400000x -count 3 ./benchmarks/
//	go test -run '^$' -bench ScaleOutJetStream -benchtime 30000x -count 3 ./benchmarks/
//
// Each benchmark runs its variants side by side; state them as ratios to each other.

const scaleOutKeys = 1000

// countingSub subscribes to subject on url and closes done once it has received want messages.
func countingSub(b *testing.B, url, subject string, want int64) (*nats.Conn, <-chan struct{}) {
	b.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(nc.Close)
	return nc, natstest.CountTo(b, nc, subject, want)
}

// publishKeyed publishes n 128-byte messages on orders.<key> over scaleOutKeys keys and waits
// for done; it reports the rate.
func publishKeyed(b *testing.B, url string, n int, done <-chan struct{}) {
	b.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	subjects := make([]string, scaleOutKeys)
	for i := range subjects {
		subjects[i] = fmt.Sprintf("orders.user-%d", i)
	}
	body := make([]byte, 128)
	b.ResetTimer()
	start := time.Now()
	for i := range n {
		if err := nc.Publish(subjects[i%scaleOutKeys], body); err != nil {
			b.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		b.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		b.Fatal("the subscriber did not get every message")
	}
	b.StopTimer()
	b.ReportMetric(float64(n)/time.Since(start).Seconds(), "msgs/s")
}

// BenchmarkScaleOutMapping: the cost of the partition mapping on the server that accepts the
// publisher: one server, a subscriber to the published subjects (plain) or to the partitions'
// namespace (mapped, 64 partitions, FNV-1a of the key token).
func BenchmarkScaleOutMapping(b *testing.B) {
	dest, err := route.PartitionMapping("rmq.p", 64, "orders.*")
	if err != nil {
		b.Fatal(err)
	}
	for _, v := range []struct {
		name     string
		mappings map[string]string
		sub      string
	}{{"plain", nil, "orders.>"}, {"mapped", map[string]string{"orders.*": dest}, "rmq.p.>"}} {
		b.Run(v.name, func(b *testing.B) {
			c := natstest.StartCluster(b, 1, v.mappings)
			_, done := countingSub(b, c.URL(0), v.sub, int64(b.N))
			publishKeyed(b, c.URL(0), b.N, done)
		})
	}
}

// BenchmarkScaleOutRoute: the cost of the route hop a message takes from the server of its
// publisher to the server of its partition's owner: two servers, the subscriber on the
// publisher's server (local) or on the other one (hop).
func BenchmarkScaleOutRoute(b *testing.B) {
	for _, v := range []struct {
		name string
		sub  int
	}{{"local", 0}, {"hop", 1}} {
		b.Run(v.name, func(b *testing.B) {
			c := natstest.StartCluster(b, 2, nil)
			_, done := countingSub(b, c.URL(v.sub), "orders.>", int64(b.N))
			c.WaitInterest("orders.x")
			publishKeyed(b, c.URL(0), b.N, done)
		})
	}
}

// BenchmarkScaleOutJetStream: what replicated mode puts in front of the engines: a partition's
// stream on a three-server JetStream cluster with sync_interval always, R1 and R3, published
// with async publishes (4096 in flight) and acked by JetStream.
func BenchmarkScaleOutJetStream(b *testing.B) {
	for _, replicas := range []int{1, 3} {
		b.Run(fmt.Sprintf("R%d", replicas), func(b *testing.B) {
			c := natstest.StartJetStreamCluster(b, 3, nil)
			nc, err := nats.Connect(c.URL(0))
			if err != nil {
				b.Fatal(err)
			}
			defer nc.Close()
			js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096))
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "RMQ_P0", Subjects: []string{"rmq.p.0.>"},
				Storage: jetstream.FileStorage, Replicas: replicas}); err != nil {
				b.Fatal(err)
			}
			body := make([]byte, 128)
			b.ResetTimer()
			start := time.Now()
			for i := range b.N {
				if _, err := js.PublishAsync(fmt.Sprintf("rmq.p.0.orders.user-%d", i%scaleOutKeys), body,
					jetstream.WithStallWait(time.Minute)); err != nil {
					b.Fatal(err)
				}
			}
			select {
			case <-js.PublishAsyncComplete():
			case <-time.After(5 * time.Minute):
				b.Fatal("publish acks missing")
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
		})
	}
}

// TestProjectionInputs: the skew and hop factors behave as the projection needs: at most 1, the
// uniform skew matched by many random keys, 1 for one engine.
func TestProjectionInputs(t *testing.T) {
	keys := RandomKeys(100_000)
	for _, c := range []struct{ parts, engines int }{{8, 3}, {64, 3}, {64, 5}, {64, 8}} {
		u, s := UniformSkew(c.parts, c.engines), PartitionSkew(keys, c.parts, c.engines)
		if s > 1 || u > 1 || math.Abs(s-u) > 0.05 {
			t.Errorf("P=%d N=%d: uniform %.3f, 100k keys %.3f", c.parts, c.engines, u, s)
		}
	}
	few := RandomKeys(100)
	for _, n := range []int{2, 3, 4, 5, 8, 16} {
		t.Logf("P=64 N=%d: skew uniform %.3f, 100k keys %.3f, 100 keys %.3f; hop factor at a 0.96 hop ratio %.3f",
			n, UniformSkew(64, n), PartitionSkew(keys, 64, n), PartitionSkew(few, 64, n), HopEfficiency(n, 0.96))
	}
	if PartitionSkew(keys, 64, 1) != 1 || UniformSkew(64, 1) != 1 || HopEfficiency(1, 0.5) != 1 {
		t.Error("one engine is not 1")
	}
	if h := HopEfficiency(4, 0.8); h >= 1 || h <= 0.8 {
		t.Errorf("hop efficiency %v", h)
	}
}
