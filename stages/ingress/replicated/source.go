// Package replicated is ingress's replicated source (docs/SCALE-OUT.md, "Replicated mode"):
// each owned partition consumed from its replicated JetStream stream through a pinned durable
// consumer, the live set of the engines sharing the consumer (heartbeats) and the rendezvous
// assignment of the partitions over it. Ingress imports it and hands it a Sink; it never imports
// ingress.
package replicated

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/rocketstore/engine/stages/ingress/internal/bounded"
	"github.com/rocketstore/engine/stages/ingress/route"
)

// Replicated mode (docs/SCALE-OUT.md, "Replicated mode"). Each partition is a replicated (R3)
// JetStream file stream in front of the engines, RMQ_P<p>, capturing "<prefix>.<p>.>": the
// publishers' acks are JetStream's. The engines that own the partition consume it through one
// durable pull consumer with the pinned-client priority policy, so that one of them at a time
// (the pinned one) takes it, and the others take over when it goes; each acks (AckAll) only what
// is durable in its own store, contiguously from the bottom.
//
// The sequence rule. Every record keeps its stream sequence (NATS_STREAM_SEQ, and its UNIQ_KEY
// is "<stream>:<seq>" without a Nats-Msg-Id). An engine takes a partition's messages only in
// sequence order: a message below the next expected sequence is a copy and is dropped; one above
// it (the pin moved, and the messages in between went to another engine, or were delivered
// before a restart) makes the engine read the missing ones from the stream itself first (an
// ordered consumer), never acking past them. Appends are deterministic: the store time is the
// stream's timestamp, the queue is the partition and the queue offsets count the partition's
// messages of each topic in stream order, so every engine that consumes the partition builds the
// same ConsumeQueue (physical offsets aside) and can serve or take over the partition.

// PropStreamSeq is the property that holds a replicated record's stream sequence.
const PropStreamSeq = "NATS_STREAM_SEQ"

// Defaults of Config.
const (
	DefaultStreamPrefix       = "RMQ_P"
	DefaultReplicatedConsumer = "rocketstore"
	DefaultPriorityGroup      = "owner"
	DefaultReplicas           = 3
	DefaultStreamMaxAge       = 7 * 24 * time.Hour
	DefaultPinnedTTL          = 10 * time.Second
	DefaultReplicatedAckWait  = 30 * time.Second
	DefaultReplicatedPending  = 16384
)

// Config turns on replicated mode (ingress's Config.Replicated; needs its Config.Partitions).
type Config struct {
	// StreamPrefix names the partitions' streams: <StreamPrefix><p> (DefaultStreamPrefix).
	StreamPrefix string
	// Consumer is the durable consumer every engine of a partition shares (its pinned client
	// takes the partition); Group its priority group.
	Consumer, Group string
	// Replicas, MaxAge: of the streams the engine creates when they do not exist (NoCreate: it
	// refuses to start instead). The servers should run with sync_interval: always, so that a
	// JetStream ack means the message is on disk on a majority.
	Replicas int
	MaxAge   time.Duration
	NoCreate bool
	// PinnedTTL: how long the pin survives its engine's silence before another engine takes the
	// partition; AckWait and MaxAckPending: of the consumer.
	PinnedTTL     time.Duration
	AckWait       time.Duration
	MaxAckPending int
	// Batch bounds one pull (256).
	Batch int
	// LastSeq is the last stream sequence of partition part this engine stored (0: none), from
	// its store (the engine's; required). Found is the engine's lookup of a stored record by
	// topic and UNIQ_KEY (required): after a restart, the messages between the consumer's ack
	// floor and LastSeq may be stored already.
	LastSeq func(part int) (uint64, error)
	Found   func(topic, uniqKey string) bool
	// RetryDelay: a partition whose messages the store did not take (disk full, say) starts
	// again from its last durable one after this (1 s).
	RetryDelay time.Duration
	// Name is this engine's name among the engines of the consumer (members.go): stable
	// across restarts and, for an even spread, its own (the engine passes its id or store host).
	Name string
	// Heartbeat is how often the engines of the consumer tell each other they are alive
	// (DefaultReplicatedHeartbeat). One not heard for five is gone; a change of the live set is
	// acted on once it has held for two.
	Heartbeat time.Duration
	// OnFatal is called, once, with an error that retrying cannot cure (a stream configuration
	// JetStream refuses): the engine should stop. Anything else is retried for as long as it
	// takes (a cluster that is still forming), and Source.Ready says why meanwhile.
	OnFatal func(error)
}

// WithDefaults checks s and returns it with its defaults.
func (s *Config) WithDefaults() (*Config, error) {
	c := *s
	if c.LastSeq == nil || c.Found == nil {
		return nil, errors.New("ingress: replicated mode needs LastSeq and Found")
	}
	if c.StreamPrefix == "" {
		c.StreamPrefix = DefaultStreamPrefix
	}
	if c.Consumer == "" {
		c.Consumer = DefaultReplicatedConsumer
	}
	if c.Group == "" {
		c.Group = DefaultPriorityGroup
	}
	if c.Replicas <= 0 {
		c.Replicas = DefaultReplicas
	}
	if c.MaxAge <= 0 {
		c.MaxAge = DefaultStreamMaxAge
	}
	if c.PinnedTTL <= 0 {
		c.PinnedTTL = DefaultPinnedTTL
	}
	if c.AckWait <= 0 {
		c.AckWait = DefaultReplicatedAckWait
	}
	if c.MaxAckPending <= 0 {
		c.MaxAckPending = DefaultReplicatedPending
	}
	if c.Batch <= 0 {
		c.Batch = 256
	}
	if c.RetryDelay <= 0 {
		c.RetryDelay = time.Second
	}
	if c.Heartbeat <= 0 {
		c.Heartbeat = DefaultReplicatedHeartbeat
	}
	if c.Name == "" {
		c.Name = "engine"
	}
	return &c, nil
}

// StreamName is partition part's stream.
func (s *Config) StreamName(part int) string { return s.StreamPrefix + strconv.Itoa(part) }

// MembersSubject is where the engines of the consumer send their heartbeats.
func (s *Config) MembersSubject() string {
	return MembersSubjectPrefix + "." + s.StreamPrefix + "." + s.Consumer
}

// Sink is what the source needs of ingress.
type Sink interface {
	// Take hands a message of a partition, at meta's place in its stream, to ingress: it blocks
	// while ingress is behind, and returns an error, the message not taken, once ctx ends or
	// ingress aborts. A message ingress cannot store is done (Partition.DoneOne) and taken.
	Take(ctx context.Context, m *nats.Msg, meta *Meta) error
	// Topic is the topic subject is stored under; false when it cannot be stored.
	Topic(subject string) (string, bool)
}

// Source is the running replicated source: it consumes the owned partitions' streams and hands
// their messages to ingress (Sink) in sequence order; ingress reports what became durable
// (Partition.DoneMany) and what the store could not take (Partition.Fail). A nil *Source answers
// its status methods as outside replicated mode.
type Source struct {
	conn *nats.Conn
	log  zerolog.Logger
	// partitions are the owned ones (at Start) and their subject prefix.
	partitions *route.Partitions
	sink       Sink
	src        *Config
	js         jetstream.JetStream
	parts      map[int]*Partition // every owned partition, made at the start
	members    *replMembers
	stop       context.CancelFunc
	wg         sync.WaitGroup
	waitLog    bounded.LogLimiter // "still waiting for JetStream" lines
	beatLog    bounded.LogLimiter // heartbeats that are not

	// settled is closed once the live engines have been found and the partitions assigned;
	// opened once every partition's stream and consumer are open; started once both are.
	settled, opened, started chan struct{}
	settledOnce, openedOnce  sync.Once
	startSteps               atomic.Int32 // of settled and opened, those done
	stateMu                  sync.Mutex
	live                     []string // guarded by stateMu: the live engines' names, as last applied
	fatal                    error    // guarded by stateMu: the error that stopped the opening
}

// Meta rides with a replicated message through ingress (in its job, then in Record.Ctx), from
// the partition loop to the ack stage.
type Meta struct {
	Part *Partition
	Seq  uint64
	TS   int64 // the stream's timestamp, ms
	// Ack is the message to AckAll with once everything up to Seq is durable; nil for a message
	// read by a catch-up (an ordered consumer: not the durable one).
	Ack jetstream.Msg
}

// Retry pacing of opening the partitions' streams and consumers.
const (
	openRetryMin = 250 * time.Millisecond
	openRetryMax = 2 * time.Second
	// openParallel bounds the streams and consumers being opened at once.
	openParallel = 8
	// openAttemptTimeout bounds one attempt: a request JetStream drops (a stream's leader not
	// elected yet, while another engine creates it) is asked again sooner than nats.go's 5 s.
	openAttemptTimeout = 2 * time.Second
	// waitLogEvery rate-limits the lines that say the engine is still waiting for JetStream.
	waitLogEvery = 10 * time.Second
)

// New makes the replicated source of cfg (with its defaults: Config.WithDefaults) for the owned
// partitions of parts, on conn, handing the messages to sink; Start starts it.
func New(cfg *Config, parts *route.Partitions, conn *nats.Conn, log zerolog.Logger, sink Sink) *Source {
	return &Source{conn: conn, log: log, partitions: parts, sink: sink, src: cfg,
		waitLog: bounded.LogLimiter{Interval: waitLogEvery}, beatLog: bounded.LogLimiter{Interval: waitLogEvery},
		settled: make(chan struct{}), opened: make(chan struct{}), started: make(chan struct{})}
}

// Start starts the replicated source: the heartbeats that find the other engines of
// the consumer, and the opening of every owned partition's stream and consumer, which is retried
// until it succeeds (a JetStream cluster that is still forming answers late, or not yet): it
// does not wait for either. Each partition's loop starts once its stream and consumer are open.
// The partitions are the ones owned now. It may be called once; the status methods may be
// called once it returned.
func (r *Source) Start(context.Context) error {
	js, err := jetstream.New(r.conn)
	if err != nil {
		return fmt.Errorf("ingress: replicated: %w", err)
	}
	rctx, stop := context.WithCancel(context.Background())
	owned := r.partitions.OwnedNow()
	self := replMember{Name: r.src.Name, Nonce: rand.Text(), Parts: owned}
	r.js, r.stop, r.parts = js, stop, map[int]*Partition{}
	r.members = newReplMembers(self, r.src.MembersSubject(), r.src.Heartbeat)
	for _, p := range owned {
		r.parts[p] = newPartition(r, p)
	}
	r.wg.Go(func() { r.balance(rctx) })
	r.wg.Go(func() { r.openAll(rctx, owned) })
	return nil
}

// openAll opens the partitions' streams and consumers, openParallel at a time, until every one
// is open, ctx ends or JetStream refuses one for good; each partition's loop starts once it is
// open. A failure is retried after a pause, the partition going to the back of the line. Each
// engine starts at a place of its own in the line, so that the engines of a cluster starting
// together do not all create the same stream at the same moment.
func (r *Source) openAll(ctx context.Context, owned []int) {
	if len(owned) == 0 {
		r.openedOnce.Do(func() { close(r.opened); r.startStep() })
		return
	}
	octx, cancel := context.WithCancel(ctx)
	defer cancel()
	h := fnv.New32a()
	_, _ = h.Write([]byte(r.members.self.Name))
	at := int(h.Sum32() % uint32(len(owned)))
	line := make(chan int, len(owned)) // each partition is in it at most once
	for _, p := range append(slices.Clone(owned[at:]), owned[:at]...) {
		line <- p
	}
	var left atomic.Int64
	left.Store(int64(len(owned)))
	var openers sync.WaitGroup
	for range min(openParallel, len(owned)) {
		openers.Go(func() {
			pause := openRetryMin
			for {
				var p int
				select {
				case p = <-line:
				case <-octx.Done():
					return
				}
				rp := r.parts[p]
				actx, acancel := context.WithTimeout(octx, openAttemptTimeout)
				err := rp.open(actx)
				acancel()
				if octx.Err() != nil {
					return
				}
				if err == nil {
					pause = openRetryMin
					r.wg.Go(func() { rp.run(ctx) })
					if left.Add(-1) == 0 {
						cancel() // every partition is open: the other openers stop
						return
					}
					continue
				}
				if isPermanentJetStream(err) {
					r.failOpen(err)
					cancel()
					return
				}
				line <- p
				if ok, held := r.waitLog.Allow(time.Now()); ok {
					r.log.Warn().Err(err).Int64("partitions_waiting", left.Load()).Int("of", len(owned)).
						Int64("attempts_not_logged", held).Dur("retry_in", pause).
						Msg("ingress: replicated: waiting for JetStream (a cluster still forming answers late); retrying, logged at most every 10s")
				}
				select {
				case <-time.After(pause):
				case <-octx.Done():
					return
				}
				pause = min(2*pause, openRetryMax)
			}
		})
	}
	openers.Wait()
	if left.Load() == 0 {
		r.log.Info().Int("partitions", len(owned)).Msg("ingress: replicated: every partition's stream and consumer open")
		r.openedOnce.Do(func() { close(r.opened); r.startStep() })
	}
}

// startStep marks one of settled and opened done; started closes after both.
func (r *Source) startStep() {
	if r.startSteps.Add(1) == 2 {
		close(r.started)
	}
}

// failOpen stops the opening for err, which retrying cannot cure.
func (r *Source) failOpen(err error) {
	r.stateMu.Lock()
	r.fatal = err
	r.stateMu.Unlock()
	r.log.Error().Err(err).Msg("ingress: replicated: JetStream refuses the partitions' stream or consumer; retrying cannot help")
	if r.src.OnFatal != nil {
		r.src.OnFatal(err)
	}
}

// open ensures partition rp's stream and consumer. Its error is kept for Ready.
func (rp *Partition) open(ctx context.Context) error {
	r := rp.r
	src, prefix, p := r.src, r.partitions.Prefix, rp.part
	name := src.StreamName(p)
	stream, err := r.js.Stream(ctx, name)
	if errors.Is(err, jetstream.ErrStreamNotFound) && !src.NoCreate {
		stream, err = RetryPlacement(ctx, func() (jetstream.Stream, error) {
			return r.js.CreateStream(ctx, jetstream.StreamConfig{
				Name: name, Subjects: []string{route.PartitionSubject(prefix, p) + ".>"},
				Storage: jetstream.FileStorage, Replicas: src.Replicas, Retention: jetstream.LimitsPolicy,
				MaxAge: src.MaxAge, Duplicates: 2 * time.Minute,
			})
		})
	}
	if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		stream, err = r.js.Stream(ctx, name) // another engine made it just now
	}
	if err != nil {
		err = fmt.Errorf("ingress: replicated: stream %s: %w", name, err)
	} else {
		var cons jetstream.Consumer
		cons, err = RetryPlacement(ctx, func() (jetstream.Consumer, error) {
			return stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
				Durable: src.Consumer, AckPolicy: jetstream.AckAllPolicy, AckWait: src.AckWait,
				MaxAckPending: src.MaxAckPending, DeliverPolicy: jetstream.DeliverAllPolicy,
				PriorityPolicy: jetstream.PriorityPolicyPinned, PriorityGroups: []string{src.Group}, PinnedTTL: src.PinnedTTL,
			})
		})
		if err != nil {
			err = fmt.Errorf("ingress: replicated: consumer %s on %s: %w", src.Consumer, name, err)
		} else {
			rp.stream, rp.cons = stream, cons
		}
	}
	rp.mu.Lock()
	rp.openErr, rp.opened = err, err == nil
	rp.mu.Unlock()
	return err
}

// Stop stops every partition loop and waits for them, then gives up the pins this
// engine holds and tells the other engines it is leaving, so that they take its partitions at
// once rather than after PinnedTTL.
func (r *Source) Stop() {
	r.stop()
	r.wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), unpinTimeout)
	defer cancel()
	for _, rp := range r.parts {
		rp.unpin(ctx)
	}
	if err := r.members.publish(r.conn, true); err != nil {
		r.log.Debug().Err(err).Msg("ingress: replicated: the last heartbeat")
	}
}

// Floors are each consumed partition's floor: the stream sequence up to which everything is
// durable here (and acked to the consumer); nil for a nil Source (not replicated mode).
func (r *Source) Floors() map[int]uint64 {
	if r == nil {
		return nil
	}
	out := make(map[int]uint64, len(r.parts))
	for p, rp := range r.parts {
		out[p] = rp.Floor()
	}
	return out
}
