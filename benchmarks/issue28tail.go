package benchmarks

import (
	"context"
	"fmt"
	"path/filepath"
	"time"
)

// Issue 28's tailing: a publisher at 2,000 msgs/s (plain NATS publishes, each body carrying its
// publish time on the machine's monotonic clock) into the engine; a group member (one, holding
// the topic's 4 queues, its batched read long-polling at their end) and a plain NATS subscriber
// on the same subject, each a process, record every message's publish-to-handout latency. The
// member's p99 is set against the subscriber's of the same messages at the same time, with the
// engine's flush async (the goal), then sync (beside it).

// TailReport is the tail part.
type TailReport struct {
	Rate     float64       `json:"rate"`
	Duration time.Duration `json:"duration"`
	Runs     []TailRun     `json:"runs"`
}

// TailRun is one flush mode's latencies.
type TailRun struct {
	Flush      string  `json:"flush"`
	Published  int64   `json:"published"`
	Member     Latency `json:"member"`
	Subscriber Latency `json:"subscriber"`
	// P99Diff is the member's p99 less the subscriber's.
	P99Diff time.Duration `json:"p99_diff"`
	Problem string        `json:"problem,omitempty"`
	Load    string        `json:"load"`
}

const tailSubject = SubjectPrefix + ".tail"

func runTail(ctx context.Context, o *Issue28Options, dir string) (*TailReport, error) {
	d := time.Duration(float64(30*time.Second) * o.Scale)
	rep := &TailReport{Rate: 2000, Duration: d}
	for _, flush := range []string{"async", "sync"} {
		o.status("tail: flush %s, %s at %.0f msgs/s (load %s)", flush, d, rep.Rate, loadAvg())
		r := tailRun(ctx, o, filepath.Join(dir, flush), flush, rep.Rate, d)
		o.status("tail: flush %s: member p99 %s, subscriber p99 %s %s", flush, r.Member.P99, r.Subscriber.P99, r.Problem)
		rep.Runs = append(rep.Runs, r)
	}
	return rep, nil
}

func tailRun(ctx context.Context, o *Issue28Options, store, flush string, rate float64, d time.Duration) (r TailRun) {
	r = TailRun{Flush: flush, Load: loadAvg()}
	fail := func(err error) TailRun {
		r.Problem = err.Error()
		return r
	}
	e, err := startEngine(ctx, o.Exe, store, "--flush", flush)
	if err != nil {
		return fail(err)
	}
	defer func() { _ = e.stop() }()
	pub, err := startG28(ctx, o.Exe, roleG28Publish, "tail-load", g28PublishConfig{URL: e.url, Subject: tailSubject, Rate: rate, Body: 128}, o.Stderr)
	if err != nil {
		return fail(err)
	}
	defer pub.kill()
	if _, err := pub.ready(ctx); err != nil {
		return fail(err)
	}
	if err := pub.command("go"); err != nil {
		return fail(err)
	}
	if _, err := waitStored(ctx, e.url, "bench_tail", 4); err != nil { // the topic exists: a member may join
		return fail(err)
	}
	// Only what is published from 2 s after both joined counts (the member first reads what
	// was stored before it joined).
	after := monoNanos(time.Now().Add(2 * time.Second))
	sub, err := startG28(ctx, o.Exe, roleG28Sub, "tail-sub", g28SubConfig{URL: e.url, Subject: tailSubject, After: after}, o.Stderr)
	if err != nil {
		return fail(err)
	}
	defer sub.kill()
	mem, err := startG28(ctx, o.Exe, roleG28Member, "tail-member", g28MemberConfig{URL: e.url, Group: "tail", Topic: "bench_tail",
		Mode: memberTail, Name: "tail-member", CommitEvery: time.Second, After: after}, o.Stderr)
	if err != nil {
		return fail(err)
	}
	defer mem.kill()
	for _, p := range []*g28Proc{sub, mem} {
		if _, err := p.ready(ctx); err != nil {
			return fail(err)
		}
	}
	select {
	case <-time.After(time.Duration(after-monoNanos(time.Now())) + d):
	case <-ctx.Done():
		return fail(ctx.Err())
	}
	if err := pub.command("stop"); err != nil {
		return fail(err)
	}
	var pres g28PublishResult
	if err := pub.result(ctx, &pres); err != nil {
		return fail(err)
	}
	r.Published = pres.Sent.Count
	time.Sleep(time.Second) // the last messages on their way to both (a bound, not a wait for an event)
	var sres g28SubResult
	if err := sub.command("stop"); err != nil {
		return fail(err)
	}
	if err := sub.result(ctx, &sres); err != nil {
		return fail(err)
	}
	if err := mem.command("stop"); err != nil {
		return fail(err)
	}
	var mres g28MemberResult
	if err := mem.result(ctx, &mres); err != nil {
		return fail(err)
	}
	if r.Subscriber, err = summarize(sres.Latency); err != nil {
		return fail(err)
	}
	if r.Member, err = summarize(mres.Latency); err != nil {
		return fail(err)
	}
	r.P99Diff = r.Member.P99 - r.Subscriber.P99
	if r.Member.Count != r.Subscriber.Count {
		r.Problem = fmt.Sprintf("the member handled %d messages published in the window, the subscriber received %d",
			r.Member.Count, r.Subscriber.Count)
	}
	return r
}
