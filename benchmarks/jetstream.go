package benchmarks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

// The references of kind JetStream: runs of the same load get ratios to them.
const (
	// RefJetStream is JetStream's file store at its default sync interval (jetstream-default).
	RefJetStream = "jetstream"
	// RefJetStreamSync is JetStream's file store syncing every write (jetstream-syncalways).
	RefJetStreamSync = "jetstream-sync"
)

func init() {
	for _, syncAlways := range []bool{false, true} {
		name, ref, doc := "jetstream-default", RefJetStream,
			"embedded nats-server with JetStream, a file stream on the subjects, default sync interval (2 min): the OS writes it back"
		if syncAlways {
			name, ref, doc = "jetstream-syncalways", RefJetStreamSync,
				"the same with sync_interval: always (server.Options.SyncAlways): every write synced before it is acknowledged"
		}
		register(&Scenario{
			Name: name, Doc: doc, Reference: ref,
			Modes: []AckMode{FireAndForget, RequestReply},
			New: func(cfg TargetConfig, log zerolog.Logger) (Target, error) {
				return &jsTarget{cfg: cfg, log: log, syncAlways: syncAlways}, nil
			},
			Verify: verifyJetStream,
		})
	}
}

const (
	// jsStream is the benchmark stream's name.
	jsStream = "BENCH"
	// jsMarkerSubject is where a JetStream target publishes its end-of-run markers; the stream
	// captures it, verification leaves it out.
	jsMarkerSubject = "benchctl.marker"
)

// jsDir is where a JetStream target keeps its store inside the run's directory.
func jsDir(runDir string) string { return filepath.Join(runDir, "jetstream") }

// startJetStream runs an embedded nats-server with JetStream on dir, configured as startServer
// configures the ceilings' server. unbounded lifts the stream's ingest queue limits (100,000
// messages, 128 MiB by default). Past them JetStream drops what a fire-and-forget publisher
// sends, and refuses requests with 429 Too Many Requests: with 4 publishers x 4096 in flight x
// 16 KiB (256 MiB) it refuses a third of them. The targets lift them, as the other targets'
// unlimited pending limits do in fire-and-forget: the rate is then how fast JetStream stores
// everything, rather than how much it sheds.
func startJetStream(log zerolog.Logger, dir string, syncAlways, unbounded bool) (*server.Server, error) {
	opts := &server.Options{
		Host:       "127.0.0.1",
		Port:       server.RANDOM_PORT,
		NoSigs:     true,
		MaxPayload: benchMaxPayload,
		ServerName: "bench-jetstream",
		JetStream:  true,
		StoreDir:   dir,
		SyncAlways: syncAlways, // sync_interval: always; otherwise the default (2 min)
	}
	if unbounded {
		opts.StreamMaxBufferedMsgs, opts.StreamMaxBufferedSize = math.MaxInt32, math.MaxInt64
	}
	ns, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("embedded nats with JetStream: %w", err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(30 * time.Second) {
		ns.Shutdown()
		return nil, errors.New("embedded nats with JetStream: not ready within 30s")
	}
	log.Debug().Str("url", ns.ClientURL()).Str("store", dir).Bool("sync_always", syncAlways).Msg("JetStream ready")
	return ns, nil
}

// jsTarget is JetStream's file store under the publishers: a stream on the benchmark subjects
// and the marker subject. Fire-and-forget publishes are core publishes into the stream's
// subjects (JetStream stores them and answers nobody); request/reply publishes get JetStream's
// PubAck, which the publishers take as the ack. The target runs no subscriber of its own.
type jsTarget struct {
	cfg        TargetConfig
	log        zerolog.Logger
	syncAlways bool

	ns      *server.Server
	nc      *nats.Conn
	js      jetstream.JetStream
	markers int64 // marker messages published (they are stored too)
}

// Start runs the server and creates the stream.
func (t *jsTarget) Start(ctx context.Context) (string, error) {
	o := t.cfg.Run.Target
	var err error
	if t.ns, err = startJetStream(t.log, jsDir(t.cfg.Dir), t.syncAlways, true); err != nil {
		return "", err
	}
	if t.nc, err = nats.Connect(t.ns.ClientURL(), nats.Name("bench-jetstream-control")); err == nil {
		t.js, err = jetstream.New(t.nc)
	}
	if err == nil {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		_, err = t.js.CreateStream(cctx, jetstream.StreamConfig{
			Name:      jsStream,
			Subjects:  []string{o.subject(), jsMarkerSubject},
			Storage:   jetstream.FileStorage,
			Retention: jetstream.LimitsPolicy,
			Discard:   jetstream.DiscardOld,
			MaxMsgs:   -1, MaxBytes: -1, MaxAge: 0,
			Replicas: 1,
		})
		cancel()
	}
	if err != nil {
		return "", errors.Join(err, t.Stop())
	}
	return t.ns.ClientURL(), nil
}

// stored is the number of messages in the stream now, markers included (read in the process,
// not through the JetStream API, which queues behind a backlog).
func (t *jsTarget) stored() (int64, error) {
	info, err := t.ns.Jsz(nil)
	if err != nil {
		return 0, err
	}
	return int64(info.Messages), nil
}

// Await publishes a marker to the stream, with a reply subject, once the publishers are done.
// JetStream stores a stream's messages in the order they reached it, one at a time, and every
// publisher's last message reached it before its final flush returned; so once the marker's
// PubAck comes back, every message sent before it is stored, and that is the moment the
// target held everything. While it waits, the stream's count going up is progress.
func (t *jsTarget) Await(ctx context.Context, n int64, stall time.Duration) (time.Time, error) {
	acked := make(chan *nats.Msg, 1)
	reply := nats.NewInbox()
	sub, err := t.nc.Subscribe(reply, func(m *nats.Msg) {
		select {
		case acked <- m:
		default:
		}
	})
	if err != nil {
		return time.Time{}, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := t.nc.PublishRequest(jsMarkerSubject, reply, nil); err != nil {
		return time.Time{}, err
	}
	t.markers++
	tick := time.NewTicker(max(stall/8, time.Millisecond))
	defer tick.Stop()
	seen, since := int64(-1), time.Now()
	for {
		select {
		case m := <-acked:
			done := time.Now()
			var ack struct {
				Error *struct {
					Description string `json:"description"`
				} `json:"error"`
			}
			if err := json.Unmarshal(m.Data, &ack); err != nil || ack.Error != nil {
				return time.Time{}, fmt.Errorf("the end marker was refused: %s", truncate(string(m.Data), 200))
			}
			got, err := t.stored()
			if err != nil {
				return time.Time{}, err
			}
			if got -= t.markers; got < n {
				return time.Time{}, fmt.Errorf("holds %d of %d messages once everything sent was processed", got, n)
			}
			return done, nil
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("waiting for JetStream to store %d messages: %w", n, ctx.Err())
		case now := <-tick.C:
			cur, err := t.stored()
			if err != nil {
				return time.Time{}, err
			}
			if cur != seen {
				seen, since = cur, now
			} else if now.Sub(since) >= stall {
				return time.Time{}, fmt.Errorf("holds %d of %d messages, no progress for %s", cur-t.markers, n, stall)
			}
		}
	}
}

// Stop closes the connection and the server (JetStream writes its blocks and state out).
// With a TargetDrop fault it first deletes that stored message, so that verification must
// notice the loss.
func (t *jsTarget) Stop() error {
	var err error
	if d := t.cfg.Run.Fault.TargetDrop; d > 0 && t.js != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		var s jetstream.Stream
		if s, err = t.js.Stream(ctx, jsStream); err == nil {
			err = s.DeleteMsg(ctx, uint64(d))
		}
		cancel()
	}
	if t.nc != nil {
		t.nc.Close()
	}
	if t.ns != nil {
		t.ns.Shutdown()
		t.ns.WaitForShutdown()
	}
	return err
}

// Report has nothing to tally: verification reads the stream back.
func (t *jsTarget) Report() TargetReport { return TargetReport{} }

// verifyJetStream restarts JetStream, in the parent, on the store the target left, and reads
// the whole stream back with an ordered consumer: the bodies of the benchmark's messages (not
// the markers) must tally exactly to what was sent, and each must be under the subject its
// publisher sent it to.
func verifyJetStream(ctx context.Context, in VerifyInput) (Tally, []string) {
	var t Tally
	ns, err := startJetStream(zerolog.Nop(), jsDir(in.Dir), false, false)
	if err != nil {
		return t, []string{"restarting JetStream on the store: " + err.Error()}
	}
	defer func() { ns.Shutdown(); ns.WaitForShutdown() }()
	nc, err := nats.Connect(ns.ClientURL(), nats.Name("bench-verify"))
	if err != nil {
		return t, []string{err.Error()}
	}
	defer nc.Close()
	t, problems, err := readStream(ctx, nc, in.Run.Load, in.Run.stall())
	if err != nil {
		return t, append(problems, "reading the stream back: "+err.Error())
	}
	if d := in.Sent.Diff(t); d != "" {
		problems = append(problems, "stream: "+d)
	}
	return t, problems
}

// readStream reads every message of the benchmark stream in order and tallies the bodies of
// those that are not markers. Misrouted messages are problems; failing to read is an error.
func readStream(ctx context.Context, nc *nats.Conn, l Load, stall time.Duration) (Tally, []string, error) {
	var t Tally
	var problems []string
	js, err := jetstream.New(nc)
	if err != nil {
		return t, nil, err
	}
	ictx, cancel := context.WithTimeout(ctx, 30*time.Second)
	s, err := js.Stream(ictx, jsStream)
	var info *jetstream.StreamInfo
	if err == nil {
		info, err = s.Info(ictx)
	}
	cancel()
	if err != nil {
		return t, nil, err
	}
	if info.State.Msgs == 0 {
		return t, nil, nil
	}
	cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return t, nil, err
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(4096))
	if err != nil {
		return t, nil, err
	}
	defer it.Stop()
	route := newRouteCheck(l)
	for read := uint64(0); read < info.State.Msgs; read++ {
		m, err := it.Next(jetstream.NextMaxWait(stall))
		if err != nil {
			return t, problems, fmt.Errorf("after %d of %d messages: %w", read, info.State.Msgs, err)
		}
		if m.Subject() == jsMarkerSubject {
			continue
		}
		t.Add(m.Data())
		if p := route.check(m.Subject(), m.Data()); p != "" && len(problems) < 5 {
			problems = append(problems, p)
		}
	}
	return t, problems, nil
}
