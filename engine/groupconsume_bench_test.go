package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	natstest "github.com/nats-io/nats-server/v2/test"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/rocketstore/engine/engine/api"
)

// groupMessages is how many messages the group consume benchmarks read (4 queues, 128 B bodies).
const groupMessages = 409_600 // a multiple of the put batches (256)

// BenchmarkGroupConsume reads a topic of 4 queues whole, 128 B bodies, in one process (engine,
// server and readers share the CPU; the process-per-member figures are `engine bench --preset
// issue28`'s): a group of 4 members (api.Member, each handing out every message with Next),
// the batched read outside a group (one goroutine and one read in flight per queue, records
// iterated with api.ReadSection.Records), and, in the same run, a JetStream pull consumer over a
// file stream of the same messages (Messages with PullMaxMessages 1,000). Each reports msgs/s
// and the process's CPU per message (engine, server and readers together); compare them within
// one run. For a profile of the read path:
//
//	go test -run '^$' -bench GroupConsume/group -benchtime 3x -cpuprofile /tmp/cpu.out ./engine
func BenchmarkGroupConsume(b *testing.B) {
	body := make([]byte, 128)
	dir := filepath.Join(b.TempDir(), "store")
	srv, err := Serve(Options{Dir: dir, Logger: zerolog.Nop(), FlushMode: FlushAsync, CommitLogFileSize: 256 << 20},
		NATSOptions{Listen: "127.0.0.1:-1", Subjects: []string{"bench.>"}})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Shutdown()
	e := srv.Engine
	batch := make([]Message, 256)
	for n := 0; n < groupMessages; n += len(batch) {
		for i := range batch {
			batch[i] = Message{Topic: "bench", QueueID: int32((n + i) % 4), Body: body}
		}
		if _, err := e.Put(context.Background(), batch...); err != nil {
			b.Fatal(err)
		}
	}
	if err := e.WaitDispatched(context.Background(), e.Offsets().Written); err != nil {
		b.Fatal(err)
	}
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()

	b.Run("group4", func(b *testing.B) {
		cpu := processCPU()
		round := 0
		for b.Loop() {
			round++
			group := fmt.Sprint("g", round)
			var wg sync.WaitGroup
			counts := make([]int, 4)
			errs := make([]error, 4)
			done := make(chan struct{}, 4)
			leave := make(chan struct{})
			for i := range 4 {
				wg.Go(func() {
					mc, err := nats.Connect(srv.ClientURL())
					if err != nil {
						errs[i] = err
						done <- struct{}{}
						return
					}
					defer mc.Close()
					m, err := api.NewClient(mc).Join(context.Background(), api.MemberConfig{Group: group, Topic: "bench"})
					if err != nil {
						errs[i] = err
						done <- struct{}{}
						return
					}
					counts[i], errs[i] = drainMember(m)
					done <- struct{}{}
					// Leave once every member is done: a member leaving earlier hands its
					// queues to the others, whose reads of them would be counted.
					<-leave
					_ = m.Close(context.Background())
				})
			}
			for range 4 {
				<-done
			}
			b.StopTimer()
			close(leave)
			wg.Wait()
			b.StartTimer()
			n := 0
			for i := range 4 {
				if errs[i] != nil {
					b.Fatal(errs[i])
				}
				n += counts[i]
			}
			if n != groupMessages {
				b.Fatalf("the group handed out %d messages, want %d", n, groupMessages)
			}
		}
		b.ReportMetric(float64(groupMessages*round)/b.Elapsed().Seconds(), "msgs/s")
		b.ReportMetric(float64(processCPU()-cpu)/float64(groupMessages*round), "cpu-ns/msg")
	})

	b.Run("read", func(b *testing.B) {
		cpu := processCPU()
		rounds := 0
		for b.Loop() {
			rounds++
			var wg sync.WaitGroup
			errs := make([]error, 4)
			for q := range int32(4) {
				wg.Go(func() { errs[q] = readQueueBatched(nc, q, groupMessages/4) })
			}
			wg.Wait()
			for _, err := range errs {
				if err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ReportMetric(float64(groupMessages*rounds)/b.Elapsed().Seconds(), "msgs/s")
		b.ReportMetric(float64(processCPU()-cpu)/float64(groupMessages*rounds), "cpu-ns/msg")
	})

	b.Run("jetstream", func(b *testing.B) {
		js := jetStreamFilledNew(b, "GROUPBENCH", "gbench", groupMessages, body)
		cpu := processCPU()
		rounds := 0
		for b.Loop() {
			rounds++
			cons, err := js.CreateConsumer(context.Background(), "GROUPBENCH", jetstream.ConsumerConfig{AckPolicy: jetstream.AckNonePolicy})
			if err != nil {
				b.Fatal(err)
			}
			it, err := cons.Messages(jetstream.PullMaxMessages(1000))
			if err != nil {
				b.Fatal(err)
			}
			for n := 0; n < groupMessages; n++ {
				if _, err := it.Next(jetstream.NextMaxWait(10 * time.Second)); err != nil {
					b.Fatalf("after %d: %v", n, err)
				}
			}
			it.Stop()
		}
		b.ReportMetric(float64(groupMessages*rounds)/b.Elapsed().Seconds(), "msgs/s")
		b.ReportMetric(float64(processCPU()-cpu)/float64(groupMessages*rounds), "cpu-ns/msg")
	})
}

// processCPU is this process's CPU time (user + system) so far: per message, a figure a loaded
// machine moves less than the wall time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// drainMember hands out messages until the member's queues are read to their end.
func drainMember(m *api.Member) (int, error) {
	n := 0
	for {
		ctx, cancel := context.Background(), context.CancelFunc(func() {})
		if m.Buffered() == 0 {
			if m.AtEnd() {
				return n, nil
			}
			ctx, cancel = context.WithTimeout(ctx, 50*time.Millisecond)
		}
		_, err := m.Next(ctx)
		cancel()
		if err == context.DeadlineExceeded {
			continue
		}
		if err != nil {
			return n, err
		}
		n++
	}
}

// readQueueBatched reads queue q of topic bench to end with the batched read.
func readQueueBatched(nc *nats.Conn, q int32, end int64) error {
	for off := int64(0); off < end; {
		req, _ := json.Marshal(api.ReadRequest{Topic: "bench", Queues: []api.ReadQueue{{QueueID: q, Offset: off}}})
		m, err := nc.Request(api.Subject(api.DefaultPrefix, api.EndpointRead), req, 10*time.Second)
		if err != nil {
			return err
		}
		secs, err := api.ParseReadReply(m)
		if err != nil {
			return err
		}
		for _, err := range secs[0].Records() {
			if err != nil {
				return err
			}
		}
		off = secs[0].NextOffset
	}
	return nil
}

// jetStreamFilledNew is jetStreamFilled for the jetstream package's API: a JetStream server of
// its own, a file stream of n messages of body on subject.
func jetStreamFilledNew(b *testing.B, stream, subject string, n int, body []byte) jetstream.JetStream {
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
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{subject}, Storage: jetstream.FileStorage}); err != nil {
		b.Fatal(err)
	}
	for range n {
		if _, err := js.PublishAsync(subject, body); err != nil {
			b.Fatal(err)
		}
	}
	<-js.PublishAsyncComplete()
	return js
}
