package benchmarks

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Issue 28's processes. Every part of the issue28 preset runs the engine as a process of its own
// (`engine run`, the binary this harness is), and every reader, member, publisher and peer as
// another (`engine bench --child=ROLE`), so that each one's CPU is its own and a member can be
// killed with SIGKILL. The parent talks to a child in JSON lines: one configuration line, then
// commands (g28Cmd); the child answers with g28Lines.

// g28Cmd is a command from the parent to a child, after its configuration line.
type g28Cmd struct {
	Cmd string `json:"cmd"` // "go", "leave", "stop"
}

// g28Line is what a child writes on its stdout, one per line.
type g28Line struct {
	// Ready: the child is set up (connected, filled, joined) and waits for "go"; URL is the NATS
	// URL of a child that runs a server.
	Ready bool   `json:"ready,omitempty"`
	URL   string `json:"url,omitempty"`
	// Mono: a member's ready line carries when it began its join (monotonic ns).
	Mono int64 `json:"mono,omitempty"`
	// Member events (g28member.go).
	Assign  *g28Assign `json:"assign,omitempty"`
	First   *g28First  `json:"first,omitempty"`
	Handled []g28Range `json:"h,omitempty"`
	Commit  []g28Range `json:"c,omitempty"` // To: the offset committed, From unused
	Left    *g28Left   `json:"left,omitempty"`
	// Result is the child's final report, its shape the role's.
	Result json.RawMessage `json:"result,omitempty"`
	Error  string          `json:"error,omitempty"`
}

// g28Assign: the queues a member holds, as of Mono (the machine's monotonic clock, ns).
type g28Assign struct {
	Queues []int32 `json:"queues"`
	Mono   int64   `json:"mono"`
}

// g28First: a member handed out the first message of a queue it newly holds.
type g28First struct {
	Queue  int32 `json:"queue"`
	Offset int64 `json:"offset"`
	Mono   int64 `json:"mono"`
}

// g28Range is [From, To) of a queue's offsets.
type g28Range struct {
	Queue    int32 `json:"q"`
	From, To int64
}

// g28Left: a member's clean leave, from the start of Close to its end.
type g28Left struct {
	Start, End int64 // monotonic ns
	Err        string
}

// g28Proc is a running child process of the issue28 preset.
type g28Proc struct {
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	mu    sync.Mutex // guards enc
	enc   *json.Encoder
	lines chan g28Line // closed at the end of its stdout
}

// startG28 starts a child of role with its configuration line; its stderr goes to stderr.
func startG28(ctx context.Context, exe, role, name string, cfg any, stderr io.Writer) (*g28Proc, error) {
	cmd := exec.CommandContext(ctx, exe, "bench", "--child", role)
	cmd.Env = append(os.Environ(), "ENGINE_LOG_LEVEL=warn")
	cmd.Stderr = stderr
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	setParentDeathSignal(cmd)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &g28Proc{name: name, cmd: cmd, stdin: stdin, enc: json.NewEncoder(stdin), lines: make(chan g28Line, 1024)}
	go func() {
		defer close(p.lines)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 64<<20)
		for sc.Scan() {
			var l g28Line
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				l = g28Line{Error: fmt.Sprintf("a stray line: %q", truncate(sc.Text(), 200))}
			}
			p.lines <- l
		}
	}()
	if err := p.send(cfg); err != nil {
		p.kill()
		return nil, err
	}
	return p, nil
}

func (p *g28Proc) pid() int { return p.cmd.Process.Pid }

func (p *g28Proc) send(v any) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.enc.Encode(v); err != nil {
		return fmt.Errorf("writing to %s: %w", p.name, err)
	}
	return nil
}

func (p *g28Proc) command(c string) error { return p.send(g28Cmd{Cmd: c}) }

// next returns the child's next line, or an error if it ended its output, reported an error,
// or ctx ended.
func (p *g28Proc) next(ctx context.Context) (g28Line, error) {
	select {
	case l, ok := <-p.lines:
		switch {
		case !ok:
			return l, fmt.Errorf("%s ended its output", p.name)
		case l.Error != "":
			return l, fmt.Errorf("%s: %s", p.name, l.Error)
		}
		return l, nil
	case <-ctx.Done():
		return g28Line{}, fmt.Errorf("waiting for %s: %w", p.name, context.Cause(ctx))
	}
}

// ready waits for the child's ready line and returns it.
func (p *g28Proc) ready(ctx context.Context) (g28Line, error) {
	for {
		l, err := p.next(ctx)
		if err != nil || l.Ready {
			return l, err
		}
	}
}

// result waits for the child's result and decodes it into v.
func (p *g28Proc) result(ctx context.Context, v any) error {
	for {
		l, err := p.next(ctx)
		if err != nil {
			return err
		}
		if l.Result != nil {
			return json.Unmarshal(l.Result, v)
		}
	}
}

// wait closes stdin and waits for the child to exit.
func (p *g28Proc) wait() error {
	_ = p.stdin.Close()
	for range p.lines {
	}
	return p.cmd.Wait()
}

// kill sends SIGKILL and reaps the child.
func (p *g28Proc) kill() {
	_ = p.cmd.Process.Kill()
	_ = p.wait()
}

// g28Engine is an `engine run` process on a store directory.
type g28Engine struct {
	cmd        *exec.Cmd
	url, http  string
	store      string
	args       []string
	exited     chan struct{}
	exitErr    error
	stderrTail *tailBuffer
}

// freePort returns a loopback port nobody listens on now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// startEngine runs `engine run` on store with extra flags, and waits until /readyz answers 200
// (polling the child from outside, as an operator's probe would).
func startEngine(ctx context.Context, exe, store string, extra ...string) (*g28Engine, error) {
	np, err := freePort()
	if err != nil {
		return nil, err
	}
	hp, err := freePort()
	if err != nil {
		return nil, err
	}
	e := &g28Engine{store: store, url: fmt.Sprintf("nats://127.0.0.1:%d", np), http: fmt.Sprintf("127.0.0.1:%d", hp),
		exited: make(chan struct{}), stderrTail: &tailBuffer{max: 8 << 10}}
	e.args = append([]string{"run", "--store", store, "--listen", fmt.Sprintf("127.0.0.1:%d", np), "--http", e.http, "--pprof",
		"--subjects", SubjectPrefix + ".>", "--commit-log-size", "256MiB"}, extra...)
	e.cmd = exec.Command(exe, e.args...)
	// The engine's log goes next to its store (store.log, appended: one per start).
	level := cmp.Or(os.Getenv("BENCH_ENGINE_LOG_LEVEL"), "warn")
	e.cmd.Env = append(os.Environ(), "ENGINE_LOG_LEVEL="+level)
	logf, err := os.OpenFile(store+".log", os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	e.cmd.Stdout, e.cmd.Stderr = io.Discard, io.MultiWriter(e.stderrTail, logf)
	setParentDeathSignal(e.cmd)
	if err := e.cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("starting engine run: %w", err)
	}
	go func() { e.exitErr = e.cmd.Wait(); logf.Close(); close(e.exited) }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get("http://" + e.http + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return e, nil
			}
		}
		select {
		case <-e.exited:
			return nil, fmt.Errorf("engine run %s exited before it was ready: %v: %s", strings.Join(e.args, " "), e.exitErr, e.stderrTail)
		case <-ctx.Done():
			e.stop()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			e.stop()
			return nil, fmt.Errorf("engine run not ready within 60 s: %s", e.stderrTail)
		}
	}
}

func (e *g28Engine) pid() int { return e.cmd.Process.Pid }

// stop ends the engine with SIGTERM (a clean stop) and waits for it.
func (e *g28Engine) stop() error {
	_ = e.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-e.exited:
	case <-time.After(60 * time.Second):
		_ = e.cmd.Process.Kill()
		<-e.exited
		return errors.New("engine did not stop within 60 s of SIGTERM")
	}
	var ee *exec.ExitError
	if e.exitErr != nil && !errors.As(e.exitErr, &ee) {
		return e.exitErr
	}
	if e.exitErr != nil {
		return fmt.Errorf("engine exited: %v: %s", e.exitErr, e.stderrTail)
	}
	return nil
}

// metric reads one unlabelled sample of the engine's /metrics (0 if absent).
func (e *g28Engine) metric(name string) (float64, error) {
	resp, err := http.Get("http://" + e.http + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(rest), 64)
		}
	}
	return 0, sc.Err()
}

// profile writes a CPU profile of the engine over d into path (the engine's --pprof).
func (e *g28Engine) profile(path string, d time.Duration) error {
	return e.pprof(fmt.Sprintf("profile?seconds=%d", int(d.Seconds())), path)
}

// pprof writes the engine's /debug/pprof/<what> into path.
func (e *g28Engine) pprof(what, path string) error {
	resp, err := http.Get("http://" + e.http + "/debug/pprof/" + what)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, resp.Body)
	return errors.Join(err, f.Close())
}

// tailBuffer keeps the last max bytes written to it (a child's stderr, for error messages).
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = t.b[len(t.b)-t.max:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(bytes.TrimSpace(t.b))
}

// procStat is a process's CPU time (user + system) and resident set now, from /proc (Linux).
type procStat struct {
	CPU time.Duration
	RSS int64
}

// readProcStat reads /proc/PID/stat and /proc/PID/status.
func readProcStat(pid int) (procStat, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, err
	}
	// The command name (field 2) is in parentheses and may hold spaces: fields count from after it.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:])) // f[0] is field 3 (state)
	if len(f) < 13 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64) // field 14
	st, _ := strconv.ParseInt(f[12], 10, 64) // field 15
	const tick = 100                         // USER_HZ on Linux
	s := procStat{CPU: time.Duration(ut+st) * time.Second / tick}
	st2, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err == nil {
		for line := range bytes.Lines(st2) {
			if rest, ok := bytes.CutPrefix(line, []byte("VmRSS:")); ok {
				if fs := bytes.Fields(rest); len(fs) == 2 {
					kb, _ := strconv.ParseInt(string(fs[0]), 10, 64)
					s.RSS = kb << 10
				}
			}
		}
	}
	return s, nil
}

// dropCaches writes 3 to /proc/sys/vm/drop_caches after a sync: the page cache, dentries and
// inodes are dropped (root only). Pages a process has mapped are not dropped.
func dropCaches() error {
	syscall.Sync()
	return os.WriteFile("/proc/sys/vm/drop_caches", []byte("3\n"), 0o644)
}
