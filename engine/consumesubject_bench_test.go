package engine

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/rocketstore/engine/engine/api"
	"github.com/rocketstore/engine/internal/natssubject"
	"github.com/rocketstore/engine/stages/ingress/route"
)

// Sizes of the one-subject read: a wide topic of wideMessages messages over wideSubjects
// subjects (device.<i>.temp), of which a consumer reads one.
const (
	wideMessages = 200_000
	wideSubjects = 1_000
)

// BenchmarkConsumeOneSubject reads one subject of a wide topic back from its start: the
// engine's Go consumer with ConsumerConfig.Subject over one declared topic (queue 0 holds every
// message), and, in the same run, a JetStream pull consumer with a FilterSubject on a
// file-store stream of the same messages. Each reports the matching messages per second and the
// milliseconds one whole read takes; compare them within one run.
//
// Run: go test -run '^$' -bench ConsumeOneSubject -benchtime 5x ./engine
func BenchmarkConsumeOneSubject(b *testing.B) {
	body := make([]byte, 128)
	const want = wideMessages / wideSubjects
	subject := func(i int) string { return fmt.Sprintf("device.%d.temp", i%wideSubjects) }
	report := func(b *testing.B, n int) {
		if n != want {
			b.Fatalf("read %d messages of the subject, want %d", n, want)
		}
		b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "msgs/s")
		b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/read")
	}

	// engine: the topic under the subject-tag rule, so other subjects are skipped by tag code;
	// engine-no-subject-tags: the same topic outside it, each candidate record read.
	for _, name := range []string{"engine", "engine-no-subject-tags"} {
		b.Run(name, func(b *testing.B) { consumeOneSubjectEngine(b, name != "engine", body, subject, report) })
	}

	b.Run("jetstream", func(b *testing.B) {
		js := jetStreamFilled(b, "DEVICE", "device.>", wideMessages, subject, body)
		i, n := 0, 0
		for b.Loop() {
			sub, err := js.PullSubscribe(subject(7), fmt.Sprint("c", i), nats.AckNone(), nats.BindStream("DEVICE"))
			if err != nil {
				b.Fatal(err)
			}
			i++
			n = 0
			for n < want {
				msgs, err := sub.Fetch(256, nats.MaxWait(10*time.Second))
				if err != nil {
					b.Fatalf("fetch after %d: %v", n, err)
				}
				n += len(msgs)
			}
			sub.Unsubscribe()
		}
		report(b, n)
	})
}

// consumeOneSubjectEngine is BenchmarkConsumeOneSubject's engine side; noSubjectTags keeps the
// declared topic out of the subject-tag rule.
func consumeOneSubjectEngine(b *testing.B, noSubjectTags bool, body []byte, subject func(int) string, report func(*testing.B, int)) {
	srv, err := Serve(Options{Dir: filepath.Join(b.TempDir(), "store"), Logger: zerolog.Nop(), FlushMode: FlushAsync, CommitLogFileSize: 256 << 20},
		NATSOptions{Listen: "127.0.0.1:-1", Subjects: []string{"device.>"}, NoSubjectTags: noSubjectTags,
			Topics: []route.TopicPattern{{Subjects: "device.*.temp", Topic: "device"}}})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Shutdown()
	e := srv.Engine
	batch := make([]Message, 0, 256)
	for i := range wideMessages {
		batch = append(batch, Message{Topic: "device", Body: body, Properties: map[string]string{natssubject.Property: subject(i)}})
		if len(batch) == cap(batch) || i == wideMessages-1 {
			if _, err := e.Put(context.Background(), batch...); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
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
	c := api.NewClient(nc, api.WithTimeout(10*time.Second))
	n := 0
	for b.Loop() {
		k := c.NewConsumer(api.ConsumerConfig{Topic: "device", Subject: subject(7)})
		n = 0
		for range wideMessages {
			res, err := k.Next(context.Background())
			if err != nil {
				b.Fatal(err)
			}
			n += len(res.Messages)
			if res.NextOffset >= wideMessages {
				break
			}
		}
		k.Close()
	}
	report(b, n)
}
