package engine

import (
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
)

// dedupeBenchMessages is how many messages, each with an id of its own, one run publishes.
const dedupeBenchMessages = 200_000

// dedupeBenchWindows are the windows BenchmarkDedupePastItsBound compares.
var dedupeBenchWindows = []struct {
	name   string
	max    int
	forget bool
}{
	{"held", 2 * dedupeBenchMessages, false}, // every id in memory: the reference
	{"forget", 20_000, true},                 // ids past 20,000 forgotten, as before they were looked up
	{"lookup", 20_000, false},                // ids past 20,000 looked up in the IndexFile
}

// BenchmarkDedupePastItsBound publishes messages with distinct Nats-Msg-Ids as fast as a served
// engine (async flush) acks them (requests, up to 4,096 in flight), with three dedupe windows:
// held (DedupeMax above the messages: every id in memory), forget (DedupeMax 20,000, ids past it
// forgotten, as the window did before it looked them up) and lookup (DedupeMax 20,000, ids past
// it looked up in the IndexFile for the rest of their window: ingress's workers look each id up,
// the writer evicts only dispatched ids). The machine is shared, so each op runs the three in
// turn, rounds times in rotating order, and reports each one's median msgs/s and the process's
// CPU time per message (user + system), and lookup's ratio to forget.
//
// Run: go test -run '^$' -bench DedupePastItsBound -benchtime 1x ./engine
func BenchmarkDedupePastItsBound(b *testing.B) {
	const rounds = 3
	for b.Loop() {
		rates := make([][]float64, len(dedupeBenchWindows))
		cpus := make([][]float64, len(dedupeBenchWindows))
		for r := range rounds {
			for k := range dedupeBenchWindows {
				i := (k + r) % len(dedupeBenchWindows)
				rate, cpu := runDedupeBench(b, dedupeBenchWindows[i].max, dedupeBenchWindows[i].forget)
				rates[i], cpus[i] = append(rates[i], rate), append(cpus[i], cpu)
			}
		}
		for i, w := range dedupeBenchWindows {
			b.ReportMetric(median(rates[i]), w.name+"-msgs/s")
			b.ReportMetric(median(cpus[i]), w.name+"-cpu-µs/msg")
		}
		b.ReportMetric(median(rates[2])/median(rates[1]), "lookup/forget-msgs/s")
		b.ReportMetric(median(cpus[2])/median(cpus[1]), "lookup/forget-cpu")
	}
}

// runDedupeBench serves an engine with DedupeMax max (forget: ids past it forgotten), publishes
// dedupeBenchMessages with distinct ids and returns the msgs/s and the process's CPU µs/msg.
func runDedupeBench(b *testing.B, max int, forget bool) (rate, cpuPerMsg float64) {
	opts := Options{Dir: filepath.Join(b.TempDir(), "store"), Logger: zerolog.Nop(), FlushMode: FlushAsync,
		CommitLogFileSize: 256 << 20, DedupeMax: max, forgetPastDedupeMax: forget}
	srv, err := Serve(opts, NATSOptions{Listen: "127.0.0.1:-1", Subjects: []string{"bench.>"}})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Shutdown()
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	cpu0 := cpuTime()
	start := time.Now()
	publishDistinctIDs(b, nc, dedupeBenchMessages)
	rate = dedupeBenchMessages / time.Since(start).Seconds()
	cpuPerMsg = float64((cpuTime() - cpu0).Microseconds()) / dedupeBenchMessages
	st := srv.Stats()
	if st.Duplicates != 0 || st.Records != dedupeBenchMessages || (max < dedupeBenchMessages && st.DedupeEvicted == 0) {
		b.Fatalf("stored %d, %d duplicates, %d ids dropped early", st.Records, st.Duplicates, st.DedupeEvicted)
	}
	return rate, cpuPerMsg
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// publishDistinctIDs sends n requests with ids of their own, at most 4,096 in flight, and waits
// for every ack.
func publishDistinctIDs(b *testing.B, nc *nats.Conn, n int) {
	const window = 4096
	acks := make(chan *nats.Msg, window)
	inbox := nats.NewInbox()
	sub, err := nc.ChanSubscribe(inbox, acks)
	if err != nil {
		b.Fatal(err)
	}
	defer sub.Unsubscribe()
	body := make([]byte, 128)
	deadline := time.After(5 * time.Minute)
	got := 0
	wait := func() {
		select {
		case m := <-acks:
			if len(m.Data) > 2 && m.Data[2] == 'e' { // {"error":...}
				b.Fatalf("refused: %s", m.Data)
			}
			got++
		case <-deadline:
			b.Fatalf("%d of %d acked", got, n)
		}
	}
	for i := range n {
		if i-got >= window {
			wait()
		}
		m := &nats.Msg{Subject: "bench.ids", Reply: inbox, Data: body,
			Header: nats.Header{nats.MsgIdHdr: {"id-" + strconv.Itoa(i)}}}
		if err := nc.PublishMsg(m); err != nil {
			b.Fatal(err)
		}
	}
	for got < n {
		wait()
	}
}
