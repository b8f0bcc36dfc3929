package engine

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	natstest "github.com/nats-io/nats-server/v2/test"
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/rocketstore/engine/engine/api"
)

// consumeMessages is how many messages each consume benchmark reads back (one queue).
const consumeMessages = 200_000

// BenchmarkConsume reads back a queue sequentially, 128 B and 1 KiB bodies: in-process through
// Engine.Get, over NATS through the read API's JSON get (api.Client.Get, 256 per request) and
// its pull endpoint (api.Consumer with its defaults: pulls of 4096 messages or 4 MiB, the next
// pull in flight while a batch is handled), and, in the same run, NATS JetStream reading back a
// file-store stream of the same messages through a pull consumer (Fetch of 256). Each reports
// msgs/s; compare them within one run.
//
// Run: go test -run '^$' -bench Consume -benchtime 1x ./engine
func BenchmarkConsume(b *testing.B) {
	for _, size := range []int{128, 1024} {
		body := make([]byte, size)
		b.Run(fmt.Sprintf("body=%d", size), func(b *testing.B) {
			dir := filepath.Join(b.TempDir(), "store")
			srv, err := Serve(Options{Dir: dir, Logger: zerolog.Nop(), FlushMode: FlushAsync, CommitLogFileSize: 256 << 20},
				NATSOptions{Listen: "127.0.0.1:-1", Subjects: []string{"bench.>"}})
			if err != nil {
				b.Fatal(err)
			}
			defer srv.Shutdown()
			e := srv.Engine
			batch := make([]Message, 256)
			for i := range batch {
				batch[i] = Message{Topic: "bench", QueueID: 0, Body: body}
			}
			for n := 0; n < consumeMessages; n += len(batch) {
				if _, err := e.Put(context.Background(), batch...); err != nil {
					b.Fatal(err)
				}
			}
			if err := e.WaitDispatched(context.Background(), e.Offsets().Written); err != nil {
				b.Fatal(err)
			}

			b.Run("inproc", func(b *testing.B) {
				for b.Loop() {
					n := 0
					for off := int64(0); off < consumeMessages; {
						res, err := e.Get(context.Background(), GetRequest{Topic: "bench", Offset: off, Max: 256, MaxBytes: 4 << 20, NoPropertyMap: true})
						if err != nil || len(res.Messages) == 0 {
							b.Fatalf("get at %d: %v, %v", off, err, res.Status)
						}
						n += len(res.Messages)
						off = res.NextOffset
					}
					b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "msgs/s")
				}
			})

			b.Run("nats", func(b *testing.B) {
				nc, err := nats.Connect(srv.ClientURL())
				if err != nil {
					b.Fatal(err)
				}
				defer nc.Close()
				c := api.NewClient(nc, api.WithTimeout(10*time.Second))
				for b.Loop() {
					n := 0
					for off := int64(0); off < consumeMessages; {
						res, err := c.Get(context.Background(), api.GetRequest{Topic: "bench", Offset: off, Max: 256, MaxBytes: 4 << 20})
						if err != nil || len(res.Messages) == 0 {
							b.Fatalf("get at %d: %v", off, err)
						}
						n += len(res.Messages)
						off = res.NextOffset
					}
					b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "msgs/s")
				}
			})

			b.Run("nats-pull", func(b *testing.B) {
				nc, err := nats.Connect(srv.ClientURL())
				if err != nil {
					b.Fatal(err)
				}
				defer nc.Close()
				c := api.NewClient(nc, api.WithTimeout(10*time.Second))
				for b.Loop() {
					k := c.NewConsumer(api.ConsumerConfig{Topic: "bench"}) // pulls of 4096 messages or 4 MiB
					n := 0
					for n < consumeMessages {
						res, err := k.Next(context.Background())
						if err != nil || len(res.Messages) == 0 {
							b.Fatalf("pull at %d: %v", k.Offset(), err)
						}
						n += len(res.Messages)
					}
					k.Close()
					b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "msgs/s")
				}
			})

			b.Run("jetstream", func(b *testing.B) {
				js := jetStreamFilled(b, "BENCH", "jsbench", consumeMessages, func(int) string { return "jsbench" }, body)
				i := 0
				for b.Loop() {
					sub, err := js.PullSubscribe("jsbench", fmt.Sprint("c", i), nats.AckNone(), nats.BindStream("BENCH"))
					if err != nil {
						b.Fatal(err)
					}
					i++
					n := 0
					for n < consumeMessages {
						msgs, err := sub.Fetch(256, nats.MaxWait(10*time.Second))
						if err != nil {
							b.Fatalf("fetch after %d: %v", n, err)
						}
						n += len(msgs)
					}
					b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "msgs/s")
					sub.Unsubscribe()
				}
			})
		})
	}
}

// jetStreamFilled starts a JetStream server of its own and fills a file-store stream capturing
// subjects with n messages of body, message i on subject(i).
func jetStreamFilled(b *testing.B, stream, subjects string, n int, subject func(i int) string, body []byte) nats.JetStreamContext {
	opts := natstest.DefaultTestOptions
	opts.Port = -1
	opts.JetStream = true
	opts.StoreDir = b.TempDir()
	ns := natstest.RunServer(&opts)
	b.Cleanup(ns.Shutdown)
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(nc.Close)
	js, err := nc.JetStream(nats.PublishAsyncMaxPending(4096))
	if err != nil {
		b.Fatal(err)
	}
	if _, err := js.AddStream(&nats.StreamConfig{Name: stream, Subjects: []string{subjects}, Storage: nats.FileStorage}); err != nil {
		b.Fatal(err)
	}
	for i := range n {
		if _, err := js.PublishAsync(subject(i), body); err != nil {
			b.Fatal(err)
		}
	}
	<-js.PublishAsyncComplete()
	return js
}
