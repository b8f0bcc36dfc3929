package e2e

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The harness: the engine binary built once, and a child process that runs it and follows its
// JSON log on stderr (client_test.go has the commands and the wire client). Every wait has a
// deadline; only a failing test reaches one.

// waitTimeout bounds every wait for a child: a log line, an exit, a reply.
const waitTimeout = 60 * time.Second

// engineBin is the engine binary TestMain built.
var engineBin string

func TestMain(m *testing.M) {
	flag.Parse()
	// Listing the tests (go test -list, which scripts/fuzz.sh runs on every package) or running
	// none needs no engine.
	if flag.Lookup("test.list").Value.String() != "" || flag.Lookup("test.run").Value.String() == "^$" {
		os.Exit(m.Run())
	}
	os.Exit(buildAndRun(m))
}

// buildAndRun builds the engine as its users build it (go build ./cmd/engine), with -race when
// this test binary has it, runs the tests and removes the binary.
func buildAndRun(m *testing.M) int {
	dir, err := os.MkdirTemp("", "rocketstore-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	engineBin = filepath.Join(dir, "engine")
	args := []string{"build", "-o", engineBin}
	if raceEnabled {
		args = append(args, "-race")
	}
	// go test runs in this package's directory, inside the module, and puts its own go first
	// in PATH: the module path builds the same package from anywhere in the module.
	cmd := exec.Command("go", append(args, "github.com/rocketstore/engine/cmd/engine")...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: building the engine:", err)
		return 1
	}
	return m.Run()
}

// Small files, so that a store costs a few MiB; the read commands are given the same sizes.
var sizeArgs = []string{"--commit-log-size", "4MiB", "--cq-units", "1000", "--index-slots", "1024", "--index-entries", "8192"}

// childEnv is the environment of every child: ours, and under -race no second of delay at exit.
func childEnv(extra []string) []string {
	env := append(os.Environ(), "GORACE=atexit_sleep_ms=0")
	return append(env, extra...)
}

// logLine is one line of a child's stderr: its JSON fields, or nil for a line that is not JSON
// (a panic, a race report, a console log).
type logLine struct {
	raw    string
	fields map[string]any
}

func (l logLine) msg() string {
	s, _ := l.fields["message"].(string)
	return s
}

// proc is the engine binary running as a child process.
type proc struct {
	t    *testing.T
	args []string
	cmd  *exec.Cmd

	mu     sync.Mutex
	lines  []logLine
	notify chan struct{} // a value after each new line (capacity 1)

	exited chan struct{} // closed once the process has exited and its stderr is read
	code   int           // exit code (-1: killed by a signal), set before exited is closed
	signal syscall.Signal
}

// procOpts says how to start a child: the arguments after the binary's name, more
// environment variables, and the working directory (empty: a fresh temporary one).
type procOpts struct {
	args []string
	env  []string
	dir  string
}

// startProc starts the binary; the test's cleanup kills it if it still runs, fails the test on
// a race report, and prints its stderr when the test failed.
func startProc(t *testing.T, o procOpts) *proc {
	t.Helper()
	cmd := exec.Command(engineBin, o.args...)
	cmd.Env = childEnv(o.env)
	cmd.Dir = o.dir
	if cmd.Dir == "" {
		cmd.Dir = t.TempDir()
	}
	p := &proc{t: t, args: o.args, cmd: cmd, notify: make(chan struct{}, 1), exited: make(chan struct{})}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go p.follow(stderr)
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = cmd.Process.Kill()
			<-p.exited
		}
		if strings.Contains(p.log(), "WARNING: DATA RACE") {
			t.Errorf("the engine reported a data race: %v", o.args)
		}
		if t.Failed() {
			t.Logf("engine %v stderr:\n%s", o.args, p.log())
		}
	})
	return p
}

func (p *proc) follow(stderr io.Reader) {
	sc := bufio.NewScanner(stderr)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		l := logLine{raw: sc.Text()}
		if json.Unmarshal([]byte(l.raw), &l.fields) != nil {
			l.fields = nil
		}
		p.mu.Lock()
		p.lines = append(p.lines, l)
		p.mu.Unlock()
		select {
		case p.notify <- struct{}{}:
		default:
		}
	}
	_, _ = io.Copy(io.Discard, stderr)
	_ = p.cmd.Wait()
	st := p.cmd.ProcessState
	p.code = st.ExitCode()
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		p.signal = ws.Signal()
	}
	close(p.exited)
}

// log is everything the child wrote to stderr so far.
func (p *proc) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var b strings.Builder
	for _, l := range p.lines {
		b.WriteString(l.raw)
		b.WriteByte('\n')
	}
	return b.String()
}

// snapshot is a copy of the stderr lines so far.
func (p *proc) snapshot() []logLine {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]logLine(nil), p.lines...)
}

// nlines is the number of stderr lines so far: a mark for waitLogAfter.
func (p *proc) nlines() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.lines)
}

// findLog returns the first JSON line from index from on whose message starts with prefix.
func (p *proc) findLog(from int, prefix string) (map[string]any, int, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := from; i < len(p.lines); i++ {
		if l := p.lines[i]; l.fields != nil && strings.HasPrefix(l.msg(), prefix) {
			return l.fields, i, true
		}
	}
	return nil, len(p.lines), false
}

// waitLog waits for the first JSON log line whose message starts with prefix.
func (p *proc) waitLog(prefix string) map[string]any {
	p.t.Helper()
	l, _ := p.waitLogAfter(0, prefix)
	return l
}

// waitLogAfter waits for the first JSON log line from index from on whose message starts with
// prefix, and returns it with its index; the test fails if the child exits first or the wait
// times out.
func (p *proc) waitLogAfter(from int, prefix string) (map[string]any, int) {
	p.t.Helper()
	deadline := time.NewTimer(waitTimeout)
	defer deadline.Stop()
	for {
		l, i, ok := p.findLog(from, prefix)
		if ok {
			return l, i
		}
		from = i
		select {
		case <-p.notify:
		case <-p.exited:
			if l, i, ok := p.findLog(from, prefix); ok { // what the reader read before the end
				return l, i
			}
			p.t.Fatalf("engine exited (code %d) before logging %q", p.code, prefix)
		case <-deadline.C:
			p.t.Fatalf("engine did not log %q within %v", prefix, waitTimeout)
		}
	}
}

// waitLogAny waits for the first JSON log line whose message starts with one of prefixes, and
// returns it with the prefix it matched.
func (p *proc) waitLogAny(prefixes ...string) (map[string]any, string) {
	p.t.Helper()
	deadline := time.NewTimer(waitTimeout)
	defer deadline.Stop()
	for {
		for _, prefix := range prefixes {
			if l, _, ok := p.findLog(0, prefix); ok {
				return l, prefix
			}
		}
		select {
		case <-p.notify:
		case <-p.exited:
			for _, prefix := range prefixes {
				if l, _, ok := p.findLog(0, prefix); ok {
					return l, prefix
				}
			}
			p.t.Fatalf("engine exited (code %d) before logging any of %q", p.code, prefixes)
		case <-deadline.C:
			p.t.Fatalf("engine did not log any of %q within %v", prefixes, waitTimeout)
		}
	}
}

// waitRaw waits for a stderr line, JSON or not, that contains s.
func (p *proc) waitRaw(s string) string {
	p.t.Helper()
	deadline := time.NewTimer(waitTimeout)
	defer deadline.Stop()
	from := 0
	for {
		p.mu.Lock()
		for ; from < len(p.lines); from++ {
			if strings.Contains(p.lines[from].raw, s) {
				l := p.lines[from].raw
				p.mu.Unlock()
				return l
			}
		}
		p.mu.Unlock()
		select {
		case <-p.notify:
		case <-p.exited:
			if l, ok := p.grep(s); ok {
				return l
			}
			p.t.Fatalf("engine exited (code %d) before writing %q", p.code, s)
		case <-deadline.C:
			p.t.Fatalf("engine did not write %q within %v", s, waitTimeout)
		}
	}
}

// grep returns the first stderr line so far that contains s.
func (p *proc) grep(s string) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range p.lines {
		if strings.Contains(l.raw, s) {
			return l.raw, true
		}
	}
	return "", false
}

// send sends sig to the child.
func (p *proc) send(sig syscall.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatalf("signal %v: %v", sig, err)
	}
}

// wait returns the child's exit code once it has exited (-1 when a signal ended it).
func (p *proc) wait() int {
	p.t.Helper()
	select {
	case <-p.exited:
		return p.code
	case <-time.After(waitTimeout):
		p.t.Fatalf("engine still running %v after it was told to stop", waitTimeout)
		return 0
	}
}

// kill ends the child with SIGKILL, as a crash, and waits for it.
func (p *proc) kill() {
	p.t.Helper()
	p.send(syscall.SIGKILL)
	p.wait()
	if p.signal != syscall.SIGKILL {
		p.t.Fatalf("engine exited with code %d before the SIGKILL reached it", p.code)
	}
}

// stop sends SIGTERM and checks the documented clean stop: exit code 0 after "stopped cleanly".
func (p *proc) stop() {
	p.t.Helper()
	p.send(syscall.SIGTERM)
	if code := p.wait(); code != 0 {
		p.t.Fatalf("exit code %d after SIGTERM, want 0", code)
	}
	p.waitLog("stopped cleanly")
}

// engine is `engine run` on a store with its embedded server on a free loopback port.
type engine struct {
	*proc
	dir       string
	opts      procOpts       // how it was started, for restart
	url       string         // the embedded server, from the "engine running" line
	http      string         // the monitoring address, when --http was given
	recovered map[string]any // the "store recovered" line
}

// runArgs are the arguments of `engine run` on dir: JSON logs, small files, and the embedded
// server on a free port unless extra names an external one.
func runArgs(dir string, extra ...string) []string {
	args := []string{"run", "--store", dir, "--log-format", "json"}
	if !contains(extra, "--server") && !contains(extra, "-s") {
		args = append(args, "--listen", "127.0.0.1:-1")
	}
	return append(append(args, sizeArgs...), extra...)
}

// startEngine runs the engine on dir with extra arguments and waits until it runs.
func startEngine(t *testing.T, dir string, extra ...string) *engine {
	t.Helper()
	return startEngineOpts(t, dir, procOpts{args: runArgs(dir, extra...)})
}

func startEngineOpts(t *testing.T, dir string, o procOpts) *engine {
	t.Helper()
	e := &engine{proc: startProc(t, o), dir: dir, opts: o}
	e.recovered = e.waitLog("store recovered")
	running := e.waitLog("engine running")
	e.url, _ = running["nats"].(string)
	if !strings.HasPrefix(e.url, "nats://") {
		t.Fatalf("engine running on %q", e.url)
	}
	if mon, _, ok := e.findLog(0, "monitoring"); ok {
		e.http, _ = mon["http"].(string)
	}
	return e
}

// restart starts the engine again on the same store as it was started, once it has exited.
func (e *engine) restart(t *testing.T) *engine {
	t.Helper()
	e.wait()
	return startEngineOpts(t, e.dir, e.opts)
}
