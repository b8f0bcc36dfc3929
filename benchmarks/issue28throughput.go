package benchmarks

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/rocketstore/engine/engine/api"
)

// Issue 28's throughput: one topic of N messages (128 B bodies, 4 queues) in the engine's store
// and the same N bodies in a JetStream file stream, each read whole, process by process:
//
//   - group-4: four members (engine/api's Member, each a process), joining at the start,
//     reading to the end of the topic (the batched read, committing every second);
//   - jetstream-1: a JetStream pull consumer (AckNone, Messages with PullMaxMessages 1,000:
//     pulls pipelined), one process; jetstream-4: four processes sharing one such consumer
//     (JetStream's way of a group of workers);
//   - pull and read: one process each, a client written from the docs alone, one goroutine and
//     one request in flight per queue: pull (one NATS message per record, 4,096 per pull), and
//     the batched read (1,024 records per reply, the member's default);
//   - ceiling-pull, ceiling-read: the same two clients against the storage-free responder;
//   - consume-4: four `engine consume --until-end --format raw` processes (the CLI, its bodies to
//     /dev/null), from their start to the last one's exit; checked by the group's committed
//     offsets (group.describe) at the queues' ends.
//
// Every reader runs warm (the store's files in the page cache) and cold (the page cache dropped
// after its server started), each against a server process started for it alone, so that no run
// finds what another read in memory (JetStream keeps a cache of its own). The order of the
// readers is the same in every round; the rounds interleave them, so that each ratio comes from
// runs a minute apart.

// The throughput readers.
const (
	tpGroup       = "group-4"
	tpJetStream   = "jetstream-1"
	tpJetStream4  = "jetstream-4"
	tpPull        = "pull"
	tpRead        = "read"
	tpCeilingPull = "ceiling-pull"
	tpCeilingRead = "ceiling-read"
	tpConsume     = "consume-4"
)

// tpReaders in the order they run.
var tpReaders = []string{tpGroup, tpJetStream, tpPull, tpRead, tpJetStream4, tpCeilingPull, tpCeilingRead, tpConsume}

// ThroughputRun is one reader reading the whole topic once.
type ThroughputRun struct {
	Round      int           `json:"round"`
	Cache      string        `json:"cache"` // warm or cold
	Reader     string        `json:"reader"`
	Procs      int           `json:"procs"`
	Messages   int64         `json:"messages"`
	Elapsed    time.Duration `json:"elapsed"`
	MsgsPerSec float64       `json:"msgs_per_sec"`
	// ServerCPU: the engine's (or JetStream's, or the responder's) CPU over the run;
	// ReadersCPU: the reader processes' together.
	ServerCPU  time.Duration `json:"server_cpu"`
	ReadersCPU time.Duration `json:"readers_cpu"`
	Valid      bool          `json:"valid"`
	Problem    string        `json:"problem,omitempty"`
	Load       string        `json:"load"`
}

// ThroughputReport is the throughput part.
type ThroughputReport struct {
	Messages int64           `json:"messages"`
	Body     int             `json:"body"`
	Fill     []string        `json:"fill"`
	Runs     []ThroughputRun `json:"runs"`
}

const (
	tpTopic   = "bench_t0"
	tpSubject = SubjectPrefix + ".t0"
	tpBody    = 128
)

type tpRunner struct {
	o          *Issue28Options
	store, jsd string
	sent       Tally
	respURL    string
	respPid    int
}

func runThroughput(ctx context.Context, o *Issue28Options, dir string) (*ThroughputReport, error) {
	n := o.scaled(1_000_000)
	rep := &ThroughputReport{Messages: n, Body: tpBody}
	t := &tpRunner{o: o, store: filepath.Join(dir, "engine"), jsd: filepath.Join(dir, "jetstream")}

	// Fill both stores, and start the responder with the engine's records.
	e, err := startEngine(ctx, o.Exe, t.store, "--flush", "async")
	if err != nil {
		return rep, err
	}
	o.status("throughput: filling the engine with %d messages", n)
	fe, err := fill(ctx, o, g28FillConfig{URL: e.url, Subject: tpSubject, N: n, Body: tpBody})
	if err != nil {
		_ = e.stop()
		return rep, fmt.Errorf("filling the engine: %w", err)
	}
	offs, err := waitStored(ctx, e.url, tpTopic, n)
	if err != nil {
		_ = e.stop()
		return rep, err
	}
	t.sent = fe.Sent
	rep.Fill = append(rep.Fill, fmt.Sprintf("engine: %d messages in %s, queues %v", n, fe.Elapsed.Round(time.Millisecond), offs))
	resp, err := startG28(ctx, o.Exe, roleG28Responder, "responder",
		g28ResponderConfig{EngineURL: e.url, Topic: tpTopic, Ends: ends(offs)}, o.Stderr)
	if err != nil {
		return rep, errors.Join(err, e.stop())
	}
	defer func() { _ = resp.command("stop"); _ = resp.wait() }()
	l, err := resp.ready(ctx)
	if err = errors.Join(err, e.stop()); err != nil {
		return rep, fmt.Errorf("the responder: %w", err)
	}
	t.respURL, t.respPid = l.URL, resp.pid()

	js, url, err := t.startJetStream(ctx)
	if err != nil {
		return rep, err
	}
	o.status("throughput: filling JetStream with %d messages", n)
	fj, err := fill(ctx, o, g28FillConfig{URL: url, JetStream: true, Subject: tpSubject, N: n, Body: tpBody})
	_ = js.command("stop")
	_ = js.wait()
	if err != nil {
		return rep, fmt.Errorf("filling JetStream: %w", err)
	}
	if d := fe.Sent.Diff(fj.Sent); d != "" {
		return rep, fmt.Errorf("the two fills differ: %s", d)
	}
	rep.Fill = append(rep.Fill, fmt.Sprintf("jetstream: %d messages in %s", n, fj.Elapsed.Round(time.Millisecond)))

	for round := 1; round <= o.Rounds; round++ {
		for _, cache := range []string{"warm", "cold"} {
			for _, reader := range tpReaders {
				if cache == "cold" && (reader == tpCeilingPull || reader == tpCeilingRead) {
					continue // no storage: nothing to drop
				}
				if o.Only != nil && !o.Only.MatchString(reader+"/"+cache) {
					continue
				}
				o.status("throughput: round %d, %s, %s (load %s)", round, cache, reader, loadAvg())
				r := t.run(ctx, round, cache, reader)
				o.status("throughput: round %d, %s, %s: %.0f msgs/s in %s, valid %v %s", round, cache, reader, r.MsgsPerSec,
					r.Elapsed.Round(time.Millisecond), r.Valid, r.Problem)
				rep.Runs = append(rep.Runs, r)
				if ctx.Err() != nil {
					return rep, ctx.Err()
				}
			}
		}
	}
	return rep, nil
}

func (t *tpRunner) startJetStream(ctx context.Context) (*g28Proc, string, error) {
	js, err := startG28(ctx, t.o.Exe, roleG28JetStream, "jetstream", g28JetStreamConfig{Dir: t.jsd}, t.o.Stderr)
	if err != nil {
		return nil, "", err
	}
	l, err := js.ready(ctx)
	if err != nil {
		js.kill()
		return nil, "", err
	}
	return js, l.URL, nil
}

// run makes one throughput run: the reader's server, started for it, then its processes.
func (t *tpRunner) run(ctx context.Context, round int, cache, reader string) (r ThroughputRun) {
	r = ThroughputRun{Round: round, Cache: cache, Reader: reader, Valid: true, Load: loadAvg()}
	fail := func(err error) ThroughputRun {
		r.Valid, r.Problem = false, err.Error()
		return r
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()

	var url string
	var serverPid int
	var eng *g28Engine // when the server is an engine
	switch reader {
	case tpGroup, tpPull, tpRead, tpConsume:
		e, err := startEngine(ctx, t.o.Exe, t.store, "--flush", "async")
		if err != nil {
			return fail(err)
		}
		defer func() {
			if err := e.stop(); err != nil && r.Valid {
				r.Valid, r.Problem = false, err.Error()
			}
		}()
		url, serverPid, eng = e.url, e.pid(), e
	case tpJetStream, tpJetStream4:
		js, u, err := t.startJetStream(ctx)
		if err != nil {
			return fail(err)
		}
		defer func() { _ = js.command("stop"); _ = js.wait() }()
		url, serverPid = u, js.pid()
	default:
		url, serverPid = t.respURL, t.respPid
	}
	if cache == "cold" {
		if err := dropCaches(); err != nil {
			return fail(fmt.Errorf("dropping the page cache: %w", err))
		}
	}

	if reader == tpConsume {
		return t.consume(ctx, r, url, serverPid, fmt.Sprintf("cli-r%d-%s", round, cache))
	}
	role, procs := roleG28Reader, 1
	cfgOf := func(i int) any { return nil }
	tag := fmt.Sprintf("r%d-%s", round, cache)
	switch reader {
	case tpGroup:
		role, procs = roleG28Member, 4
		cfgOf = func(i int) any {
			c := g28MemberConfig{URL: url, Group: "tp-" + tag, Topic: tpTopic, Mode: memberThroughput,
				Name: fmt.Sprintf("member-%d", i), CommitEvery: time.Second}
			if t.o.Profile && t.o.Out != "" {
				c.CPUProfile = filepath.Join(t.o.Out, "profiles", fmt.Sprintf("%s-member-%d.cpu.pprof", tag, i))
			}
			return c
		}
	case tpJetStream:
		cfgOf = func(int) any {
			return g28ReaderConfig{URL: url, Kind: readerJetStream, N: t.sent.Count, Consumer: "c-" + tag, Max: 1000}
		}
	case tpJetStream4:
		procs = 4
		cfgOf = func(int) any {
			return g28ReaderConfig{URL: url, Kind: readerJetStream, N: t.sent.Count, Consumer: "w-" + tag, Max: 1000, Shared: true}
		}
	case tpPull, tpCeilingPull:
		cfgOf = func(int) any {
			return g28ReaderConfig{URL: url, Kind: readerPull, Topic: tpTopic, Max: 4096, NoTally: reader == tpCeilingPull}
		}
	case tpRead, tpCeilingRead:
		cfgOf = func(int) any {
			return g28ReaderConfig{URL: url, Kind: readerRead, Topic: tpTopic, Max: 1024, NoTally: reader == tpCeilingRead}
		}
	}
	r.Procs = procs
	ps := make([]*g28Proc, 0, procs)
	defer func() {
		for _, p := range ps {
			_ = p.command("stop")
			_ = p.wait()
		}
	}()
	for i := range procs {
		p, err := startG28(ctx, t.o.Exe, role, fmt.Sprintf("%s-%d", reader, i), cfgOf(i), t.o.Stderr)
		if err != nil {
			return fail(err)
		}
		ps = append(ps, p)
	}
	for _, p := range ps {
		if _, err := p.ready(ctx); err != nil {
			return fail(err)
		}
	}
	before, err := readProcStat(serverPid)
	if err != nil {
		return fail(err)
	}
	var profiled chan error
	if t.o.Profile && t.o.Out != "" && eng != nil {
		// The engine's CPU profile over the run's first 2 s (its --pprof).
		profiled = make(chan error, 1)
		path := filepath.Join(t.o.Out, "profiles", fmt.Sprintf("r%d-%s-%s.engine.cpu.pprof", round, cache, reader))
		go func() { profiled <- eng.profile(path, 2*time.Second) }()
		time.Sleep(50 * time.Millisecond) // the profile's request on its way before the clock starts
	}
	for _, p := range ps {
		if err := p.command("go"); err != nil {
			return fail(err)
		}
	}
	if profiled != nil {
		defer func() { <-profiled }()
	}
	var got Tally
	var start, end int64
	for i, p := range ps {
		var res g28ReadResult // a member's result has the same fields
		if err := p.result(ctx, &res); err != nil {
			return fail(err)
		}
		got.Merge(res.Got)
		r.ReadersCPU += res.Usage.CPU()
		if i == 0 || res.Start < start {
			start = res.Start
		}
		end = max(end, res.End)
	}
	after, err := readProcStat(serverPid)
	if err != nil {
		return fail(err)
	}
	r.ServerCPU = after.CPU - before.CPU
	r.Messages = got.Count
	r.Elapsed = time.Duration(end - start)
	if r.Elapsed <= 0 {
		return fail(fmt.Errorf("no time measured (start %d, end %d)", start, end))
	}
	r.MsgsPerSec = float64(got.Count) / r.Elapsed.Seconds()
	switch {
	case reader == tpCeilingPull || reader == tpCeilingRead:
		if got.Count != t.sent.Count {
			return fail(fmt.Errorf("read %d messages of %d", got.Count, t.sent.Count))
		}
	default:
		if d := t.sent.Diff(got); d != "" {
			return fail(fmt.Errorf("read: %s", d))
		}
	}
	return r
}

// ends lists the queues' end offsets by queue id, from 0.
func ends(offs map[int32]int64) []int64 {
	out := make([]int64, len(offs))
	for q, end := range offs {
		if q >= 0 && int(q) < len(out) {
			out[q] = end
		}
	}
	return out
}

// consume runs four `engine consume` processes in a group until each is at the end of the
// queues it holds, and checks the group's committed offsets against the queues' ends.
func (t *tpRunner) consume(ctx context.Context, r ThroughputRun, url string, serverPid int, group string) ThroughputRun {
	fail := func(err error) ThroughputRun {
		r.Valid, r.Problem = false, err.Error()
		return r
	}
	devNull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		return fail(err)
	}
	defer devNull.Close()
	before, err := readProcStat(serverPid)
	if err != nil {
		return fail(err)
	}
	r.Procs = 4
	cmds := make([]*exec.Cmd, 4)
	start := time.Now()
	for i := range cmds {
		cmds[i] = exec.CommandContext(ctx, t.o.Exe, "consume", "--nats", url, "--group", group, "--topic", tpTopic,
			"--until-end", "--format", "raw", "--client-id", fmt.Sprintf("cli-%d", i))
		cmds[i].Stdout, cmds[i].Stderr = devNull, t.o.Stderr
		setParentDeathSignal(cmds[i])
		if err := cmds[i].Start(); err != nil {
			return fail(err)
		}
	}
	var errs []error
	for _, c := range cmds {
		if err := c.Wait(); err != nil {
			errs = append(errs, err)
		}
		if u, ok := c.ProcessState.SysUsage().(*syscall.Rusage); ok {
			r.ReadersCPU += fromRusage(u).CPU()
		}
	}
	r.Elapsed = time.Since(start)
	if err := errors.Join(errs...); err != nil {
		return fail(err)
	}
	after, err := readProcStat(serverPid)
	if err != nil {
		return fail(err)
	}
	r.ServerCPU = after.CPU - before.CPU
	committed, err := groupCommitted(url, group, tpTopic)
	if err != nil {
		return fail(err)
	}
	for _, q := range committed {
		if q.Committed != q.MaxOffset {
			return fail(fmt.Errorf("queue %d committed at %d, its end is %d", q.QueueID, q.Committed, q.MaxOffset))
		}
		r.Messages += q.MaxOffset - q.MinOffset
	}
	if r.Messages != t.sent.Count {
		return fail(fmt.Errorf("the group committed %d messages of %d", r.Messages, t.sent.Count))
	}
	r.MsgsPerSec = float64(r.Messages) / r.Elapsed.Seconds()
	return r
}

// groupCommitted asks the engine for a group's queues (group.describe).
func groupCommitted(url, group, topic string) ([]api.GroupQueue, error) {
	nc, err := nats.Connect(url)
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	st, err := api.NewClient(nc).GroupDescribe(context.Background(), group, topic)
	if err != nil {
		return nil, err
	}
	return st.Queues, nil
}
