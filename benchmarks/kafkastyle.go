package benchmarks

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/rocketstore/engine/internal/wire"
)

func init() {
	for _, sync := range []bool{false, true} {
		name, doc := "kafka-style",
			"the classic per-topic log: a subscriber like the ceiling's appends every message to its topic's own file "+
				"(length-prefixed, CRC-32C), one write per dirty topic per batch, into the page cache; replies after the write"
		if sync {
			name, doc = "kafka-style-sync", "the same, and every dirty topic file is fdatasync'ed before the batch is acknowledged"
		}
		register(&Scenario{
			Name: name, Doc: doc,
			Modes: []AckMode{FireAndForget, RequestReply},
			New: func(cfg TargetConfig, log zerolog.Logger) (Target, error) {
				return &kafkaTarget{cfg: cfg, log: log, sync: sync}, nil
			},
			Verify: verifyKafkaLogs,
		})
	}
}

// kafkaDir is where a kafka-style target keeps its topic files inside the run's directory.
func kafkaDir(runDir string) string { return filepath.Join(runDir, "kafka") }

// kafkaFile is the file of a topic: its subject, with ".log".
func kafkaFile(dir, subject string) string { return filepath.Join(dir, subject+".log") }

// kafkaMaxBatch bounds the messages the writer takes per round.
const kafkaMaxBatch = 4096

// Record framing: [len uint32 BE][crc32c(body) uint32 BE][body].
const kafkaRecordHeader = 8

// kafkaTarget is the per-topic-log baseline, the design of Kafka's partition logs: every topic
// has its own append-only file. A subscription (like the ceiling's) hands messages to one
// writer goroutine, which takes what is queued (up to kafkaMaxBatch), appends each message to
// its topic's buffer, then writes every dirty topic's buffer to its file (one write(2) per
// dirty topic), fdatasyncs each of those files (sync variant), and only then replies. The
// more topics, the more files a batch touches: the cost the topic-count sweep shows.
type kafkaTarget struct {
	cfg  TargetConfig
	log  zerolog.Logger
	sync bool

	ns     *server.Server
	nc     *nats.Conn
	closed chan struct{}
	in     chan *nats.Msg
	wdone  chan struct{}
	werr   error // writer's; read after wdone

	topics  map[string]*topicLog
	dirty   []*topicLog
	seen    int64 // messages the writer took, for the TargetDrop fault
	written int64
	syncs   int64
	ack     []byte
	prog    *progress
}

// topicLog is one topic's file and what the current batch appends to it.
type topicLog struct {
	f   *os.File
	buf []byte
}

// Start makes the directory (and every topic's file unless Cold), runs the server and the
// writer, and subscribes.
func (t *kafkaTarget) Start(context.Context) (string, error) {
	dir := kafkaDir(t.cfg.Dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	t.topics = map[string]*topicLog{}
	if !t.cfg.Run.Target.Cold {
		for _, s := range subjects(t.cfg.Run.Load.Topics) {
			if _, err := t.topic(s); err != nil {
				return "", errors.Join(err, t.closeFiles())
			}
		}
	}
	var err error
	if t.ns, err = startServer(t.log); err != nil {
		return "", errors.Join(err, t.closeFiles())
	}
	t.prog = newProgress()
	t.closed = make(chan struct{})
	t.in = make(chan *nats.Msg, 2*kafkaMaxBatch)
	t.wdone = make(chan struct{})
	go t.writer()
	t.nc, err = nats.Connect(t.ns.ClientURL(), nats.Name("bench-kafka-style"),
		nats.ClosedHandler(func(*nats.Conn) { close(t.closed) }))
	if err != nil {
		return "", errors.Join(err, t.Stop())
	}
	sub, err := t.nc.Subscribe(t.cfg.Run.Target.subject(), func(m *nats.Msg) { t.in <- m })
	if err == nil {
		err = setPending(sub, t.cfg.Run.Target)
	}
	if err == nil {
		err = t.nc.Flush()
	}
	if err != nil {
		return "", errors.Join(err, t.Stop())
	}
	return t.ns.ClientURL(), nil
}

// topic returns the log of a subject, creating its file on first use.
func (t *kafkaTarget) topic(subject string) (*topicLog, error) {
	if tl := t.topics[subject]; tl != nil {
		return tl, nil
	}
	if strings.ContainsAny(subject, `/\`) || subject == "" {
		return nil, fmt.Errorf("subject %q cannot name a file", subject)
	}
	f, err := os.OpenFile(kafkaFile(kafkaDir(t.cfg.Dir), subject), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	tl := &topicLog{f: f}
	t.topics[subject] = tl
	return tl, nil
}

// writer is the single writer: block for a message, take what else is queued, write the batch.
// A write error stops it; the run then misses messages and verification says so.
func (t *kafkaTarget) writer() {
	defer close(t.wdone)
	batch := make([]*nats.Msg, 0, kafkaMaxBatch)
	for m := range t.in {
		batch = append(batch[:0], m)
	more:
		for len(batch) < kafkaMaxBatch {
			select {
			case m, ok := <-t.in:
				if !ok {
					break more
				}
				batch = append(batch, m)
			default:
				break more
			}
		}
		if err := t.writeBatch(batch); err != nil {
			t.werr = err
			t.log.Error().Err(err).Msg("kafka-style writer stopped")
			for range t.in { // keep the subscription from blocking; everything left is lost
			}
			return
		}
	}
}

// writeBatch appends the batch to its topics' files, syncs them (sync variant) and replies.
func (t *kafkaTarget) writeBatch(batch []*nats.Msg) error {
	for _, m := range batch {
		t.seen++
		if t.seen == t.cfg.Run.Fault.TargetDrop {
			continue // the deliberate loss: not written, but answered below
		}
		tl, err := t.topic(m.Subject)
		if err != nil {
			return err
		}
		if len(tl.buf) == 0 {
			t.dirty = append(t.dirty, tl)
		}
		tl.buf = binary.BigEndian.AppendUint32(tl.buf, uint32(len(m.Data)))
		tl.buf = binary.BigEndian.AppendUint32(tl.buf, crc32.Checksum(m.Data, castagnoli))
		tl.buf = append(tl.buf, m.Data...)
	}
	for _, tl := range t.dirty {
		if _, err := tl.f.Write(tl.buf); err != nil {
			return err
		}
		if t.sync {
			if err := unix.Fdatasync(int(tl.f.Fd())); err != nil {
				return fmt.Errorf("fdatasync %s: %w", tl.f.Name(), err)
			}
			t.syncs++
		}
		tl.buf = tl.buf[:0]
	}
	t.dirty = t.dirty[:0]
	now := time.Now()
	for _, m := range batch {
		t.written++
		if m.Reply != "" {
			t.ack = wire.AppendAck(t.ack[:0], &wire.Ack{
				Topic: m.Subject, QueueOffset: t.written - 1, MsgID: ackMsgID, StoreTimestamp: now.UnixMilli(),
			})
			if err := t.nc.Publish(m.Reply, t.ack); err != nil {
				return fmt.Errorf("reply: %w", err)
			}
		}
	}
	t.prog.set(t.written, now)
	return nil
}

// Await waits for n messages written (and answered).
func (t *kafkaTarget) Await(ctx context.Context, n int64, stall time.Duration) (time.Time, error) {
	return t.prog.await(ctx, n, stall)
}

// Stop drains the subscription into the writer, stops the writer, closes the files.
func (t *kafkaTarget) Stop() error {
	var err error
	drained := true
	if t.nc != nil {
		if err = t.nc.Drain(); err == nil {
			<-t.closed
		} else {
			t.nc.Close() // a callback may still run: the writer is left to the process's exit
			drained = false
		}
	}
	if t.in != nil && drained {
		close(t.in)
		<-t.wdone
		err = errors.Join(err, t.werr)
	}
	if t.ns != nil {
		t.ns.Shutdown()
		t.ns.WaitForShutdown()
	}
	return errors.Join(err, t.closeFiles())
}

func (t *kafkaTarget) closeFiles() error {
	var err error
	for _, tl := range t.topics {
		err = errors.Join(err, tl.f.Close())
	}
	return err
}

// Report counts the syncs; verification reads the files back.
func (t *kafkaTarget) Report() TargetReport {
	r := TargetReport{}
	if t.sync {
		r.Syncs, r.Synced = t.syncs, t.written
	}
	return r
}

// verifyKafkaLogs reads every topic file back: every record must be whole with its CRC, under
// the topic its publisher sent it to, and the bodies must tally exactly to what was sent.
func verifyKafkaLogs(ctx context.Context, in VerifyInput) (Tally, []string) {
	var t Tally
	var problems []string
	dir := kafkaDir(in.Dir)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return t, []string{"reading the topic files: " + err.Error()}
	}
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		if subj, ok := strings.CutSuffix(e.Name(), ".log"); ok && !e.IsDir() {
			names = append(names, subj)
		}
	}
	slices.Sort(names)
	route := newRouteCheck(in.Run.Load)
	for _, subj := range names {
		if err := ctx.Err(); err != nil {
			return t, append(problems, err.Error())
		}
		err := readKafkaLog(kafkaFile(dir, subj), func(body []byte) {
			t.Add(body)
			if p := route.check(subj, body); p != "" && len(problems) < 5 {
				problems = append(problems, p)
			}
		})
		if err != nil {
			return t, append(problems, err.Error())
		}
	}
	if d := in.Sent.Diff(t); d != "" {
		problems = append(problems, "topic files: "+d)
	}
	return t, problems
}

// readKafkaLog calls fn with every record's body of one topic file; a torn or corrupt record
// is an error.
func readKafkaLog(name string, fn func(body []byte)) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	var hdr [kafkaRecordHeader]byte
	var body []byte
	for off := int64(0); ; {
		if _, err := io.ReadFull(r, hdr[:]); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return fmt.Errorf("%s at %d: torn record header: %w", name, off, err)
		}
		size := binary.BigEndian.Uint32(hdr[:4])
		if size > benchMaxPayload {
			return fmt.Errorf("%s at %d: record of %d bytes", name, off, size)
		}
		body = slices.Grow(body[:0], int(size))[:size]
		if _, err := io.ReadFull(r, body); err != nil {
			return fmt.Errorf("%s at %d: torn record: %w", name, off, err)
		}
		if crc32.Checksum(body, castagnoli) != binary.BigEndian.Uint32(hdr[4:]) {
			return fmt.Errorf("%s at %d: record CRC mismatch", name, off)
		}
		fn(body)
		off += kafkaRecordHeader + int64(size)
	}
}
