package publisher_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/rocketstore/engine/engine"
	"github.com/rocketstore/engine/engine/publisher"
	"github.com/rocketstore/engine/internal/natstest"
)

// BenchmarkIngest: 4 publishers on their own connections send 128-byte messages over 16
// subjects to engine.Serve (embedded nats-server, real files) in sync mode, with a window of 4096
// each, and wait for every ack:
//
//   - batched: this package (one cumulative ack per stream per round);
//   - reply: plain request/reply, one reply per message (what any NATS client does);
//   - ff: fire-and-forget into the same engine, timed until it holds everything (the engine's
//     own ceiling: what batched acks can approach at best);
//   - ceiling: a bare subscriber on the same embedded server that only counts.
//
// Each reports msgs/s, the ack latency percentiles (publish to answer, batched and reply),
// acks/msg and syncs/msg. Publishers and engine share this process (and its 2 cores); the
// `engine bench` command measures in separate processes. Run with a fixed count, e.g.
//
//	go test ./engine/publisher -run '^$' -bench Ingest -benchtime 1000000x
func BenchmarkIngest(b *testing.B) {
	for _, mode := range []string{"batched", "reply", "ff", "ceiling"} {
		b.Run(mode, func(b *testing.B) { benchIngest(b, mode, engine.FlushSync) })
	}
}

const (
	benchPublishers = 4
	benchSubjects   = 16
	benchBody       = 128
	benchWindow     = 4096
)

// BenchmarkIngestPaced is BenchmarkIngest's batched and reply modes with the publishers paced
// to a total of RS_BENCH_RATE messages per second (default 60,000; set it to half the peak
// BenchmarkIngest measured), for the ack latency at that load: batched p99 against reply p99
// (the plain sync ack's latency) is the latency goal.
func BenchmarkIngestPaced(b *testing.B) {
	rate := 60_000
	if v, err := strconv.Atoi(os.Getenv("RS_BENCH_RATE")); err == nil && v > 0 {
		rate = v
	}
	for _, mode := range []string{"batched", "reply"} {
		b.Run(fmt.Sprintf("%s@%d", mode, rate), func(b *testing.B) {
			benchPace = time.Second / time.Duration(rate/benchPublishers)
			defer func() { benchPace = 0 }()
			benchIngest(b, mode, engine.FlushSync)
		})
	}
}

// benchPace, when set, is the interval between two messages of one publisher.
var benchPace time.Duration

// pace waits until message i of a publisher that started at start is due (open loop: a
// publisher that fell behind catches up without waiting).
func pace(start time.Time, i int) {
	if benchPace == 0 {
		return
	}
	if d := time.Until(start.Add(time.Duration(i) * benchPace)); d > 0 {
		time.Sleep(d)
	}
}

func benchIngest(b *testing.B, mode string, flush engine.FlushMode) {
	n := b.N
	var url string
	var srv *server
	var holds func(ctx context.Context) // returns once the target holds n messages
	if mode == "ceiling" {
		url, holds = ceilingServer(b, n)
	} else {
		opts := engine.Options{
			Dir: b.TempDir(), Logger: zerolog.Nop(), FlushMode: flush, CommitLogFileSize: 256 << 20,
		}
		srv = serve(b, opts, engine.NATSOptions{Subjects: []string{"bench.>"}, PendingMsgs: -1, PendingBytes: -1})
		url = srv.ClientURL()
		holds = func(ctx context.Context) {
			// Event-driven, as the benchmarks' engine target: every time Dispatched moves, look
			// at the records counted (the appender counts a record before Written passes it).
			e := srv.Engine
			for {
				off := e.Offsets().Dispatched
				if e.Stats().Records >= int64(n) && e.Offsets().Written == off {
					return
				}
				if e.WaitDispatched(ctx, off+1) != nil {
					return
				}
			}
		}
	}
	per := (n + benchPublishers - 1) / benchPublishers
	body := make([]byte, benchBody)
	subjects := make([]string, benchSubjects)
	for i := range subjects {
		subjects[i] = "bench.t" + strconv.Itoa(i)
	}
	conns := make([]*nats.Conn, benchPublishers)
	for i := range conns {
		conns[i] = connect(b, url)
	}
	lat := make([][]time.Duration, benchPublishers)
	var acks, syncs0 int64
	if srv != nil {
		syncs0 = srv.Engine.Stats().Syncs
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	b.SetBytes(benchBody)
	b.ResetTimer()
	cpu0 := cpuTime()
	start := time.Now()
	var wg sync.WaitGroup
	for p := range benchPublishers {
		msgs := max(min(per, n-p*per), 0)
		wg.Go(func() {
			var err error
			switch mode {
			case "batched":
				lat[p], err = runBatched(ctx, conns[p], msgs, p, subjects, body)
			case "reply":
				lat[p], err = runReply(ctx, conns[p], msgs, p, subjects, body)
			default:
				err = runFF(conns[p], msgs, p, subjects, body)
			}
			if err != nil {
				b.Error(err)
			}
		})
	}
	wg.Wait()
	if mode == "ff" || mode == "ceiling" {
		holds(ctx)
	}
	elapsed := time.Since(start)
	cpu := cpuTime() - cpu0
	b.StopTimer()

	b.ReportMetric(float64(n)/elapsed.Seconds(), "msgs/s")
	// CPU per message (publishers, NATS server and engine, this whole process): on a machine
	// shared with other work the rate moves with the load around, this much less.
	b.ReportMetric(float64(cpu.Nanoseconds())/1e3/float64(n), "cpu-µs/msg")
	if all := slices.Concat(lat...); len(all) > 0 {
		slices.Sort(all)
		b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-µs")
		b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-µs")
	}
	if srv != nil {
		st := srv.Stats()
		acks = st.Ingress.AcksSent + st.Ingress.Batched.AckMessages
		b.ReportMetric(float64(acks)/float64(n), "acks/msg")
		b.ReportMetric(float64(st.Syncs-syncs0)/float64(n), "syncs/msg")
		b.ReportMetric(float64(st.Records)/float64(max(st.Batches, 1)), "msgs/batch")
		if st.Records != int64(n) || st.Ingress.Dropped != 0 {
			b.Fatalf("stored %d of %d (dropped %d)", st.Records, n, st.Ingress.Dropped)
		}
	}
}

func runBatched(ctx context.Context, nc *nats.Conn, n, id int, subjects []string, body []byte) ([]time.Duration, error) {
	lat := make([]time.Duration, n+1)
	var failed atomic.Int64
	p, err := publisher.New(nc, publisher.Options{Window: benchWindow, OnResult: func(f *publisher.Future, a publisher.Ack, err error) {
		if err != nil {
			failed.Add(1)
			return
		}
		lat[a.Seq] = f.Answered().Sub(f.Published()) // sequences are 1..n, in pack order
	}})
	if err != nil {
		return nil, err
	}
	defer p.Close(ctx)
	start := time.Now()
	for i := 1; i <= n; i++ {
		pace(start, i)
		if _, err := p.Publish(ctx, subjects[(i*benchPublishers+id)%len(subjects)], body, nil); err != nil {
			return nil, err
		}
	}
	if err := p.Flush(ctx); err != nil {
		return nil, err
	}
	if failed.Load() > 0 {
		return nil, fmt.Errorf("%d failed", failed.Load())
	}
	return lat[1:], nil
}

func runReply(ctx context.Context, nc *nats.Conn, n, id int, subjects []string, body []byte) ([]time.Duration, error) {
	if n == 0 {
		return nil, nil
	}
	prefix := nc.NewInbox()
	sentAt := make([]time.Time, n)
	lat := make([]time.Duration, n)
	window := make(chan struct{}, benchWindow)
	done := make(chan struct{})
	var got int
	sub, err := nc.Subscribe(prefix+".*", func(m *nats.Msg) {
		i, _ := strconv.Atoi(m.Subject[len(prefix)+1:])
		lat[i] = time.Since(sentAt[i])
		<-window
		if got++; got == n {
			close(done)
		}
	})
	if err != nil {
		return nil, err
	}
	defer sub.Unsubscribe()
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		return nil, err
	}
	if err := nc.Flush(); err != nil {
		return nil, err
	}
	start := time.Now()
	for i := range n {
		pace(start, i)
		select {
		case window <- struct{}{}:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		sentAt[i] = time.Now()
		if err := nc.PublishRequest(subjects[(i*benchPublishers+id)%len(subjects)], prefix+"."+strconv.Itoa(i), body); err != nil {
			return nil, err
		}
	}
	select {
	case <-done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return lat, nil
}

func runFF(nc *nats.Conn, n, id int, subjects []string, body []byte) error {
	for i := range n {
		if err := nc.Publish(subjects[(i*benchPublishers+id)%len(subjects)], body); err != nil {
			return err
		}
	}
	return nc.Flush()
}

// ceilingServer is an embedded nats-server with one subscriber that counts: what NATS itself
// takes fire-and-forget in this process.
func ceilingServer(b *testing.B, want int) (string, func(context.Context)) {
	opts := engine.Options{Dir: b.TempDir(), Logger: zerolog.Nop(), CommitLogFileSize: 1 << 20}
	// An engine that stores nothing: its server is the ceiling's, its connection our counter's.
	srv := serve(b, opts, engine.NATSOptions{Subjects: []string{"unused.>"}, NoReadAPI: true})
	all := natstest.CountTo(b, connect(b, srv.ClientURL()), "bench.>", int64(want))
	return srv.ClientURL(), func(ctx context.Context) {
		select {
		case <-all:
		case <-ctx.Done():
		}
	}
}

// cpuTime is the user and system CPU time of this process so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkResendLookup is what a resend costs the engine before it is claimed: the IndexFile
// query the engine's Lookup runs (Engine.Query by topic and id), over a store of 200,000
// messages, for ids found and ids not there.
func BenchmarkResendLookup(b *testing.B) {
	opts := engine.Options{Dir: b.TempDir(), Logger: zerolog.Nop(), CommitLogFileSize: 256 << 20}
	s := serve(b, opts, engine.NATSOptions{Subjects: []string{"bench.>"}})
	p := newPublisher(b, connect(b, s.ClientURL()), publisher.Options{})
	const n = 200_000
	publishN(b, p, n, benchBody, func(int) string { return "bench.lookup" })
	flush(b, p)
	for _, c := range []struct {
		name  string
		found bool
	}{{"found", true}, {"absent", false}} {
		b.Run(c.name, func(b *testing.B) {
			ctx := context.Background()
			i := 0
			for b.Loop() {
				i++
				id := fmt.Sprintf("%s:%d", p.StreamID(), 1+i*7919%n)
				if !c.found {
					id += "x"
				}
				got, err := s.Engine.Query(ctx, engine.QueryRequest{Topic: "bench_lookup", Key: id})
				if err != nil || (len(got) == 1) != c.found {
					b.Fatalf("%s: %d found, %v", id, len(got), err)
				}
			}
		})
	}
}
