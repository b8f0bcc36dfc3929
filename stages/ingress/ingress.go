package ingress

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/stages"
	"github.com/rocketstore/engine/stages/ingress/batched"
	"github.com/rocketstore/engine/stages/ingress/internal/bounded"
	"github.com/rocketstore/engine/stages/ingress/internal/drops"
	"github.com/rocketstore/engine/stages/ingress/internal/inbox"
	"github.com/rocketstore/engine/stages/ingress/replicated"
	"github.com/rocketstore/engine/stages/ingress/route"
)

// subscribeTimeout bounds how long Run waits for the server to confirm the subscriptions.
const subscribeTimeout = 10 * time.Second

// Ingress is the NATS ingress stage (see the package doc for the design). New builds it, Run
// runs it (once), Stop stops it gracefully; Stats and Ready may be called at any time.
//
// Goroutines: Run's own (the supervisor: subscriptions, stop protocol, drop reports), one per
// worker, and one per subscription that watches for slow-consumer events; all of them have
// exited when Run returns. nats.go runs the callbacks on its own goroutine per subscription.
type Ingress struct {
	cfg     Config
	log     zerolog.Logger
	router  *route.Router
	workers []*worker
	// src is where the messages come from (source.go); done is src.done, bound once: every
	// batch carries it without a new closure; durable is src.durable().
	src     Source
	done    func(*stages.Batch)
	durable bool

	counters  counters
	rejectLog bounded.LogLimiter
	failLog   bounded.LogLimiter
	replyLog  bounded.LogLimiter
	replyBufs sync.Pool // *[]byte for reply JSON

	started  atomic.Bool
	stopOnce sync.Once
	stop     chan struct{} // closed by Stop
	// ending is set when stop is closed or Run's ctx ends: the callbacks read it per message,
	// where a select on both channels was a third of the callback's own time.
	ending atomic.Bool
	ready  chan struct{} // closed by Run once the server has the subscriptions
	// abort is Run's ctx.Done(), set before the first subscription (so before any callback):
	// a callback blocked on a full worker gives up on it.
	abort <-chan struct{}
	// subsDone is closed by Run once every subscription's callbacks have ended: the workers
	// then finish what their channels hold and exit (on an abort they have exited already).
	subsDone chan struct{}
	// slow carries slow-consumer events from the watchers to Run (capacity 1: one pending
	// event is as good as many, the drop count is read when reporting).
	slow chan struct{}
	// quit is closed when Run ends, to stop the slow-consumer watchers.
	quit     chan struct{}
	watchers sync.WaitGroup
	subsMu   sync.Mutex
	subs     []*subscription // guarded by subsMu; partitions add and remove theirs (handoff.go)
	partMu   sync.Mutex      // serializes AddPartition and RemovePartition
	drops    drops.Reporter  // owned by Run's goroutine
	ffDrops  drops.Topics    // the fire-and-forget messages the inboxes had no room for
	// repl is the replicated source once it started (replsource.go), for its status; nil
	// otherwise.
	repl atomic.Pointer[replicated.Source]
	// tracker answers batched-ack streams (package batched), when Config.Batched is set. It outlives
	// Run (RunAcks), because the ack stage calls Done after Run has returned.
	tracker     *batched.Tracker
	acksStarted atomic.Bool
	// restart counts the lookups of Config.StoreDedupe (storededupe.go).
	restart storeLookups
	// freeBatches holds the memory of batches done with, for the workers to reuse (batchmem.go).
	freeBatches chan *batchMem
	// freeEntries holds the entry slices of packs done with, for onPack to reuse (batchmem.go).
	freeEntries chan []nats.Msg
}

// New checks cfg and builds an Ingress; Run starts it.
func New(cfg Config) (*Ingress, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	in := &Ingress{
		cfg:       cfg,
		log:       cfg.Logger.With().Str("stage", "ingress").Logger(),
		router:    route.NewRouter(cfg.Mapping, cfg.QueuesPerTopic, cfg.QueueKeyHeader, cfg.SubjectCache, cfg.Partitions),
		rejectLog: bounded.LogLimiter{Interval: cfg.LogInterval},
		failLog:   bounded.LogLimiter{Interval: cfg.LogInterval},
		replyLog:  bounded.LogLimiter{Interval: cfg.LogInterval},
		replyBufs: sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }},
		stop:      make(chan struct{}),
		ready:     make(chan struct{}),
		subsDone:  make(chan struct{}),
		slow:      make(chan struct{}, 1),
		quit:      make(chan struct{}),

		freeBatches: make(chan *batchMem, maxFreeBatches),
		freeEntries: make(chan []nats.Msg, maxFreeEntries),
	}
	in.drops = drops.Reporter{Interval: cfg.LogInterval, Log: in.log, Topics: &in.ffDrops, Counts: func() (int64, int64, int64) {
		dropped, pending := in.natsCounts()
		return dropped, pending, in.counters.slowEvents.Load()
	}}
	in.router.OnFirstOverflow(func(s string, max int) {
		in.log.Warn().Str("subject", s).Int("max_topics", max).Str("topic", route.OverflowTopic).Msg("ingress: topic limit reached: this subject and every later one without a topic of its own are stored in the overflow topic, each with its subject in NATS_SUBJECT; declare topics by subject pattern (--topics 'device.>') or raise --max-topics")
	})
	in.src = newSource(in)
	in.done, in.durable = in.batchDone, in.src.durable()
	// The store's own address, pid and the salt that marks a key as generated (the IndexFile
	// does not hold such keys: commitlog.IsGeneratedUniqKey), in RocketMQ's form of ids.
	gen := commitlog.NewUniqKeyGen(cfg.StoreHost.Addr(), os.Getpid(), commitlog.GeneratedSalt, cfg.Clock)
	gen.StartCounter(rand.Uint32())
	for i := range cfg.Workers {
		in.workers = append(in.workers, &worker{
			in:    in,
			id:    i,
			box:   inbox.New[job](cfg.WorkerQueue, share(cfg.PendingMsgs, cfg.Workers), share(cfg.PendingBytes, cfg.Workers)),
			props: propBuilder{keysHdr: cfg.KeysHeader, tagsHdr: cfg.TagsHeader, gen: gen, host: cfg.StoreHost.Addr()},
			plain: plainTemplates{max: max(maxPlainTemplates, plainTemplateBudget/cfg.Workers)},
		})
	}
	if cfg.Batched != nil {
		in.tracker = batched.NewTracker(cfg.Batched.WithDefaults(cfg.Conn.MaxPayload()), trackerHost{in}, cfg.Conn, in.log, &in.failLog, &in.replyLog)
	}
	return in, nil
}

// Subjects are the subscriptions' subjects (with their defaults: the owned partitions' under
// partitioned ingest).
func (in *Ingress) Subjects() []string {
	if p := in.cfg.Partitions; p != nil {
		var out []string
		for _, o := range p.OwnedNow() {
			out = append(out, route.PartitionSubject(p.Prefix, o)+".>")
		}
		return out
	}
	return slices.Clone(in.cfg.Subjects)
}

// Partitions is the partitioned-ingest configuration (nil when not partitioned); its OwnedNow
// follows the handoffs.
func (in *Ingress) Partitions() *route.Partitions { return in.cfg.Partitions }

// Ready is closed once the subscriptions are live at the server: messages published after it
// are received. It is never closed if Run fails before that.
func (in *Ingress) Ready() <-chan struct{} { return in.ready }

// Stop starts the graceful stop (see the package doc); Run returns nil once every message
// received has been sent to Out (or answered). Stop does not wait; it may be
// called any number of times, from any goroutine, before or during Run.
func (in *Ingress) Stop() {
	in.stopOnce.Do(func() {
		in.ending.Store(true)
		close(in.stop)
	})
}

// Run subscribes, runs the workers and returns after a graceful stop (nil) or when ctx ends
// (ctx's error: the abort). Either way every goroutine it started has exited, so nothing more is
// sent on Out: its owner (the engine) may close it then. It may be called once.
func (in *Ingress) Run(ctx context.Context) error {
	if !in.started.CompareAndSwap(false, true) {
		return errors.New("ingress: Run called twice")
	}
	defer in.drops.Stop()
	defer func() {
		close(in.quit)
		in.watchers.Wait()
	}()
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	in.abort = ctx.Done()
	defer context.AfterFunc(ctx, func() { in.ending.Store(true) })()

	group, _ := stages.NewGroup(ctx)
	for _, w := range in.workers {
		group.Go(fmt.Sprintf("ingress-worker-%d", w.id), w.run)
	}
	err := in.src.start(ctx)
	if err == nil {
		close(in.ready)
		in.log.Debug().Strs("subjects", in.cfg.Subjects).Int("workers", len(in.workers)).Msg("ingress running")
		if !in.serve(ctx) {
			cancel() // abort: from here on nothing blocks on the workers
		}
	} else {
		cancel()
	}
	in.src.stop(ctx, cancel)
	close(in.subsDone) // no callback runs any more: the workers finish what they hold
	_ = group.Wait()   // workers return nil or a cancellation, which the group swallows
	in.failLeftovers()
	in.drops.Report()
	switch {
	case err != nil:
		return err
	case ctx.Err() == nil:
		// Not aborted: every worker ran finish, so everything received was sent on or answered.
		st := in.Stats()
		in.log.Info().Int64("received", st.Received).Int64("excluded", st.Excluded).Int64("encoded", st.Encoded).
			Int64("rejected", sumCounts(st.Rejected)).Int64("dropped", st.Dropped).Int64("batched_received", st.Batched.Received).
			Msg("ingress stopped: everything received was handed to the store or answered")
		return nil
	case parent.Err() != nil:
		return parent.Err()
	}
	return ctx.Err()
}

// RunAcks runs the batched-ack tracker (Config.Batched) until drained is closed, which its
// owner (the engine) does once no batch's Done is called any more: the tracker answers the
// batches Done hands it until then, and what it still holds at that moment. Without
// Config.Batched it returns at once. It runs beside Run, in the same group: the ack stage
// calls Done after Run has returned. It may be called once.
func (in *Ingress) RunAcks(drained <-chan struct{}) error {
	if in.tracker == nil {
		return nil
	}
	if !in.acksStarted.CompareAndSwap(false, true) {
		return errors.New("ingress: RunAcks called twice")
	}
	in.tracker.Run(drained)
	st := in.Stats().Batched
	in.log.Info().Int64("acked", st.Acked).Int64("refused", st.Refused).Int64("ack_messages", st.AckMessages).
		Int64("publish_failures", st.PublishFailures).Int64("overflow", st.Overflow).
		Msg("batched acks stopped: every batch handed over is answered")
	return nil
}

// serve waits for a stop (true) or the end of ctx (false), reporting drops meanwhile.
func (in *Ingress) serve(ctx context.Context) bool {
	for {
		select {
		case <-in.stop:
			return true
		case <-ctx.Done():
			return false
		case <-in.slow:
			in.drops.Event()
		case <-in.drops.C:
			in.drops.Fire()
		}
	}
}

// failLeftovers answers what the workers took and did not process, and what their inboxes still
// hold, once the workers have exited. After a graceful stop there is nothing; after an abort the
// workers exited first, and a callback may have put a message in an inbox before it saw the
// abort.
func (in *Ingress) failLeftovers() {
	for _, w := range in.workers {
		for _, jobs := range [][]job{w.leftovers(), w.box.Take(nil)} {
			for i := range jobs {
				if j := &jobs[i]; j.msg != nil { // not a tracker marker, nor a fence (its waiter gives up with the abort)
					in.abandon(j)
				}
			}
		}
	}
}

// share is a worker's share of a bound of n over workers (at least 1); a negative n, no limit,
// stays negative.
func share(n, workers int) int64 {
	if n < 0 {
		return -1
	}
	return int64(max(n/workers, 1))
}
