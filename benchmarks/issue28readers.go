package benchmarks

import (
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Readers of a whole topic, for issue 28's throughput: JetStream's pull consumer (the peer), and
// two clients of the engine written from its docs alone (engine/api/doc.go's "Pull",
// docs/GROUPS.md's "Read" and "The batched read's reply"), speaking plain nats.go: they import
// nothing of the engine. The same two clients read the storage-free responder (the ceiling).

// Reader kinds.
const (
	readerJetStream = "jetstream" // a JetStream pull consumer (Messages, PullMaxMessages)
	readerPull      = "pull"      // the engine's pull: one NATS message per record
	readerRead      = "read"      // the engine's batched read: many records per NATS message
)

// g28ReaderConfig configures a reader child.
type g28ReaderConfig struct {
	URL  string `json:"url"`
	Kind string `json:"kind"`
	// Topic (engine) and the number of messages to read in all (JetStream: the reader stops at
	// N, or, with Shared, once the shared consumer has nothing pending).
	Topic string `json:"topic"`
	N     int64  `json:"n"`
	// Max is the messages per request (pull, read) or the consumer's PullMaxMessages.
	Max int `json:"max"`
	// Consumer names JetStream's consumer; Shared: other readers share it (JetStream's group).
	Consumer string `json:"consumer"`
	Shared   bool   `json:"shared"`
	// NoTally skips the body checksums (the responder's bodies repeat).
	NoTally bool `json:"no_tally"`
}

// g28ReadResult is what a reader read, and when (the machine's monotonic clock).
type g28ReadResult struct {
	Got        Tally `json:"got"`
	Start, End int64 // "go" and the last message
	Usage      Usage `json:"usage"`
}

func g28ReaderMain(ctx context.Context, raw json.RawMessage, c *g28Child) error {
	var cfg g28ReaderConfig
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return err
	}
	nc, err := nats.Connect(cfg.URL, nats.Name("bench-reader-"+cfg.Kind))
	if err != nil {
		return err
	}
	defer nc.Close()
	var read func(ctx context.Context, t *readTally) error
	switch cfg.Kind {
	case readerJetStream:
		read, err = jsReader(ctx, nc, cfg)
	case readerPull, readerRead:
		read, err = docsReader(ctx, nc, cfg)
	default:
		err = fmt.Errorf("unknown reader kind %q", cfg.Kind)
	}
	if err != nil {
		return err
	}
	if err := c.send(g28Line{Ready: true}); err != nil {
		return err
	}
	if err := c.await(ctx, "go"); err != nil {
		return err
	}
	before := selfUsage()
	t := &readTally{noTally: cfg.NoTally}
	start := time.Now()
	if err := read(ctx, t); err != nil {
		return err
	}
	return c.result(g28ReadResult{Got: t.tally(), Start: monoNanos(start), End: monoNanos(t.lastTime()), Usage: selfUsage().Sub(before)})
}

// readTally counts bodies from several goroutines, and the time of the last.
type readTally struct {
	noTally bool
	mu      sync.Mutex
	t       Tally
	last    time.Time
}

// add counts a batch of bodies (one lock per batch).
func (r *readTally) add(t Tally) {
	now := time.Now()
	r.mu.Lock()
	r.t.Merge(t)
	r.last = now
	r.mu.Unlock()
}

func (r *readTally) tally() Tally {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.t
}

func (r *readTally) lastTime() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}

// count adds one body to a batch tally (or only counts it).
func (r *readTally) count(t *Tally, b []byte) {
	if r.noTally {
		t.Count++
		t.Bytes += int64(len(b))
		return
	}
	t.Add(b)
}

// jsReader reads the BENCH stream through a pull consumer with AckNone (the fastest JetStream
// reads), with Messages and PullMaxMessages(Max): pulls pipelined ahead of the reader.
func jsReader(ctx context.Context, nc *nats.Conn, cfg g28ReaderConfig) (func(context.Context, *readTally) error, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cons, err := js.CreateOrUpdateConsumer(cctx, jsStream, jetstream.ConsumerConfig{Durable: cfg.Consumer,
		AckPolicy: jetstream.AckNonePolicy, DeliverPolicy: jetstream.DeliverAllPolicy, MaxRequestBatch: 0})
	if err != nil {
		return nil, fmt.Errorf("consumer %s: %w", cfg.Consumer, err)
	}
	return func(ctx context.Context, t *readTally) error {
		it, err := cons.Messages(jetstream.PullMaxMessages(cmp.Or(cfg.Max, 1000)))
		if err != nil {
			return err
		}
		defer it.Stop()
		var batch Tally
		var n int64
		for cfg.Shared || n < cfg.N {
			wait := 10 * time.Second
			if cfg.Shared {
				wait = 500 * time.Millisecond
			}
			m, err := it.Next(jetstream.NextMaxWait(wait))
			if errors.Is(err, nats.ErrTimeout) && cfg.Shared {
				info, ierr := cons.Info(ctx)
				if ierr != nil {
					return ierr
				}
				if info.NumPending == 0 {
					break // the shared consumer has handed out everything
				}
				continue
			}
			if err != nil {
				return fmt.Errorf("after %d messages: %w", n, err)
			}
			t.count(&batch, m.Data())
			n++
			if batch.Count == 256 {
				t.add(batch)
				batch = Tally{}
			}
		}
		t.add(batch)
		return nil
	}, nil
}

// docsQueue is a queue to read and where it ends.
type docsQueue struct {
	ID  int32 `json:"queueId"`
	Max int64 `json:"maxOffset"`
}

// docsReader reads every queue of the topic to the end it had at the start (the offsets
// endpoint), one goroutine per queue, one request in flight per queue.
func docsReader(ctx context.Context, nc *nats.Conn, cfg g28ReaderConfig) (func(context.Context, *readTally) error, error) {
	req, _ := json.Marshal(map[string]string{"topic": cfg.Topic})
	msg, err := nc.Request("$RS.API.offsets", req, 10*time.Second)
	if err != nil {
		return nil, fmt.Errorf("offsets: %w", err)
	}
	var offs struct {
		Queues []docsQueue `json:"queues"`
		Error  *struct {
			Code        int    `json:"code"`
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(msg.Data, &offs); err != nil || offs.Error != nil || len(offs.Queues) == 0 {
		return nil, fmt.Errorf("offsets of %s: %s", cfg.Topic, truncate(string(msg.Data), 200))
	}
	return func(ctx context.Context, t *readTally) error {
		errs := make([]error, len(offs.Queues))
		var wg sync.WaitGroup
		for i, q := range offs.Queues {
			wg.Go(func() {
				if cfg.Kind == readerPull {
					errs[i] = pullQueue(ctx, nc, cfg, q, t)
				} else {
					errs[i] = readQueue(ctx, nc, cfg, q, t)
				}
			})
		}
		wg.Wait()
		return errors.Join(errs...)
	}, nil
}

// pullQueue reads queue q with pull: each record a NATS message on the request's reply subject,
// then an end message with Rs-Pull-Status and Rs-Pull-Next-Offset (engine/api/doc.go, "Pull").
func pullQueue(ctx context.Context, nc *nats.Conn, cfg g28ReaderConfig, q docsQueue, t *readTally) error {
	inbox := nats.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return err
	}
	defer sub.Unsubscribe()
	_ = sub.SetPendingLimits(-1, -1)
	for off := int64(0); off < q.Max; {
		req, _ := json.Marshal(map[string]any{"topic": cfg.Topic, "queueId": q.ID, "offset": off, "max": cmp.Or(cfg.Max, 4096)})
		if err := nc.PublishRequest("$RS.API.pull", inbox, req); err != nil {
			return err
		}
		var batch Tally
		for {
			m, err := sub.NextMsgWithContext(ctx)
			if err != nil {
				return fmt.Errorf("queue %d at %d: %w", q.ID, off, err)
			}
			if st := m.Header.Get("Rs-Pull-Status"); st != "" && m.Reply == "" && len(m.Data) == 0 {
				if st == "ERROR" {
					return fmt.Errorf("queue %d at %d: %s %s", q.ID, off, m.Header.Get("Rs-Pull-Error-Code"), m.Header.Get("Rs-Pull-Error"))
				}
				next, err := strconv.ParseInt(m.Header.Get("Rs-Pull-Next-Offset"), 10, 64)
				if err != nil || next <= off {
					return fmt.Errorf("queue %d at %d: status %s, next offset %q", q.ID, off, st, m.Header.Get("Rs-Pull-Next-Offset"))
				}
				off = next
				break
			}
			t.count(&batch, m.Data)
		}
		t.add(batch)
	}
	return nil
}

// readQueue reads queue q with the batched read: the reply's body is RSR1, then per queue a
// section (queueId, status, nextOffset, minOffset, maxOffset, count, length) and its records as
// stored (docs/GROUPS.md, "The batched read's reply").
func readQueue(ctx context.Context, nc *nats.Conn, cfg g28ReaderConfig, q docsQueue, t *readTally) error {
	for off := int64(0); off < q.Max; {
		req, _ := json.Marshal(map[string]any{"topic": cfg.Topic, "queues": []map[string]any{{"queueId": q.ID, "offset": off}},
			"max": cmp.Or(cfg.Max, 1024)})
		m, err := nc.RequestWithContext(ctx, "$RS.API.read", req)
		if err != nil {
			return fmt.Errorf("queue %d at %d: %w", q.ID, off, err)
		}
		if st := m.Header.Get("Rs-Read-Status"); st != "OK" {
			return fmt.Errorf("queue %d at %d: %s %s %s", q.ID, off, st, m.Header.Get("Rs-Error-Code"), m.Header.Get("Rs-Error"))
		}
		var batch Tally
		next, err := parseReadBody(m.Data, func(body []byte) { t.count(&batch, body) })
		if err != nil {
			return fmt.Errorf("queue %d at %d: %w", q.ID, off, err)
		}
		if next <= off {
			return fmt.Errorf("queue %d at %d: next offset %d", q.ID, off, next)
		}
		off = next
		t.add(batch)
	}
	return nil
}

// parseReadBody walks a batched read's reply of one queue and hands each record's body to
// each; it returns the section's nextOffset.
func parseReadBody(b []byte, each func(body []byte)) (int64, error) {
	if len(b) < 4 || string(b[:4]) != "RSR1" {
		return 0, errors.New("no RSR1")
	}
	b = b[4:]
	if len(b) < 37 {
		return 0, fmt.Errorf("a section of %d bytes", len(b))
	}
	next := int64(binary.BigEndian.Uint64(b[5:]))
	count := int(binary.BigEndian.Uint32(b[29:]))
	length := int(binary.BigEndian.Uint32(b[33:]))
	recs := b[37:]
	if length > len(recs) {
		return 0, fmt.Errorf("%d bytes of records, %d there", length, len(recs))
	}
	recs = recs[:length]
	for i := range count {
		body, size, err := recordBody(recs)
		if err != nil {
			return 0, fmt.Errorf("record %d of %d: %w", i, count, err)
		}
		each(body)
		recs = recs[size:]
	}
	if len(recs) != 0 {
		return 0, fmt.Errorf("%d bytes after %d records", len(recs), count)
	}
	return next, nil
}

// recordBody finds the body of the CommitLog record at the start of b (docs/GROUPS.md's table of
// a record's fields) and returns it with the record's size.
func recordBody(b []byte) ([]byte, int, error) {
	if len(b) < 52 {
		return nil, 0, fmt.Errorf("%d bytes", len(b))
	}
	size := int(binary.BigEndian.Uint32(b))
	if size < 52 || size > len(b) {
		return nil, 0, fmt.Errorf("TOTALSIZE %d of %d bytes", size, len(b))
	}
	sys := binary.BigEndian.Uint32(b[36:])
	at := 48 + 8 // BORNHOST
	if sys&0x10 != 0 {
		at = 48 + 20
	}
	at += 8 // STORETIMESTAMP
	if sys&0x20 != 0 {
		at += 20
	} else {
		at += 8
	}
	at += 4 + 8 // RECONSUMETIMES, PREPAREDTRANSACTIONOFFSET
	if at+4 > size {
		return nil, 0, errors.New("truncated before BODYLENGTH")
	}
	n := int(binary.BigEndian.Uint32(b[at:]))
	at += 4
	if n < 0 || at+n > size {
		return nil, 0, fmt.Errorf("BODYLENGTH %d past the record", n)
	}
	return b[at : at+n], size, nil
}
