package benchmarks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/rocketstore/engine/engine/api"
)

// Issue 28's idle groups: the engine's resident memory and CPU with 10,000 groups of one idle
// member each (a topic nobody publishes to), against the same engine with none, each over the
// same window. Two kinds of members, each in one process of its own:
//
//   - protocol: members written from docs/GROUPS.md with plain nats.go that join and then only
//     heartbeat, every heartbeatMs, spread over the interval: what the groups cost the engine
//     by themselves;
//   - go: engine/api's Member (Join and nothing else: no Next called), which also keeps a batched
//     read long-polling at the end of its queues, as any idle Go member does.

// IdleReport is the idle part.
type IdleReport struct {
	Groups int           `json:"groups"`
	Window time.Duration `json:"window"`
	Runs   []IdleRun     `json:"runs"`
}

// IdleRun is the engine over one window.
type IdleRun struct {
	Kind string `json:"kind"` // none, protocol, go
	// EngineCPU is the engine's CPU over the window as a share of one core; RSS and Heap its
	// resident set and heap in use at the end of the window.
	EngineCPU float64 `json:"engine_cpu"`
	RSS       int64   `json:"rss"`
	Heap      int64   `json:"heap"`
	// HeapAfterGC: the heap in use right after a collection.
	HeapAfterGC int64 `json:"heap_after_gc"`
	// MembersCPU: the members' process, as a share of one core; Joined and JoinTook: its joins.
	MembersCPU float64       `json:"members_cpu"`
	Joined     int           `json:"joined"`
	JoinTook   time.Duration `json:"join_took"`
	// Requests the members sent over the window (heartbeats, reads), and the engine's error
	// replies to them.
	Requests, Errors int64
	Problem          string `json:"problem,omitempty"`
	Load             string `json:"load"`
}

const idleTopic = "bench_idle"

// dir is where a run's engine profiles go: Out/profiles with --profile, else next to its store.
func dir(o *Issue28Options, store string) string {
	if o.Profile && o.Out != "" {
		return filepath.Join(o.Out, "profiles")
	}
	return filepath.Dir(store)
}

func runIdle(ctx context.Context, o *Issue28Options, dir string) (*IdleReport, error) {
	rep := &IdleReport{Groups: int(o.scaled(10_000)), Window: time.Duration(float64(30*time.Second) * o.Scale)}
	rep.Groups = min(rep.Groups, 10_000*int(max(o.Scale, 1)))
	for _, kind := range []string{"none", "protocol", "go"} {
		o.status("idle: %s, %d groups, %s window (load %s)", kind, rep.Groups, rep.Window, loadAvg())
		r := idleRun(ctx, o, filepath.Join(dir, kind), kind, rep.Groups, rep.Window)
		o.status("idle: %s: engine %.1f%% of a core, %d MiB resident, %d joined in %s %s", kind, 100*r.EngineCPU, r.RSS>>20,
			r.Joined, r.JoinTook.Round(time.Millisecond), r.Problem)
		rep.Runs = append(rep.Runs, r)
		if ctx.Err() != nil {
			return rep, ctx.Err()
		}
	}
	return rep, nil
}

func idleRun(ctx context.Context, o *Issue28Options, store, kind string, groups int, window time.Duration) (r IdleRun) {
	r = IdleRun{Kind: kind, Load: loadAvg()}
	fail := func(err error) IdleRun {
		r.Problem = err.Error()
		return r
	}
	e, err := startEngine(ctx, o.Exe, store, "--flush", "async")
	if err != nil {
		return fail(err)
	}
	defer func() { _ = e.stop() }()
	if _, err := fill(ctx, o, g28FillConfig{URL: e.url, Subject: SubjectPrefix + ".idle", N: 4, Body: 128}); err != nil {
		return fail(err)
	}
	if _, err := waitStored(ctx, e.url, idleTopic, 4); err != nil {
		return fail(err)
	}
	var p *g28Proc
	if kind != "none" {
		if p, err = startG28(ctx, o.Exe, roleG28Idle, "idle-"+kind, g28IdleConfig{URL: e.url, Groups: groups, Go: kind == "go"}, o.Stderr); err != nil {
			return fail(err)
		}
		defer p.kill()
		l, err := p.ready(ctx)
		if err != nil {
			return fail(err)
		}
		var joined g28IdleJoined
		if err := json.Unmarshal(l.Result, &joined); err != nil {
			return fail(err)
		}
		r.Joined, r.JoinTook = joined.Joined, joined.Took
		// Settle: the joins' work is done, the members only heartbeat (and long-poll).
		time.Sleep(5 * time.Second)
		if err := p.command("mark"); err != nil {
			return fail(err)
		}
	}
	before, err := readProcStat(e.pid())
	if err != nil {
		return fail(err)
	}
	t0 := time.Now()
	select {
	case <-time.After(window):
	case <-ctx.Done():
		return fail(ctx.Err())
	}
	after, err := readProcStat(e.pid())
	if err != nil {
		return fail(err)
	}
	r.EngineCPU = (after.CPU - before.CPU).Seconds() / time.Since(t0).Seconds()
	r.RSS = after.RSS
	heap, _ := e.metric("go_memstats_heap_inuse_bytes")
	r.Heap = int64(heap)
	// The heap once collected (a heap profile with gc=1 runs a collection first): what the
	// groups hold, without the garbage their requests leave until the next collection.
	heapPath := filepath.Join(dir(o, store), "idle-"+kind+".engine.heap.pprof")
	if err := e.pprof("heap?gc=1", heapPath); err == nil {
		live, _ := e.metric("go_memstats_heap_inuse_bytes")
		r.HeapAfterGC = int64(live)
	}
	if o.Profile && o.Out != "" {
		_ = e.profile(filepath.Join(o.Out, "profiles", "idle-"+kind+".engine.cpu.pprof"), 5*time.Second)
	}
	if p != nil {
		if err := p.command("stop"); err != nil {
			return fail(err)
		}
		var res g28IdleResult
		if err := p.result(ctx, &res); err != nil {
			return fail(err)
		}
		r.MembersCPU = res.Usage.CPU().Seconds() / res.Window.Seconds()
		r.Requests, r.Errors = res.Requests, res.Errors
	}
	return r
}

// g28IdleConfig configures the idle members' process.
type g28IdleConfig struct {
	URL    string `json:"url"`
	Groups int    `json:"groups"`
	// Go: engine/api's Member; otherwise the protocol by hand (join, heartbeats).
	Go bool `json:"go"`
}

// g28IdleJoined is the ready line's result: the members joined.
type g28IdleJoined struct {
	Joined int           `json:"joined"`
	Took   time.Duration `json:"took"`
}

// g28IdleResult: from "mark" to "stop", the process's CPU and its requests.
type g28IdleResult struct {
	Usage            Usage         `json:"usage"`
	Window           time.Duration `json:"window"`
	Requests, Errors int64
}

func g28IdleMain(ctx context.Context, raw json.RawMessage, c *g28Child) error {
	var cfg g28IdleConfig
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return err
	}
	nc, err := nats.Connect(cfg.URL, nats.Name("bench-idle"), nats.MaxPingsOutstanding(10))
	if err != nil {
		return err
	}
	defer nc.Close()
	var requests, errs atomic.Int64
	start := time.Now()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(stop)
	if cfg.Go {
		// Each member with a connection of its own would be 10,000 connections: they share
		// one, as the members of one process may.
		client := api.NewClient(nc, api.WithTimeout(30*time.Second))
		members := make([]*api.Member, 0, cfg.Groups)
		defer func() {
			for _, m := range members {
				m.Abandon()
			}
		}()
		for i := range cfg.Groups {
			m, err := client.Join(ctx, api.MemberConfig{Group: fmt.Sprintf("idle-%d", i), Topic: idleTopic})
			if err != nil {
				return fmt.Errorf("join %d: %w", i, err)
			}
			members = append(members, m)
		}
		requests.Store(-1) // not counted: the member's own
	} else {
		err := idleProtocol(ctx, nc, cfg.Groups, stop, &wg, &requests, &errs)
		if err != nil {
			return err
		}
	}
	joined, _ := json.Marshal(g28IdleJoined{Joined: cfg.Groups, Took: time.Since(start)})
	if err := c.send(g28Line{Ready: true, Result: joined}); err != nil {
		return err
	}
	if err := c.await(ctx, "mark"); err != nil {
		return err
	}
	before, t0 := selfUsage(), time.Now()
	req0, err0 := requests.Load(), errs.Load()
	if err := c.await(ctx, "stop"); err != nil {
		return err
	}
	return c.result(g28IdleResult{Usage: selfUsage().Sub(before), Window: time.Since(t0),
		Requests: requests.Load() - req0, Errors: errs.Load() - err0})
}

// idleProtocol joins n groups with one member each, by hand (docs/GROUPS.md: join, then a
// heartbeat every heartbeatMs), and heartbeats every member joined until stop, once an
// interval each, spread over it.
func idleProtocol(ctx context.Context, nc *nats.Conn, n int, stop chan struct{}, wg *sync.WaitGroup, requests, errs *atomic.Int64) error {
	subjects, bodies := make([]string, n), make([][]byte, n)
	var joined atomic.Int64 // members [0, joined) have their subject and body
	inbox := nats.NewInbox()
	sub, err := nc.Subscribe(inbox, func(m *nats.Msg) {
		if bytes.HasPrefix(m.Data, []byte(`{"error":`)) {
			errs.Add(1)
		}
	})
	if err != nil {
		return err
	}
	_ = sub.SetPendingLimits(-1, -1)
	every := time.Second // the engine's heartbeatMs (its default), from the first join
	first := make(chan struct{})
	wg.Go(func() {
		select {
		case <-first:
		case <-stop:
			return
		}
		const slices = 100
		t := time.NewTicker(every / slices)
		defer t.Stop()
		for k := 0; ; k++ {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			for i := k % slices; i < int(joined.Load()); i += slices {
				if err := nc.PublishRequest(subjects[i], inbox, bodies[i]); err != nil {
					errs.Add(1)
				}
				requests.Add(1)
			}
		}
	})
	for i := range n {
		group := fmt.Sprintf("idle-%d", i)
		req, _ := json.Marshal(map[string]string{"group": group, "topic": idleTopic})
		m, err := nc.RequestWithContext(ctx, "$RS.API.group.join", req)
		if err != nil {
			return fmt.Errorf("join %d: %w", i, err)
		}
		var a struct {
			API         string `json:"api"`
			MemberID    string `json:"memberId"`
			HeartbeatMs int64  `json:"heartbeatMs"`
		}
		if err := json.Unmarshal(m.Data, &a); err != nil || a.MemberID == "" {
			return fmt.Errorf("join %d: %s", i, truncate(string(m.Data), 200))
		}
		subjects[i] = a.API + ".group.heartbeat"
		bodies[i], _ = json.Marshal(map[string]string{"group": group, "topic": idleTopic, "memberId": a.MemberID})
		joined.Store(int64(i + 1))
		if i == 0 {
			if a.HeartbeatMs > 0 {
				every = time.Duration(a.HeartbeatMs) * time.Millisecond
			}
			close(first)
		}
	}
	if n == 0 {
		return errors.New("no member")
	}
	return nil
}
