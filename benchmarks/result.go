package benchmarks

import (
	"fmt"
	"time"
)

// Result is the record of one run: one row of the CSV and of the Markdown table. Every figure
// of a run comes from that run; ratios come from runs of the same invocation.
type Result struct {
	// Run is the run as it ran (Load.Rate resolved when the run took its rate from another).
	Run Run `json:"run"`
	// Valid is false when anything was lost, duplicated, altered or not acknowledged, or a
	// process failed or ran out of time; Problems says what. No figure of an invalid run counts.
	Valid    bool     `json:"valid"`
	Problems []string `json:"problems,omitempty"`

	// Sent is what the publishers sent; Found is what verification found (the store read back,
	// or what the ceiling received); Acked counts successful replies (request/reply) or futures
	// resolved with an ack (batched).
	Sent  int64 `json:"sent"`
	Found int64 `json:"found"`
	Acked int64 `json:"acked"`
	// Resent and AckMessages are, in batched mode, the publishers' resends and the acks they
	// received (AckMessages / Sent is the acks per message the protocol is about).
	Resent      int64 `json:"resent,omitempty"`
	AckMessages int64 `json:"ack_messages,omitempty"`
	// Elapsed runs from the publishers' start to the moment the target held every message
	// (fire-and-forget) or the last reply came (request/reply; batched: the last ack).
	Elapsed time.Duration `json:"elapsed"`
	// MsgsPerSec and MBPerSec (body bytes, 10^6) are Sent over Elapsed (in fire-and-forget, Sent
	// less Dropped: what the target held). PublishPerSec is how fast the publishers pushed (to
	// their last flush): above MsgsPerSec, the target fell behind.
	MsgsPerSec    float64 `json:"msgs_per_sec"`
	MBPerSec      float64 `json:"mb_per_sec"`
	PublishPerSec float64 `json:"publish_per_sec"`
	// Ceiling is the run this one's rate is compared with, Ratio = MsgsPerSec / its MsgsPerSec
	// (0 when there is none: a rate-limited run, no valid ceiling of the same load). A batched
	// run's ceiling is fire-and-forget's (see referenceLoad).
	Ceiling string  `json:"ceiling,omitempty"`
	Ratio   float64 `json:"ratio,omitempty"`
	// JetStream and JetStreamSync are the jetstream-default and jetstream-syncalways runs of the
	// same load, with the ratios of this run's rate to theirs (0: none, as for Ratio). A batched
	// run's are the request/reply runs of its window (see referenceLoad).
	JetStream     string  `json:"jetstream,omitempty"`
	RatioJS       float64 `json:"ratio_js,omitempty"`
	JetStreamSync string  `json:"jetstream_sync,omitempty"`
	RatioJSSync   float64 `json:"ratio_js_sync,omitempty"`

	// Latency of the replies, publish to reply (request/reply), or of the futures, first send to
	// ack (batched).
	Latency Latency `json:"latency"`
	// WindowWaits counts publishes that waited for a free slot in the window.
	WindowWaits int64 `json:"window_waits"`
	// Engine is what an engine target reported (syncs per message, drops, ...).
	Engine *EngineReport `json:"engine,omitempty"`
	// Dropped counts what the target's NATS client dropped past its pending limits (a target
	// that counts them: the engine, ceiling-subscriber). Only a run that tolerates drops
	// (Run.TolerateDrops) is valid with any.
	Dropped int64 `json:"dropped,omitempty"`
	// Lag runs, in fire-and-forget, from the last publish to the moment the target held the last
	// message (on the machine's monotonic clock): how long the target took to catch up once the
	// load stopped. Negative when the last messages sent were dropped and the last one held came
	// before the last publish.
	Lag time.Duration `json:"lag,omitempty"`
	// Syncs and Synced are the syncs a target counted and the messages they covered (both 0
	// for targets that do not count them). Preloaded counts what the target stored before the
	// measurement (see TargetOptions.Cold).
	Syncs     int64 `json:"syncs,omitempty"`
	Synced    int64 `json:"synced,omitempty"`
	Preloaded int64 `json:"preloaded,omitempty"`
	// Profile is the target child's CPU profile, when one was asked for.
	Profile string `json:"profile,omitempty"`

	// TargetCPU and PublisherCPU are CPU seconds (user + system) of each process over the
	// measurement; the peak RSS values are each process's high-water mark over its life.
	TargetCPU    time.Duration `json:"target_cpu"`
	PublisherCPU time.Duration `json:"publisher_cpu"`
	TargetRSS    int64         `json:"target_rss"`
	PublisherRSS int64         `json:"publisher_rss"`
	// PeakHeap is the target process's peak heap in use (runtime.MemStats.HeapInuse), sampled
	// every 100 ms over its life.
	PeakHeap int64 `json:"peak_heap,omitempty"`
	// PeakAnon is the target's peak anonymous resident memory (RssAnon: its resident set without
	// the store's mapped file pages), sampled with PeakHeap.
	PeakAnon int64 `json:"peak_anon,omitempty"`

	// Started is when the run began; Took its whole wall time, start-up and verification included.
	Started time.Time     `json:"started"`
	Took    time.Duration `json:"took"`
}

// invalid marks r invalid for a reason.
func (r *Result) invalid(format string, args ...any) {
	r.Valid = false
	r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
}

// DroppedPct is Dropped as a percentage of Sent.
func (r *Result) DroppedPct() float64 {
	if r.Sent == 0 {
		return 0
	}
	return 100 * float64(r.Dropped) / float64(r.Sent)
}

// TargetCPUPerMsg is the target's CPU time per message sent.
func (r *Result) TargetCPUPerMsg() time.Duration {
	if r.Sent == 0 {
		return 0
	}
	return r.TargetCPU / time.Duration(r.Sent)
}

// SyncsPerMsg is the target's syncs per stored message at the moment it held every message
// (the engine's, kafka-style-sync's, the disk ceiling's; -1 for targets that do not count them).
func (r *Result) SyncsPerMsg() float64 {
	if r.Engine != nil {
		return r.Engine.SyncsPerMsg
	}
	if r.Synced == 0 {
		return -1
	}
	return float64(r.Syncs) / float64(r.Synced)
}

// isCeiling says whether r's scenario is the reference of r's ack mode.
func (r *Result) isCeiling() bool {
	sc, ok := scenarios[r.Run.Scenario]
	return ok && sc.CeilingFor != "" && sc.CeilingFor == r.Run.Load.Ack
}

// isReference says whether r's scenario is a reference of kind ref (RefJetStream, ...).
func (r *Result) isReference(ref string) bool {
	sc, ok := scenarios[r.Run.Scenario]
	return ok && sc.Reference == ref
}

// referenceLoad is the load of l's references: for the ceiling (ceiling true) or for JetStream.
// It is l itself, but for batched acks, which neither a ceiling nor JetStream answers. A batched
// run is compared with what issue 8 measures batched acks against, of the same publishers,
// bodies and topics: the fire-and-forget ceiling (NATS carrying messages nobody answers, which
// is what removing the per-message replies aims at), and JetStream under request/reply with the
// same window (its async-acked publishing: jetstream-default is "vs JS", jetstream-syncalways
// "vs JS sync").
func referenceLoad(l Load, ceiling bool) Load {
	if l.Ack != Batched {
		return l
	}
	l.Unpacked = false
	if ceiling {
		l.Ack, l.Window = FireAndForget, 0
	} else {
		l.Ack = RequestReply
	}
	return l
}

// computeRatios sets the ratios of every valid run that is not rate-limited: to its ceiling
// (Ceiling, Ratio) and to JetStream (JetStream, RatioJS; JetStreamSync, RatioJSSync). Each
// reference is the last valid run before it in the invocation (or, failing that, the first
// after it) whose scenario is that reference and whose load has the Key of the run's
// referenceLoad: the same load, but for batched runs.
func computeRatios(rs []Result) {
	for i := range rs {
		r := &rs[i]
		r.Ceiling, r.Ratio = "", 0
		r.JetStream, r.RatioJS, r.JetStreamSync, r.RatioJSSync = "", 0, "", 0
		if !r.Valid || r.Run.Load.Rate > 0 || r.MsgsPerSec <= 0 {
			continue
		}
		if c := findReference(rs, i, true, (*Result).isCeiling); c >= 0 {
			r.Ceiling = rs[c].Run.ID
			r.Ratio = r.MsgsPerSec / rs[c].MsgsPerSec
		}
		if c := findReference(rs, i, false, func(c *Result) bool { return c.isReference(RefJetStream) }); c >= 0 {
			r.JetStream = rs[c].Run.ID
			r.RatioJS = r.MsgsPerSec / rs[c].MsgsPerSec
		}
		if c := findReference(rs, i, false, func(c *Result) bool { return c.isReference(RefJetStreamSync) }); c >= 0 {
			r.JetStreamSync = rs[c].Run.ID
			r.RatioJSSync = r.MsgsPerSec / rs[c].MsgsPerSec
		}
	}
}

// findReference finds the reference of run i among the runs that is() says are references, of
// the load referenceLoad(ceiling) gives (its Key includes the ack mode).
func findReference(rs []Result, i int, ceiling bool, is func(*Result) bool) int {
	key := referenceLoad(rs[i].Run.Load, ceiling).Key()
	match := func(j int) bool {
		c := &rs[j]
		return c.Valid && is(c) && c.Run.Load.Key() == key && c.MsgsPerSec > 0
	}
	for j := i; j >= 0; j-- {
		if match(j) {
			return j
		}
	}
	for j := i + 1; j < len(rs); j++ {
		if match(j) {
			return j
		}
	}
	return -1
}

// Invalid counts the invalid runs.
func Invalid(rs []Result) int {
	n := 0
	for i := range rs {
		if !rs[i].Valid {
			n++
		}
	}
	return n
}
