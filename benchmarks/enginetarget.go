package benchmarks

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketstore/engine/engine"
	"github.com/rocketstore/engine/stages/ingress"
	"github.com/rocketstore/engine/stages/ingress/route"
)

func init() {
	for _, m := range []engine.FlushMode{engine.FlushAsync, engine.FlushSync} {
		register(&Scenario{
			Name: "engine-" + m.String(),
			Doc: fmt.Sprintf("engine.Serve (embedded nats-server, ingress, appender, group commit) on a temporary store, "+
				"flush mode %s; the store is read back after it closed", m),
			// Batched: the engine is the only target that speaks batched acks.
			Modes:       []AckMode{FireAndForget, RequestReply, Batched},
			Engine:      true,
			CountsDrops: true,
			New: func(cfg TargetConfig, log zerolog.Logger) (Target, error) {
				return &engineTarget{cfg: cfg, log: log, mode: m}, nil
			},
			Verify: verifyEngineStore,
		})
	}
}

// storeDir is where an engine target keeps its store inside the run's directory.
func storeDir(runDir string) string { return filepath.Join(runDir, "store") }

// EngineReport is what an engine target reports: its counters at the moment it held every
// message (before the shutdown's final sync), and the syncs after the shutdown.
type EngineReport struct {
	Records      int64   `json:"records"`
	Bytes        int64   `json:"bytes"`
	Batches      int64   `json:"batches"`
	Syncs        int64   `json:"syncs"`
	SyncsPerMsg  float64 `json:"syncs_per_msg"`
	Duplicates   int64   `json:"duplicates"`
	AppendErrors int64   `json:"append_errors"`
	// Ingress counters: messages received, dropped by nats.go (slow consumer), acks and error
	// replies sent, replies that failed to go out.
	Received      int64 `json:"received"`
	Dropped       int64 `json:"dropped"`
	AcksSent      int64 `json:"acks_sent"`
	ErrorReplies  int64 `json:"error_replies"`
	ReplyFailures int64 `json:"reply_failures"`
	// FinalSyncs counts the syncs once the engine closed.
	FinalSyncs int64 `json:"final_syncs"`
	// Batched-ack counters (batched.Stats): the acks published, the sequences reported
	// missing, resends found in the store and copies dropped at ingress. None of them makes a run
	// invalid (a resend is answered, not stored twice: verification checks that).
	BatchedAcks    int64 `json:"batched_acks,omitempty"`
	BatchedMissing int64 `json:"batched_missing,omitempty"`
	BatchedFound   int64 `json:"batched_found,omitempty"`
	BatchedDropped int64 `json:"batched_dropped,omitempty"`
}

// engineReport is st less base: what the engine did over the measurement (the preload, which
// comes before it, is in base).
func engineReport(st, base engine.Stats) EngineReport {
	r := EngineReport{
		Records: st.Records - base.Records, Bytes: st.Bytes - base.Bytes, Batches: st.Batches - base.Batches,
		Syncs: st.Syncs - base.Syncs, Duplicates: st.Duplicates, AppendErrors: st.AppendErrors,
	}
	if r.Records > 0 {
		r.SyncsPerMsg = float64(r.Syncs) / float64(r.Records)
	}
	if in := st.Ingress; in != nil {
		r.Received, r.Dropped, r.AcksSent = in.Received, in.Dropped, in.AcksSent
		r.ErrorReplies, r.ReplyFailures = in.ErrorReplies, in.ReplyFailures
		ba := in.Batched
		r.BatchedAcks, r.BatchedMissing, r.BatchedFound, r.BatchedDropped = ba.AckMessages, ba.Missing, ba.LookupHits, ba.Dropped
	}
	return r
}

// engineTarget is engine.Serve on a fresh store in the run's directory, with real files and real
// syncs: the configuration `engine run` uses, but for the CommitLog segment size, the subjects
// and the pending limits, which the run sets.
type engineTarget struct {
	cfg  TargetConfig
	log  zerolog.Logger
	mode engine.FlushMode

	srv       *engine.Server
	prog      *progress
	cancel    context.CancelFunc
	watchDone chan struct{}
	preloaded Tally
	base      engine.Stats  // after the preload
	mapping   route.Mapping // the engine's subject -> topic rule, for the preload
	atDone    engine.Stats
	final     engine.Stats
}

// Start serves a fresh store in the run directory, preloads its topics (unless Cold) and
// follows what it stores.
func (t *engineTarget) Start(ctx context.Context) (string, error) {
	o := t.cfg.Run.Target
	// The budget `engine run` has by default (GOMEMLIMIT wins there too): the target process
	// is the engine's.
	if _, set := os.LookupEnv("GOMEMLIMIT"); !set {
		debug.SetMemoryLimit(engine.DefaultMemoryLimit)
	}
	opts := engine.Options{
		Dir:               storeDir(t.cfg.Dir),
		Logger:            t.log,
		FlushMode:         t.mode,
		CommitLogFileSize: o.CommitLogSize,
	}
	if o.Small {
		opts.ConsumeQueueUnits, opts.IndexSlots, opts.IndexEntries = 1000, 1024, 4096
	}
	var declared []route.TopicPattern
	for _, s := range o.Topics {
		tp, err := route.ParseTopicPattern(s)
		if err != nil {
			return "", err
		}
		declared = append(declared, tp)
	}
	t.mapping = route.Mapping{Patterns: declared, MaxTopics: -1}
	if o.TopicLimit {
		t.mapping.MaxTopics = 0
	}
	srv, err := engine.Serve(opts, engine.NATSOptions{
		Listen:       "127.0.0.1:-1",
		Subjects:     []string{o.subject()},
		PendingMsgs:  o.PendingMsgs,
		PendingBytes: o.PendingBytes,
		Name:         "bench-engine",
		// A topic per subject, as the loads name them (t10000 is 10,000 topics), unless the
		// run keeps the default limit, which stores most subjects of a wide load in one
		// overflow topic.
		MaxTopics: t.mapping.MaxTopics,
		Topics:    declared,
	})
	if err != nil {
		return "", err
	}
	t.srv = srv
	if !o.Cold {
		if err := t.preload(ctx); err != nil {
			return "", errors.Join(fmt.Errorf("preloading the topics: %w", err), srv.Shutdown())
		}
	}
	t.base = srv.Stats()
	t.prog = newProgress()
	t.prog.drops = func() int64 { return t.srv.Stats().Ingress.Dropped }
	wctx, cancel := context.WithCancel(context.Background())
	t.cancel, t.watchDone = cancel, make(chan struct{})
	go t.watch(wctx)
	return srv.ClientURL(), nil
}

// preloadBodySize is the body size of the preloaded messages: they only make the queues exist.
const preloadBodySize = 64

// preload stores one message in every queue of every topic the publishers will use, straight
// through Engine.Put (not NATS), and waits until they are dispatched: the ConsumeQueues then
// exist, as in a store whose topics are in use, and the measurement does not include creating
// them. The bodies carry sequence numbers no publisher uses (publisher index preloadPub).
func (t *engineTarget) preload(ctx context.Context) error {
	e := t.srv.Engine
	body := newBody(preloadBodySize, preloadPub)
	batch := make([]engine.Message, 0, 1024)
	var n int64
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		res, err := e.Put(ctx, batch...)
		for _, r := range res {
			err = errors.Join(err, r.Err)
		}
		batch = batch[:0]
		return err
	}
	made := map[string]bool{}
	for _, subj := range subjects(t.cfg.Run.Load.Topics) {
		topic, _, err := t.mapping.Map(subj)
		if err != nil {
			return err
		}
		if made[topic] {
			continue // a declared topic: its queues are made once
		}
		made[topic] = true
		for q := range int32(ingress.DefaultQueuesPerTopic) {
			setSeq(body, seqOf(preloadPub, n))
			n++
			t.preloaded.Add(body)
			batch = append(batch, engine.Message{Topic: topic, QueueID: q, Body: append([]byte(nil), body...)})
			if len(batch) == cap(batch) {
				if err := flush(); err != nil {
					return err
				}
			}
		}
	}
	if err := flush(); err != nil {
		return err
	}
	return e.WaitDispatched(ctx, e.Offsets().Written)
}

// watch follows the Dispatched watermark, event-driven: every time it moves, the target holds
// the records counted so far, once everything written is dispatched (readable through the
// ConsumeQueues). The order of the loads (dispatched, written, records) makes the last wake-up
// see every record: the appender counts a record before it advances Written past it.
func (t *engineTarget) watch(ctx context.Context) {
	defer close(t.watchDone)
	e := t.srv.Engine
	for {
		off := e.Offsets()
		if recs := e.Stats().Records - t.base.Records; off.Dispatched >= off.Written {
			t.prog.set(recs, time.Now())
		} else {
			t.prog.busy.Store(off.Dispatched) // a backlog being dispatched is progress
		}
		if err := e.WaitDispatched(ctx, off.Dispatched+1); err != nil {
			return // cancelled, or the pipeline stopped
		}
	}
}

// Await waits for n records stored and dispatched, then takes the engine's counters.
func (t *engineTarget) Await(ctx context.Context, n int64, stall time.Duration) (time.Time, error) {
	done, err := t.prog.await(ctx, n, stall)
	t.atDone = t.srv.Stats()
	if got := t.atDone.Records - t.base.Records; err == nil && got > n {
		err = fmt.Errorf("stored %d records, %d were sent", got, n)
	}
	return done, err
}

// Stop shuts the engine down as `engine run` does on SIGTERM: the subscriptions drain, every
// stage drains in order, the last sync and checkpoint are written and the store is closed.
func (t *engineTarget) Stop() error {
	if t.srv == nil {
		return nil
	}
	err := errors.Join(t.srv.Engine.Err(), t.srv.Shutdown())
	t.cancel()
	<-t.watchDone
	t.final = t.srv.Stats()
	return err
}

// Report is the engine's counters when it held every message, with the syncs at the end.
func (t *engineTarget) Report() TargetReport {
	r := engineReport(t.atDone, t.base)
	r.FinalSyncs = t.final.Syncs - t.base.Syncs
	if in := t.final.Ingress; in != nil {
		r.Dropped = max(r.Dropped, in.Dropped) // all of them, should any come after Await
	}
	return TargetReport{Engine: &r, Preloaded: t.preloaded, Syncs: r.Syncs, Synced: r.Records, Dropped: r.Dropped}
}
