package benchmarks

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// AckMode is how a publisher learns that a message was taken.
type AckMode string

// The ack modes.
const (
	// FireAndForget publishes with PublishMsg and flushes once at the end; the run ends when the
	// target holds every message.
	FireAndForget AckMode = "ff"
	// RequestReply publishes with a reply subject and waits for one reply per message, with at
	// most Load.Window messages outstanding per publisher; the run ends with the last reply.
	RequestReply AckMode = "rr"
	// Batched publishes through the engine's own publisher (engine/publisher): every publisher
	// is one stream whose messages the engine acknowledges cumulatively, once per round, with
	// Load.Window as the publisher's window; the run ends with the last ack. Only the engine
	// answers it (docs/BATCHED-ACKS.md), so a batched run is compared with the references of
	// other ack modes (see referenceLoad).
	Batched AckMode = "ba"
)

// Load is what the publisher process sends. Runs compared with each other (a target and its
// ceiling) have the same Load.
type Load struct {
	// Publishers is the number of publishers, each with its own connection and goroutine.
	Publishers int `json:"publishers"`
	// BodySize is the size of every body in bytes (at least MinBodySize).
	BodySize int `json:"body_size"`
	// Topics is the number of subjects the messages spread over, round-robin.
	Topics int `json:"topics"`
	// Messages bounds the messages of the run, over all publishers (0: no bound).
	Messages int64 `json:"messages"`
	// Duration bounds the time the publishers publish (0: no bound). At least one of Messages
	// and Duration must be set; the first reached ends publishing.
	Duration time.Duration `json:"duration"`
	// Ack is the ack mode; Window the outstanding messages per publisher in RequestReply mode,
	// the publisher's window (publisher.Options.Window) in Batched mode.
	Ack    AckMode `json:"ack"`
	Window int     `json:"window"`
	// Rate limits the publishers to this many messages per second in all (0: as fast as they
	// can). Each publisher paces itself on a schedule of Rate/Publishers.
	Rate float64 `json:"rate"`
	// Unpacked, in Batched mode, sends one NATS message per message (publisher.Options.MaxPack
	// 1) instead of the package's default packs: the protocol's cost without packing.
	Unpacked bool `json:"unpacked,omitempty"`
}

// windowed says whether the mode bounds the messages in flight by Load.Window: every mode in
// which the publisher waits for acks.
func (m AckMode) windowed() bool { return m == RequestReply || m == Batched }

// modeName names an ack mode in messages.
func modeName(m AckMode) string {
	switch m {
	case FireAndForget:
		return "fire-and-forget"
	case RequestReply:
		return "request/reply"
	case Batched:
		return "batched acks"
	}
	return string(m)
}

// Key identifies loads that may be compared: the same shape, with no rate limit.
func (l Load) Key() string {
	k := fmt.Sprintf("%s/p%d/b%d/t%d", l.Ack, l.Publishers, l.BodySize, l.Topics)
	if l.Ack.windowed() {
		k += fmt.Sprintf("/w%d", l.Window)
	}
	if l.Rate > 0 {
		k += fmt.Sprintf("/r%.0f", l.Rate)
	}
	if l.Unpacked {
		k += "/unpacked"
	}
	return k
}

// Validate reports what is wrong with l.
func (l Load) Validate() error {
	var errs []error
	if l.Publishers < 1 || l.Publishers > 1<<15 {
		errs = append(errs, fmt.Errorf("publishers %d: want 1 to 32768", l.Publishers))
	}
	if l.BodySize < MinBodySize {
		errs = append(errs, fmt.Errorf("body size %d: want at least %d", l.BodySize, MinBodySize))
	}
	if l.Topics < 1 {
		errs = append(errs, fmt.Errorf("topics %d: want at least 1", l.Topics))
	}
	if l.Messages <= 0 && l.Duration <= 0 {
		errs = append(errs, errors.New("neither messages nor a duration bounds the run"))
	}
	if l.Messages > 0 && l.Messages < int64(l.Publishers) {
		errs = append(errs, fmt.Errorf("%d messages for %d publishers", l.Messages, l.Publishers))
	}
	switch l.Ack {
	case FireAndForget:
	case RequestReply, Batched:
		if l.Window < 1 {
			errs = append(errs, fmt.Errorf("window %d: %s needs at least 1", l.Window, modeName(l.Ack)))
		}
	default:
		errs = append(errs, fmt.Errorf("ack mode %q: want %q, %q or %q", l.Ack, FireAndForget, RequestReply, Batched))
	}
	if l.Unpacked && l.Ack != Batched {
		errs = append(errs, fmt.Errorf("unpacked: only with %s", modeName(Batched)))
	}
	if l.Rate < 0 {
		errs = append(errs, fmt.Errorf("rate %g", l.Rate))
	}
	return errors.Join(errs...)
}

// TargetOptions configure the target process beyond the load.
type TargetOptions struct {
	// Subject is what the target subscribes to (SubjectPrefix + ".>" when empty).
	Subject string `json:"subject,omitempty"`
	// PendingMsgs and PendingBytes are the nats.go pending limits of the target's subscription
	// (0: nats.go's defaults, 512 Ki messages and 64 MiB; -1: no limit). A fire-and-forget
	// publisher outruns any subscriber for a while; past the limits nats.go drops, and the run
	// is then invalid.
	PendingMsgs  int `json:"pending_msgs,omitempty"`
	PendingBytes int `json:"pending_bytes,omitempty"`
	// CommitLogSize is the size of the engine's CommitLog segments (engine.Options default,
	// 1 GiB, when 0).
	CommitLogSize int64 `json:"commitlog_size,omitempty"`
	// Small shrinks the engine's ConsumeQueue and IndexFile geometry, for tests.
	Small bool `json:"small,omitempty"`
	// Cold starts a store target with no topic in it. By default a target that keeps files per
	// topic or queue makes them before it is ready, outside the measurement, as a store whose
	// topics exist would have them: the engine stores one message in every queue of every
	// topic (topics x 4 ConsumeQueues; at 10,000 topics the engine takes about 30 s to create
	// them on this kind of machine), kafka-style opens every topic's file. JetStream and the
	// ceilings have nothing per topic to make.
	Cold bool `json:"cold,omitempty"`
	// Topics are the engine's declared topics (engine run --topics): patterns, each optionally
	// =TOPIC. Without them the engine makes a topic per subject, without a limit.
	Topics []string `json:"topics,omitempty"`
	// TopicLimit keeps the engine's default topic limit (engine run --max-topics, 1,024: the
	// subjects of further topics go to one overflow topic), as `engine run` has it out of the box.
	TopicLimit bool `json:"topic_limit,omitempty"`
	// CPUProfile, when set, is where the target child writes a pprof CPU profile of the
	// measurement (from ready to holding every message).
	CPUProfile string `json:"cpu_profile,omitempty"`
}

func (o TargetOptions) subject() string {
	if o.Subject == "" {
		return SubjectPrefix + ".>"
	}
	return o.Subject
}

// Fault injects a loss, so that tests can check that verification catches it.
type Fault struct {
	// PublisherSkip makes publisher 0 skip its n-th message (from 1) while counting it as sent.
	PublisherSkip int64 `json:"publisher_skip,omitempty"`
	// TargetDrop makes the target lose the n-th message it receives (from 1): a ceiling ignores
	// it (no count, no reply), kafka-style does not write it (but replies), JetStream deletes
	// the n-th stored message before it stops, the disk ceiling does not write its n-th batch.
	TargetDrop int64 `json:"target_drop,omitempty"`
	// TargetDropCounted makes ceiling-subscriber lose the n-th message it receives (from 1) and
	// count it as dropped, as nats.go counts what it drops past the pending limits: a loss the
	// target owns up to, which a run that tolerates drops reports rather than fails on.
	TargetDropCounted int64 `json:"target_drop_counted,omitempty"`
}

// Run is one measurement: a scenario's target under a load.
type Run struct {
	// ID names the run within its invocation ("engine-sync/rr4096").
	ID string `json:"id"`
	// Group names the sweep the run belongs to ("base", "topics", ...), for the report's
	// sections; it does not change what runs.
	Group    string        `json:"group,omitempty"`
	Scenario string        `json:"scenario"`
	Load     Load          `json:"load"`
	Target   TargetOptions `json:"target"`
	// RateOf names an earlier run of the same invocation: this run's publishers are limited to
	// RateFraction of the messages per second that run measured (it must have been valid).
	RateOf       string  `json:"rate_of,omitempty"`
	RateFraction float64 `json:"rate_fraction,omitempty"`
	// RateOfMedian, instead of RateOf, names several earlier runs (the rounds of a ceiling): the
	// publishers are limited to RateFraction of the median of their rates (of the valid ones;
	// at least one must be).
	RateOfMedian []string `json:"rate_of_median,omitempty"`
	// Round numbers the run within a series of interleaved rounds of the same run (from 1; 0:
	// not a round). Its ID is the series' with "#<round>" appended; the report adds each
	// series' medians (RoundSeries).
	Round int `json:"round,omitempty"`
	// TolerateDrops makes the messages the target's NATS client dropped (past its pending
	// limits, in a fire-and-forget run of a target that counts its drops: Scenario.CountsDrops)
	// a figure of the run instead of a reason it is invalid. The run is valid if the target
	// holds exactly the messages sent less those it says it dropped, each once, and nothing
	// else; its rate is what it held over the elapsed time.
	TolerateDrops bool `json:"tolerate_drops,omitempty"`
	// Timeout is the deadline of the whole run, start-up and verification included (default:
	// 60 s plus three times the load's duration).
	Timeout time.Duration `json:"timeout,omitempty"`
	// Stall ends a wait (for replies, for the target to hold everything) after this long
	// without progress; what is missing then makes the run invalid (default 10 s).
	Stall time.Duration `json:"stall,omitempty"`
	Fault Fault         `json:"fault"`
}

func (r Run) timeout() time.Duration {
	if r.Timeout > 0 {
		return r.Timeout
	}
	return time.Minute + 3*r.Load.Duration
}

func (r Run) stall() time.Duration {
	if r.Stall > 0 {
		return r.Stall
	}
	return 10 * time.Second
}

// Validate reports what is wrong with r on its own (RateOf is checked by the runner).
func (r Run) Validate() error {
	sc, ok := scenarios[r.Scenario]
	if !ok {
		return fmt.Errorf("run %s: unknown scenario %q (have %v)", r.ID, r.Scenario, ScenarioNames())
	}
	if err := r.Load.Validate(); err != nil {
		return fmt.Errorf("run %s: %w", r.ID, err)
	}
	if !sc.supports(r.Load.Ack) {
		return fmt.Errorf("run %s: scenario %s does not take ack mode %q", r.ID, r.Scenario, r.Load.Ack)
	}
	if src := r.rateSources(); len(src) > 0 && (r.RateFraction <= 0 || r.RateFraction > 1) {
		return fmt.Errorf("run %s: rate fraction %g of %v: want (0, 1]", r.ID, r.RateFraction, src)
	}
	if r.RateOf != "" && len(r.RateOfMedian) > 0 {
		return fmt.Errorf("run %s: its rate comes from %s or from the median of %v, not both", r.ID, r.RateOf, r.RateOfMedian)
	}
	if r.TolerateDrops && (!sc.CountsDrops || r.Load.Ack != FireAndForget) {
		return fmt.Errorf("run %s: drops are tolerated only in %s runs of a target that counts them", r.ID, modeName(FireAndForget))
	}
	if r.Round < 0 || (r.Round > 0 && !strings.HasSuffix(r.ID, fmt.Sprintf("#%d", r.Round))) {
		return fmt.Errorf("run %s: round %d: the id of a round ends in #<round>", r.ID, r.Round)
	}
	return nil
}

// rateSources names the runs r takes its rate from (none: r sets its own).
func (r Run) rateSources() []string {
	if r.RateOf != "" {
		return []string{r.RateOf}
	}
	return r.RateOfMedian
}

// Series is the ID of the series r is a round of (r's ID without "#<round>"), or r's ID.
func (r Run) Series() string {
	if r.Round > 0 {
		return strings.TrimSuffix(r.ID, fmt.Sprintf("#%d", r.Round))
	}
	return r.ID
}
